#include <doctest/doctest.h>

#include <remat/simulate.hpp>
#include <remat/solve.hpp>
#include <remat/solvers/chen_greedy.hpp>
#include <remat/solvers/store_all.hpp>

#include "homogeneous.hpp"
#include "random_chain.hpp"
#include "solver_properties.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <vector>

namespace unit_solvers_chen_greedy_test {

namespace {

using remat::chain;
using remat::size_type;
using remat::testing::homogeneous;

size_type tapes(const chain& c, std::int32_t first, std::int32_t end) {
  size_type sum = 0;
  for (std::int32_t k = first; k < end; ++k) sum += c.stages[static_cast<std::size_t>(k)].tape_size;
  return sum;
}

}  // namespace

TEST_CASE("chen-greedy: a segment ends at the first stage whose tape takes the sum over b") {
  std::mt19937_64 rng(31);
  for (int t = 0; t < 1000; ++t) {
    const chain c = remat::testing::random_chain(rng, {1, 30, 10, false});
    const auto length = static_cast<std::int32_t>(c.length());
    const size_type b = std::uniform_int_distribution<size_type>(0, tapes(c, 0, length))(rng);
    const auto starts = remat::detail::chen_greedy_starts(c, b);
    REQUIRE(starts.front() == 0);
    REQUIRE(std::is_sorted(starts.begin(), starts.end()));
    for (std::size_t r = 0; r < starts.size(); ++r) {
      const std::int32_t end = r + 1 < starts.size() ? starts[r + 1] : length;
      REQUIRE(starts[r] < end);
      // Greedy: without its last stage no segment reaches over b; every one but the last does.
      CHECK(tapes(c, starts[r], end - 1) <= b);
      if (r + 1 < starts.size()) CHECK(tapes(c, starts[r], end) > b);
    }
  }
}

TEST_CASE("chen-greedy: the extremes of the threshold") {
  std::mt19937_64 rng(32);
  for (int t = 0; t < 200; ++t) {
    chain c = remat::testing::random_chain(rng, {1, 20, 10, true});
    for (auto& s : c.stages) s.tape_size = std::max<size_type>(s.tape_size, 1);
    const auto length = static_cast<std::int32_t>(c.length());
    // b = 0: a boundary after every stage; b = all tapes: one segment, which is store-all.
    std::vector<std::int32_t> every(static_cast<std::size_t>(length));
    for (std::int32_t k = 0; k < length; ++k) every[static_cast<std::size_t>(k)] = k;
    CHECK(remat::detail::chen_greedy_starts(c, 0) == every);
    CHECK(remat::detail::chen_greedy_ops(c, tapes(c, 0, length)) ==
          remat::detail::store_all_ops(length));
    const auto grid = remat::detail::chen_greedy_thresholds(c);
    CHECK(grid.front() == 0);
    CHECK(grid.back() == tapes(c, 0, length));
    CHECK(grid.size() <= 11);
    CHECK(std::adjacent_find(grid.begin(), grid.end(), std::greater_equal<>()) == grid.end());
  }
}

TEST_CASE("chen-greedy: the grid is centred on the geometric mean of the b = 0 pass") {
  // 17 unit stages: b = 0 stores 16 activations and its largest segment has 1 tape, so the
  // centre is sqrt(16 * 1) = 4; the grid is 4 * 2^(k/2), k = -4 .. 4, rounded, and 0 and 17.
  CHECK(remat::detail::chen_greedy_thresholds(homogeneous(17)) ==
        std::vector<size_type>{0, 1, 2, 3, 4, 6, 8, 11, 16, 17});
  // With b = 4 a segment closes when its fifth tape arrives.
  CHECK(remat::detail::chen_greedy_starts(homogeneous(17), 4) ==
        std::vector<std::int32_t>{0, 5, 10, 15});
}

TEST_CASE("chen-greedy: the fastest grid point that fits, and the least peak of the grid") {
  std::mt19937_64 rng(33);
  for (int t = 0; t < 500; ++t) {
    const chain c = remat::testing::random_chain(rng, {1, 12, 10, true});
    std::vector<remat::replay_result> by_b;
    size_type least_peak = std::numeric_limits<size_type>::max();
    size_type most_peak = 0;
    for (const size_type b : remat::detail::chen_greedy_thresholds(c)) {
      const auto ops = remat::detail::chen_greedy_ops(c, b);
      by_b.push_back(remat::simulate(c, std::span<const remat::op>(ops)));
      REQUIRE(by_b.back().valid());
      least_peak = std::min(least_peak, by_b.back().peak_memory);
      most_peak = std::max(most_peak, by_b.back().peak_memory);
    }
    for (size_type budget = std::max<size_type>(least_peak - 1, 0); budget <= most_peak; ++budget) {
      const auto r = remat::solve_chen_greedy(c, budget);
      CHECK(r.min_feasible_budget == least_peak);
      CHECK(r.feasible == (budget >= least_peak));
      if (!r.feasible) continue;
      double best = std::numeric_limits<double>::infinity();
      for (const auto& p : by_b)
        if (p.peak_memory <= budget) best = std::min(best, p.makespan);
      CHECK(r.schedule.makespan == best);
    }
  }
}

TEST_CASE("chen-greedy: replays within the budget, never beats optimal, reports infeasibility") {
  const auto n = remat::testing::check_solver_properties(
      [](const chain& c, size_type b) { return remat::solve_chen_greedy(c, b); }, {.seed = 34});
  CHECK(n.cases == 2000);
  CHECK(n.feasible > 500);
  CHECK(n.infeasible > 100);
}

TEST_CASE("chen-greedy: from remat::solve, by name, and at compile time") {
  CHECK(remat::solver_from_name("chen-greedy") == remat::solver::chen_greedy);
  std::mt19937_64 rng(35);
  const chain c = remat::testing::random_chain(rng, {9, 9, 10, true});
  for (const size_type budget : {0, 40, 1000}) {
    const auto via_solve = remat::solve(c, budget, {.solver = remat::solver::chen_greedy});
    const auto direct = remat::solve_chen_greedy(c, budget);
    CHECK(via_solve.feasible == direct.feasible);
    CHECK(via_solve.schedule == direct.schedule);
    CHECK(via_solve.min_feasible_budget == direct.min_feasible_budget);
  }
  CHECK_THROWS_AS(remat::solve_chen_greedy(c, -1), remat::solver_error);
  static_assert(remat::detail::newton_sqrt(16) == 4);
  static_assert([] {
    const auto r = remat::solve_chen_greedy(homogeneous(17), 1000);
    return r.feasible && r.schedule.makespan == 17;  // store-all: 17 forwards, no backward time
  }());
}

}  // namespace unit_solvers_chen_greedy_test
