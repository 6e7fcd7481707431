#include <doctest/doctest.h>

#include <remat/simulate.hpp>
#include <remat/solve.hpp>
#include <remat/solvers/chen_sqrt.hpp>

#include "random_chain.hpp"
#include "solver_properties.hpp"

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace unit_solvers_chen_sqrt_test {

namespace {

using remat::chain;
using remat::op;
using remat::op_kind;
using remat::size_type;

std::vector<op> forward_part(const std::vector<op>& ops) {
  std::vector<op> out;
  for (const op& o : ops) {
    if (o.kind == op_kind::loss) break;
    out.push_back(o);
  }
  return out;
}

}  // namespace

TEST_CASE("chen-sqrt: floor(sqrt(L))") {
  using remat::detail::floor_sqrt;
  CHECK(floor_sqrt(1) == 1);
  CHECK(floor_sqrt(3) == 1);
  CHECK(floor_sqrt(4) == 2);
  CHECK(floor_sqrt(8) == 2);
  CHECK(floor_sqrt(9) == 3);
  CHECK(floor_sqrt(99) == 9);
  CHECK(floor_sqrt(100) == 10);
  CHECK(floor_sqrt(2147395600) == 46340);
  CHECK(floor_sqrt(2147483647) == 46340);
}

TEST_CASE("chen-sqrt: checkpoints every floor(sqrt(L))-th stage input, records the last run") {
  for (std::int32_t length = 1; length <= 80; ++length) {
    CAPTURE(length);
    std::int32_t s = 1;
    while ((s + 1) * (s + 1) <= length) ++s;
    const std::int32_t last_start = (length - 1) / s * s;
    const std::vector<op> forward = forward_part(remat::detail::chen_sqrt_ops(length));
    REQUIRE(forward.size() == static_cast<std::size_t>(length));
    for (std::int32_t k = 0; k < length; ++k) {
      const op o = forward[static_cast<std::size_t>(k)];
      CHECK(o.stage == k);
      if (k >= last_start)
        CHECK(o.kind == op_kind::forward_all);
      else if (k % s == 0)
        CHECK(o.kind == op_kind::forward_checkpoint);
      else
        CHECK(o.kind == op_kind::forward_none);
    }
    // On a perfect square the recomputed stages are the first L - sqrt(L) (Chen's count).
    if (s * s == length) CHECK(last_start == length - s);
  }
}

TEST_CASE("chen-sqrt: one extra forward over every stage before the last run") {
  std::mt19937_64 rng(21);
  for (int t = 0; t < 500; ++t) {
    const chain c = remat::testing::random_chain(rng, {1, 40, 10, true});
    const auto length = static_cast<std::int32_t>(c.length());
    const std::int32_t s = remat::detail::floor_sqrt(length);
    const std::int32_t last_start = (length - 1) / s * s;
    double expected = c.loss_time;
    for (std::int32_t k = 0; k < length; ++k) {
      const auto& st = c.stages[static_cast<std::size_t>(k)];
      expected += st.forward_time + st.backward_time + (k < last_start ? st.forward_time : 0);
    }
    const auto ops = remat::detail::chen_sqrt_ops(length);
    const auto r = remat::simulate(c, std::span<const op>(ops));
    REQUIRE(r.valid());
    CHECK(r.makespan == expected);
    // No knob: feasible exactly from the schedule's own peak.
    const auto below = remat::solve_chen_sqrt(c, r.peak_memory - 1);
    const auto at = remat::solve_chen_sqrt(c, r.peak_memory);
    CHECK_FALSE(below.feasible);
    CHECK(below.min_feasible_budget == r.peak_memory);
    REQUIRE(at.feasible);
    CHECK(at.schedule.ops == ops);
    CHECK(at.schedule.makespan == expected);
  }
}

TEST_CASE("chen-sqrt: replays within the budget, never beats optimal, reports infeasibility") {
  const auto n = remat::testing::check_solver_properties(
      [](const chain& c, size_type b) { return remat::solve_chen_sqrt(c, b); }, {.seed = 22});
  CHECK(n.cases == 2000);
  CHECK(n.feasible > 500);
  CHECK(n.infeasible > 100);
}

TEST_CASE("chen-sqrt: from remat::solve, by name, and at compile time") {
  CHECK(remat::solver_from_name("chen-sqrt") == remat::solver::chen_sqrt);
  std::mt19937_64 rng(23);
  const chain c = remat::testing::random_chain(rng, {9, 9, 10, true});
  for (const size_type budget : {0, 40, 1000}) {
    const auto via_solve = remat::solve(c, budget, {.solver = remat::solver::chen_sqrt});
    const auto direct = remat::solve_chen_sqrt(c, budget);
    CHECK(via_solve.feasible == direct.feasible);
    CHECK(via_solve.schedule == direct.schedule);
    CHECK(via_solve.min_feasible_budget == direct.min_feasible_budget);
  }
  CHECK_THROWS_AS(remat::solve_chen_sqrt(c, -1), remat::solver_error);
  // Four unit stages: runs [0, 2) and [2, 4), so stages 0 and 1 are forwarded twice.
  static_assert([] {
    chain k{{{1, 1, 2, 3}, {1, 1, 2, 3}, {1, 1, 2, 3}, {1, 1, 2, 3}}, 2, 0, 0};
    const auto r = remat::solve_chen_sqrt(k, 1000);
    return r.feasible && r.schedule.makespan == 10;
  }());
}

}  // namespace unit_solvers_chen_sqrt_test
