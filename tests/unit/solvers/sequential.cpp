#include <doctest/doctest.h>

#include <remat/simulate.hpp>
#include <remat/solve.hpp>
#include <remat/solvers/sequential.hpp>
#include <remat/solvers/store_all.hpp>

#include "random_chain.hpp"
#include "solver_properties.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace unit_solvers_sequential_test {

namespace {

using remat::chain;
using remat::size_type;

std::vector<remat::op> ops(std::initializer_list<remat::op> list) {
  return list;
}

// BASELINES.md: sum fw + sum bw (loss included) + fw of every stage outside the last segment.
double closed_form_makespan(const chain& c, std::int32_t segments) {
  const auto length = static_cast<std::int32_t>(c.length());
  const std::int32_t recomputed = (segments - 1) * (length / segments);
  double t = c.loss_time;
  for (std::int32_t k = 0; k < length; ++k) {
    const auto& s = c.stages[static_cast<std::size_t>(k)];
    t += s.forward_time + s.backward_time + (k < recomputed ? s.forward_time : 0);
  }
  return t;
}

}  // namespace

TEST_CASE("sequential: runs of L // k stages, the last taking the rest, as PyTorch splits them") {
  CHECK(remat::detail::sequential_starts(10, 1) == std::vector<std::int32_t>{0});
  CHECK(remat::detail::sequential_starts(10, 3) == std::vector<std::int32_t>{0, 3, 6});
  CHECK(remat::detail::sequential_starts(10, 4) == std::vector<std::int32_t>{0, 2, 4, 6});
  CHECK(remat::detail::sequential_starts(10, 6) == std::vector<std::int32_t>{0, 1, 2, 3, 4, 5});
  CHECK(remat::detail::sequential_starts(10, 10) ==
        std::vector<std::int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
}

TEST_CASE("sequential: the ops of checkpointed runs and of the last run") {
  using namespace remat;
  // Runs [0, 2) and [2, 5): the first checkpointed, the second recorded.
  CHECK(detail::sequential_ops(5, 2) ==
        ops({f_ck(0), f_none(1), f_all(2), f_all(3), f_all(4), loss_op(5), backward(4), backward(3),
             backward(2), f_all(0), f_all(1), backward(1), backward(0)}));
  // Runs [0, 1), [1, 2), [2, 3).
  CHECK(detail::sequential_ops(3, 3) == ops({f_ck(0), f_ck(1), f_all(2), loss_op(3), backward(2),
                                             f_all(1), backward(1), f_all(0), backward(0)}));
  for (std::int32_t length = 1; length <= 20; ++length)
    CHECK(detail::sequential_ops(length, 1) == remat::detail::store_all_ops(length));
}

TEST_CASE("sequential: every segment count replays to the closed-form makespan") {
  std::mt19937_64 rng(11);
  for (int t = 0; t < 300; ++t) {
    const chain c = remat::testing::random_chain(rng, {1, 30, 10, true});
    const auto length = static_cast<std::int32_t>(c.length());
    for (std::int32_t k = 1; k <= length; ++k) {
      const auto r =
          remat::simulate(c, std::span<const remat::op>(remat::detail::sequential_ops(length, k)));
      REQUIRE(r.valid());
      CHECK(r.makespan == closed_form_makespan(c, k));
    }
  }
}

TEST_CASE("sequential: the fastest segment count that fits, and the least peak of all") {
  std::mt19937_64 rng(12);
  for (int t = 0; t < 500; ++t) {
    const chain c = remat::testing::random_chain(rng, {1, 12, 10, true});
    const auto length = static_cast<std::int32_t>(c.length());
    std::vector<remat::replay_result> by_k;
    size_type least_peak = std::numeric_limits<size_type>::max();
    size_type most_peak = 0;
    for (std::int32_t k = 1; k <= length; ++k) {
      by_k.push_back(
          remat::simulate(c, std::span<const remat::op>(remat::detail::sequential_ops(length, k))));
      least_peak = std::min(least_peak, by_k.back().peak_memory);
      most_peak = std::max(most_peak, by_k.back().peak_memory);
    }
    for (size_type budget = std::max<size_type>(least_peak - 1, 0); budget <= most_peak; ++budget) {
      const auto r = remat::solve_sequential(c, budget);
      CHECK(r.min_feasible_budget == least_peak);
      CHECK(r.feasible == (budget >= least_peak));
      if (!r.feasible) continue;
      double best = std::numeric_limits<double>::infinity();
      for (const auto& k : by_k)
        if (k.peak_memory <= budget) best = std::min(best, k.makespan);
      CHECK(r.schedule.makespan == best);
      CHECK(r.unit == 1);
    }
  }
}

TEST_CASE("sequential: replays within the budget, never beats optimal, reports infeasibility") {
  const auto n = remat::testing::check_solver_properties(
      [](const chain& c, size_type b) { return remat::solve_sequential(c, b); }, {.seed = 13});
  CHECK(n.cases == 2000);
  CHECK(n.feasible > 500);
  CHECK(n.infeasible > 100);
}

TEST_CASE("sequential: from remat::solve, by name, and at compile time") {
  CHECK(remat::solver_from_name("sequential") == remat::solver::sequential);
  std::mt19937_64 rng(14);
  const chain c = remat::testing::random_chain(rng, {6, 6, 10, true});
  for (const size_type budget : {0, 40, 1000}) {
    const auto via_solve = remat::solve(c, budget, {.solver = remat::solver::sequential});
    const auto direct = remat::solve_sequential(c, budget);
    CHECK(via_solve.feasible == direct.feasible);
    CHECK(via_solve.schedule == direct.schedule);
    CHECK(via_solve.min_feasible_budget == direct.min_feasible_budget);
  }
  CHECK_THROWS_AS(remat::solve_sequential(c, -1), remat::solver_error);
  static_assert([] {
    chain k{{{1, 1, 2, 3}, {1, 1, 2, 3}, {1, 1, 2, 3}, {1, 1, 2, 3}}, 2, 0, 0};
    const auto all = remat::solve_sequential(k, 1000);
    const auto two = remat::solve_sequential(k, all.schedule.peak_memory - 1);
    return all.feasible && all.schedule.makespan == 8 && two.feasible &&
           two.schedule.makespan == 10;
  }());
}

}  // namespace unit_solvers_sequential_test
