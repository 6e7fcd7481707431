#include <doctest/doctest.h>

#include <remat/simulate.hpp>
#include <remat/solve.hpp>
#include <remat/solvers/min_memory.hpp>

#include "random_chain.hpp"
#include "solver_properties.hpp"

#include <cstdint>
#include <random>
#include <vector>

namespace unit_solvers_min_memory_test {

namespace {

using remat::chain;
using remat::size_type;

constexpr remat::solve_options exact{.solver = remat::solver::optimal, .slots = remat::exact_units};

// The least budget at which the optimal DP finds a schedule, by bisection on its feasibility.
size_type bisect_optimal(const chain& c) {
  size_type lo = -1;                                                // infeasible (budgets are >= 0)
  size_type hi = remat::solve_store_all(c, 0).min_feasible_budget;  // feasible
  while (hi - lo > 1) {
    const size_type mid = lo + (hi - lo) / 2;
    (remat::solve_optimal(c, mid, exact).feasible ? hi : lo) = mid;
  }
  return hi;
}

}  // namespace

TEST_CASE("min-memory: its peak is the least persistent budget, found without bisection") {
  std::mt19937_64 rng(61);
  for (int t = 0; t < 1000; ++t) {
    const chain c = remat::testing::random_chain(rng, {1, 12, 10, true});
    CAPTURE(t);
    const auto r = remat::solve_min_memory(c, remat::max_size);
    REQUIRE(r.feasible);
    CHECK(r.schedule.peak_memory == r.min_feasible_budget);
    CHECK(r.min_feasible_budget == bisect_optimal(c));
    CHECK(r.min_feasible_budget ==
          remat::detail::persistent_min_budget(remat::detail::make_model(c, 1)));
  }
}

TEST_CASE("min-memory: the exact frontier's first point and the least-peak DP agree") {
  // The least budget of both, and the frontier's schedule there is the fastest at that peak.
  std::mt19937_64 rng(67);
  for (int t = 0; t < 1000; ++t) {
    const chain c = remat::testing::random_chain(rng, {1, 12, 10, true});
    CAPTURE(t);
    const auto r = remat::solve_min_memory(c, remat::max_size);
    const auto reference = remat::detail::min_memory_least_peak(c, remat::max_size, {});
    REQUIRE(r.feasible);
    REQUIRE(reference.feasible);
    CHECK(r.min_feasible_budget == reference.min_feasible_budget);
    CHECK(reference.schedule.peak_memory == reference.min_feasible_budget);
    CHECK(r.schedule.makespan <= reference.schedule.makespan);
    const auto fastest = remat::solve_optimal(c, r.min_feasible_budget, exact);
    CHECK(r.schedule.makespan == fastest.schedule.makespan);
    CHECK(r.schedule.ops == fastest.schedule.ops);
  }
}

TEST_CASE("min-memory: the least-peak DP where the exact frontier passes the limits") {
  // A long chain of uneven sizes: its exact solve at the least budget passes a limit of 2 ms,
  // which the O(L^3) least-peak DP does not.
  std::mt19937_64 rng(68);
  const chain c = remat::testing::random_chain(rng, {60, 60, 1000, true});
  const remat::solve_options tight{.solver = remat::solver::min_memory,
                                   .max_estimated_seconds = 0.002};
  const size_type least = remat::solve_optimal(c, 0).min_feasible_budget;
  REQUIRE_THROWS_AS((void)remat::solve_optimal(c, least,
                                               {.slots = remat::exact_units,
                                                .max_estimated_seconds = tight.max_estimated_seconds}),
                    remat::solver_error);
  for (const size_type budget : {size_type{0}, remat::max_size}) {
    const auto r = remat::solve_min_memory(c, budget, tight);
    CHECK(r == remat::detail::min_memory_least_peak(c, budget, tight));
    // The same least budget as the exact frontier's, with the limit lifted.
    CHECK(r.min_feasible_budget == remat::solve_min_memory(c, budget).min_feasible_budget);
  }
}

TEST_CASE("min-memory: no baseline needs less, the exhaustive search may") {
  std::mt19937_64 rng(62);
  for (int t = 0; t < 400; ++t) {
    const chain c = remat::testing::random_chain(rng, {1, 12, 10, true});
    CAPTURE(t);
    const size_type least = remat::solve_min_memory(c, 0).min_feasible_budget;
    for (const remat::solver s : remat::all_solvers) {
      if (s == remat::solver::exhaustive || remat::needs_link(s)) continue;
      CAPTURE(remat::name(s));
      CHECK(least <=
            remat::solve(c, 0, {.solver = s, .slots = remat::exact_units}).min_feasible_budget);
    }
    if (c.length() <= 4) CHECK(remat::solve_exhaustive(c, 0).min_feasible_budget <= least);
  }
}

TEST_CASE("min-memory: the same schedule at every budget that fits") {
  std::mt19937_64 rng(63);
  for (int t = 0; t < 300; ++t) {
    const chain c = remat::testing::random_chain(rng, {1, 12, 10, true});
    const auto least = remat::solve_min_memory(c, remat::max_size);
    for (size_type extra = 0; extra <= 20; ++extra)
      CHECK(remat::solve_min_memory(c, least.min_feasible_budget + extra).schedule ==
            least.schedule);
    if (least.min_feasible_budget > 0) {
      const auto below = remat::solve_min_memory(c, least.min_feasible_budget - 1);
      CHECK_FALSE(below.feasible);
      CHECK(below.schedule.ops.empty());
    }
  }
}

TEST_CASE("min-memory: ties in peak go to the faster schedule") {
  // With every size 0 every schedule has peak 0; the fastest is store-all (no recomputation).
  std::mt19937_64 rng(64);
  for (int t = 0; t < 200; ++t) {
    chain c = remat::testing::random_chain(rng, {1, 12, 10, true});
    c.input_size = 0;
    c.loss_overhead = 0;
    double store_all = c.loss_time;
    for (auto& s : c.stages) {
      s = {s.forward_time, s.backward_time, 0, 0, 0, 0};
      store_all += s.forward_time + s.backward_time;
    }
    const auto r = remat::solve_min_memory(c, 0);
    REQUIRE(r.feasible);
    CHECK(r.schedule.makespan == store_all);
  }
}

TEST_CASE("min-memory: replays within the budget, never beats optimal, reports infeasibility") {
  const auto n = remat::testing::check_solver_properties(
      [](const chain& c, size_type b) { return remat::solve_min_memory(c, b); }, {.seed = 65});
  CHECK(n.cases == 2000);
  CHECK(n.feasible > 500);
  CHECK(n.infeasible > 100);
}

TEST_CASE("min-memory: from remat::solve, by name, and at compile time") {
  CHECK(remat::solver_from_name("min-memory") == remat::solver::min_memory);
  std::mt19937_64 rng(66);
  const chain c = remat::testing::random_chain(rng, {9, 9, 10, true});
  for (const size_type budget : {0, 40, 1000}) {
    const auto via_solve = remat::solve(c, budget, {.solver = remat::solver::min_memory});
    const auto direct = remat::solve_min_memory(c, budget);
    CHECK(via_solve.feasible == direct.feasible);
    CHECK(via_solve.schedule == direct.schedule);
    CHECK(via_solve.min_feasible_budget == direct.min_feasible_budget);
    CHECK(via_solve.unit == 1);
  }
  CHECK_THROWS_AS(remat::solve_min_memory(c, -1), remat::solver_error);
  static_assert([] {
    // Homogeneous, 6 stages: one snapshot besides the 4 a base case needs, as for Revolve.
    chain k;
    k.input_size = 1;
    k.stages.assign(6, remat::stage{1, 0, 1, 1, 0, 0});
    return remat::solve_min_memory(k, 100).min_feasible_budget == 5;
  }());
}

}  // namespace unit_solvers_min_memory_test
