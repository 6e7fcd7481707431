#include <doctest/doctest.h>

#include <remat/simulate.hpp>
#include <remat/solve.hpp>
#include <remat/solvers/checkpoint_only.hpp>
#include <remat/solvers/min_memory.hpp>
#include <remat/solvers/store_all.hpp>

#include "homogeneous.hpp"
#include "random_chain.hpp"
#include "reference_dp.hpp"
#include "solver_properties.hpp"

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace unit_solvers_checkpoint_only_test {

namespace {

using remat::chain;
using remat::op;
using remat::op_kind;
using remat::size_type;
using remat::testing::homogeneous;

constexpr remat::solve_options exact{.solver = remat::solver::checkpoint_only,
                                     .slots = remat::exact_units};

// docs/model.md's oracle: on the homogeneous chain the makespan at total budget M is
// L + t(L, M - 4) + 1, t(l, s) = r l - C(s + r, s + 1), r the least with C(s + r, s) >= l;
// negative when no schedule fits.
double homogeneous_makespan(std::int64_t length, std::int64_t budget) {
  const std::int64_t s = budget - 4;
  if (s < 0 || (s == 0 && length > 1)) return -1;
  return static_cast<double>(length + remat::testing::binomial_count(length, s) + 1);
}

}  // namespace

TEST_CASE("checkpoint-only: Revolve's binomial count on the homogeneous chain, every budget") {
  // One table per length holds OPT at every budget up to where it stops decreasing.
  for (std::int32_t length = 1; length <= 50; ++length) {
    const auto md = remat::detail::make_model(homogeneous(length), 1);
    const size_type top = length + 6;
    const auto t =
        remat::detail::reference_dp(md, top - md.x[0], remat::detail::dp_branches::checkpoint_only);
    for (size_type budget = md.x[0]; budget <= top; ++budget) {  // below it, not even a_0 fits
      CAPTURE(length);
      CAPTURE(budget);
      const double expected = homogeneous_makespan(length, budget);
      const double got = t.value[t.at(0, length, budget - md.x[0])];
      if (expected < 0)
        CHECK(got == remat::detail::infinite_time);
      else
        CHECK(got == expected);
    }
  }
}

TEST_CASE("checkpoint-only: the solver on the homogeneous chain matches the binomial count") {
  for (std::int32_t length = 1; length <= 50; ++length) {
    const chain c = homogeneous(length);
    std::vector<size_type> budgets{0, 3, 4, 5, 6, length + 3, length + 10};
    if (length <= 20)
      for (size_type b = 0; b <= length + 6; ++b) budgets.push_back(b);
    for (const size_type budget : budgets) {
      CAPTURE(length);
      CAPTURE(budget);
      const double expected = homogeneous_makespan(length, budget);
      const auto r = remat::solve_checkpoint_only(c, budget, exact);
      REQUIRE(r.feasible == (expected >= 0));
      CHECK(r.min_feasible_budget == (length == 1 ? 4 : 5));
      if (r.feasible) CHECK(r.schedule.makespan == expected);
    }
  }
}

TEST_CASE("checkpoint-only: agrees with an independent transcription of the DP") {
  std::mt19937_64 rng(50);
  for (int t = 0; t < 300; ++t) {
    const chain c = remat::testing::random_chain(rng, {1, 10, 10, true});
    remat::testing::reference_dp reference(c, {.tape_branch = false});
    const size_type least = remat::solve_checkpoint_only(c, 0, exact).min_feasible_budget;
    for (const size_type budget : {std::max<size_type>(least - 1, 0), least,
                                   least + std::uniform_int_distribution<size_type>(1, 80)(rng)}) {
      CAPTURE(t);
      CAPTURE(budget);
      const auto r = remat::solve_checkpoint_only(c, budget, exact);
      const double expected = reference(budget);
      REQUIRE(r.feasible == (expected < remat::testing::reference_dp::inf));
      if (r.feasible) CHECK(r.schedule.makespan == expected);
    }
  }
}

TEST_CASE("checkpoint-only: no tape outside the base case, every stage forwarded twice") {
  std::mt19937_64 rng(51);
  for (int t = 0; t < 500; ++t) {
    const chain c = remat::testing::random_chain(rng, {1, 12, 10, true});
    const auto length = static_cast<std::int32_t>(c.length());
    const size_type least = remat::solve_checkpoint_only(c, 0, exact).min_feasible_budget;
    const size_type budget = least + std::uniform_int_distribution<size_type>(0, 60)(rng);
    const auto r = remat::solve_checkpoint_only(c, budget, exact);
    REQUIRE(r.feasible);
    const auto& ops = r.schedule.ops;
    std::vector<int> forwards(c.length(), 0);
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].kind == op_kind::backward) continue;
      if (ops[i].kind == op_kind::loss) {
        REQUIRE(i > 0);
        CHECK(ops[i - 1].kind != op_kind::forward_all);
        continue;
      }
      ++forwards[static_cast<std::size_t>(ops[i].stage)];
      if (ops[i].kind == op_kind::forward_all) {
        REQUIRE(i + 1 < ops.size());
        CHECK(ops[i + 1] == remat::backward(ops[i].stage));
      }
    }
    for (std::int32_t k = 0; k < length; ++k) CHECK(forwards[static_cast<std::size_t>(k)] >= 2);
    // Never faster than the DP with the tape branch, which contains it.
    const auto best = remat::solve_optimal(c, budget, {.slots = remat::exact_units});
    CHECK(best.schedule.makespan <= r.schedule.makespan);
  }
}

TEST_CASE(
    "checkpoint-only: replays within the budget, never beats optimal, reports infeasibility") {
  const auto n = remat::testing::check_solver_properties(
      [](const chain& c, size_type b) { return remat::solve_checkpoint_only(c, b, exact); },
      {.seed = 52});
  CHECK(n.cases == 2000);
  CHECK(n.feasible > 500);
  CHECK(n.infeasible > 100);
}

TEST_CASE("checkpoint-only: with slots, rounded sizes still fit the byte budget") {
  std::mt19937_64 rng(53);
  int feasible = 0;
  for (int t = 0; t < 600; ++t) {
    const chain c = remat::testing::random_chain(rng, {1, 12, 1000, true});
    const size_type slots = std::uniform_int_distribution<size_type>(4, 60)(rng);
    const size_type lowest = remat::solve_min_memory(c, 0).min_feasible_budget;
    const size_type highest = remat::solve_store_all(c, 0).min_feasible_budget;
    const size_type budget = std::uniform_int_distribution<size_type>(lowest - 3, highest * 2)(rng);
    CAPTURE(t);
    CAPTURE(slots);
    CAPTURE(budget);
    const remat::solve_options o{.solver = remat::solver::checkpoint_only, .slots = slots};
    const auto r = remat::solve_checkpoint_only(c, budget, o);
    CHECK(r.unit == std::max<size_type>(1, (budget + slots - 1) / slots));
    if (r.feasible) {
      ++feasible;
      const auto replayed = remat::simulate(c, r.schedule);
      REQUIRE(replayed.valid());
      CHECK(replayed.peak_memory <= budget);
      CHECK(replayed.makespan == r.schedule.makespan);
    } else {
      CHECK(r.schedule.ops.empty());
    }
    // Rounding can make feasibility non-monotone in the budget, so the reported least budget is
    // only promised to be feasible (or absent, when too few slots can never hold the chain).
    if (r.min_feasible_budget != remat::solve_result::no_budget)
      CHECK(remat::solve_checkpoint_only(c, r.min_feasible_budget, o).feasible);
  }
  CHECK(feasible > 100);
}

TEST_CASE("checkpoint-only: from remat::solve, by name, errors, and at compile time") {
  CHECK(remat::solver_from_name("checkpoint-only") == remat::solver::checkpoint_only);
  std::mt19937_64 rng(54);
  const chain c = remat::testing::random_chain(rng, {9, 9, 10, true});
  for (const size_type budget : {0, 40, 1000}) {
    const auto via_solve = remat::solve(c, budget, exact);
    const auto direct = remat::solve_checkpoint_only(c, budget, exact);
    CHECK(via_solve.feasible == direct.feasible);
    CHECK(via_solve.schedule == direct.schedule);
    CHECK(via_solve.min_feasible_budget == direct.min_feasible_budget);
  }
  CHECK_THROWS_AS(remat::solve_checkpoint_only(c, -1), remat::solver_error);
  // At the least budget, below checkpoint-all's peak: the DP must run.
  const size_type least = remat::solve_checkpoint_only(c, 0, exact).min_feasible_budget;
  try {
    // With as many slots as units the dense DP runs on the sizes as given.
    (void)remat::solve_checkpoint_only(c, least, {.slots = least, .max_table_bytes = 1});
    FAIL("a table over the limit must be refused");
  } catch (const remat::solver_error& e) {
    CHECK(std::string(e.what()).starts_with("checkpoint-only: the DP table"));
  }
  // The frontier DP's memory has its limit too; below the least budget no frontier is needed.
  CHECK_THROWS_WITH_AS((void)remat::solve_checkpoint_only(c, least, {.max_table_bytes = 1}),
                       doctest::Contains("checkpoint-only: refused: the exact DP"),
                       remat::solver_error);
  CHECK_FALSE(remat::solve_checkpoint_only(c, least - 1, {.max_table_bytes = 1}).feasible);
  static_assert([] {
    const auto r = remat::solve_checkpoint_only(homogeneous(6), 6, exact);
    return r.feasible && r.schedule.makespan == 6 + 8 + 1;  // t(6, 2) = 3 * 6 - C(5, 3)
  }());
}

}  // namespace unit_solvers_checkpoint_only_test
