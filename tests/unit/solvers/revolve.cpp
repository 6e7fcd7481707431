#include <doctest/doctest.h>

#include <remat/simulate.hpp>
#include <remat/solve.hpp>
#include <remat/solvers/revolve.hpp>

#include "homogeneous.hpp"
#include "random_chain.hpp"
#include "solver_properties.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <vector>

namespace unit_solvers_revolve_test {

namespace {

using remat::chain;
using remat::op;
using remat::op_kind;
using remat::size_type;
using remat::testing::binomial;
using remat::testing::binomial_count;
using remat::testing::homogeneous;

constexpr std::int64_t none = -1;  // t(l, 0) for l >= 2: no schedule

// The same count from its definition: the best first advance m, then the last l - m steps with
// one snapshot fewer and the first m with all of them.
std::vector<std::vector<std::int64_t>> recursive_counts(std::int64_t max_l, std::int64_t max_s) {
  std::vector<std::vector<std::int64_t>> t(
      static_cast<std::size_t>(max_l + 1),
      std::vector<std::int64_t>(static_cast<std::size_t>(max_s + 1), none));
  auto at = [&](std::int64_t l, std::int64_t s) -> std::int64_t& {
    return t[static_cast<std::size_t>(l)][static_cast<std::size_t>(s)];
  };
  for (std::int64_t s = 0; s <= max_s; ++s) at(1, s) = 0;
  for (std::int64_t l = 2; l <= max_l; ++l)
    for (std::int64_t s = 1; s <= max_s; ++s)
      for (std::int64_t m = 1; m < l; ++m) {
        if (at(l - m, s - 1) == none) continue;
        const std::int64_t v = m + at(l - m, s - 1) + at(m, s);
        if (at(l, s) == none || v < at(l, s)) at(l, s) = v;
      }
  return t;
}

}  // namespace

TEST_CASE("revolve: the binomial formula is the count of its recursive definition") {
  const auto t = recursive_counts(60, 12);
  for (std::int64_t l = 1; l <= 60; ++l)
    for (std::int64_t s = 0; s <= 12; ++s) {
      CAPTURE(l);
      CAPTURE(s);
      CHECK(binomial_count(l, s) == t[static_cast<std::size_t>(l)][static_cast<std::size_t>(s)]);
    }
  CHECK(binomial_count(10, 1) == 45);
  CHECK(binomial_count(10, 2) == 20);  // r = 3: 30 - C(5, 3)
  CHECK(binomial_count(10, 9) == 9);
}

TEST_CASE("revolve: the split is the largest optimal first advance") {
  for (std::int64_t n = 2; n <= 200; ++n)
    for (std::int64_t c = 1; c <= 14; ++c) {
      CAPTURE(n);
      CAPTURE(c);
      CHECK(remat::detail::revolve_repetitions(n, c) == [&] {
        std::int64_t r = 0;
        while (binomial(c + r, c) < n) ++r;
        return r;
      }());
      std::int64_t largest = 0;
      for (std::int64_t m = 1; m < n; ++m) {
        const std::int64_t right = binomial_count(n - m, c - 1);
        if (right != none && m + right + binomial_count(m, c) == binomial_count(n, c)) largest = m;
      }
      CHECK(remat::detail::revolve_split(n, c) == largest);
    }
}

TEST_CASE("revolve: with s snapshots it makes L recording forwards and t(L, s) advances") {
  for (std::int32_t length = 1; length <= 60; ++length) {
    const chain c = homogeneous(length);
    for (std::int32_t s = 1; s <= length; ++s) {
      CAPTURE(length);
      CAPTURE(s);
      const std::vector<op> ops = remat::detail::revolve_ops(length, s);
      std::int64_t advances = 0, records = 0, backwards = 0;
      for (const op& o : ops) {
        advances += o.kind == op_kind::forward_checkpoint || o.kind == op_kind::forward_none;
        records += o.kind == op_kind::forward_all;
        backwards += o.kind == op_kind::backward;
      }
      CHECK(advances == binomial_count(length, s));
      CHECK(records == length);
      CHECK(backwards == length);
      const auto r = remat::simulate(c, std::span<const op>(ops));
      REQUIRE(r.valid());
      // The s snapshots (a_0 among them), the state worked on, a tape and two gradients.
      if (s < length - 1)
        CHECK(r.peak_memory == s + 4);
      else
        CHECK(r.peak_memory <= s + 4);
    }
  }
}

TEST_CASE("revolve: on the homogeneous chain it reaches the binomial count with M - 4 slots") {
  for (std::int32_t length = 1; length <= 30; ++length) {
    const chain c = homogeneous(length);
    for (size_type budget = 0; budget <= length + 6; ++budget) {
      CAPTURE(length);
      CAPTURE(budget);
      const auto r = remat::solve_revolve(c, budget);
      const std::int64_t count = budget >= 4 ? binomial_count(length, budget - 4) : none;
      const bool slots_fit = length == 1 ? budget >= 4 : budget >= 5;
      REQUIRE(r.feasible == slots_fit);
      CHECK(r.min_feasible_budget == (length == 1 ? 4 : 5));
      if (r.feasible) CHECK(r.schedule.makespan == static_cast<double>(length + count));
    }
  }
}

TEST_CASE("revolve: the most snapshots whose schedule fits, on real sizes") {
  std::mt19937_64 rng(41);
  for (int t = 0; t < 300; ++t) {
    const chain c = remat::testing::random_chain(rng, {1, 12, 10, true});
    const auto length = static_cast<std::int32_t>(c.length());
    const std::int32_t most = std::max(length - 1, 1);
    std::vector<remat::replay_result> by_s(static_cast<std::size_t>(most) + 1);
    size_type least_peak = std::numeric_limits<size_type>::max();
    size_type most_peak = 0;
    for (std::int32_t s = 1; s <= most; ++s) {
      const auto ops = remat::detail::revolve_ops(length, s);
      by_s[static_cast<std::size_t>(s)] = remat::simulate(c, std::span<const op>(ops));
      least_peak = std::min(least_peak, by_s[static_cast<std::size_t>(s)].peak_memory);
      most_peak = std::max(most_peak, by_s[static_cast<std::size_t>(s)].peak_memory);
    }
    for (size_type budget = std::max<size_type>(least_peak - 1, 0); budget <= most_peak; ++budget) {
      const auto r = remat::solve_revolve(c, budget);
      CHECK(r.min_feasible_budget == least_peak);
      CHECK(r.feasible == (budget >= least_peak));
      if (!r.feasible) continue;
      std::int32_t s = most;
      while (by_s[static_cast<std::size_t>(s)].peak_memory > budget) --s;
      CHECK(r.schedule.ops == remat::detail::revolve_ops(length, s));
    }
  }
}

TEST_CASE("revolve: replays within the budget, never beats optimal, reports infeasibility") {
  const auto n = remat::testing::check_solver_properties(
      [](const chain& c, size_type b) { return remat::solve_revolve(c, b); }, {.seed = 42});
  CHECK(n.cases == 2000);
  CHECK(n.feasible > 500);
  CHECK(n.infeasible > 100);
}

TEST_CASE("revolve: from remat::solve, by name, and at compile time") {
  CHECK(remat::solver_from_name("revolve") == remat::solver::revolve);
  std::mt19937_64 rng(43);
  const chain c = remat::testing::random_chain(rng, {9, 9, 10, true});
  for (const size_type budget : {0, 40, 1000}) {
    const auto via_solve = remat::solve(c, budget, {.solver = remat::solver::revolve});
    const auto direct = remat::solve_revolve(c, budget);
    CHECK(via_solve.feasible == direct.feasible);
    CHECK(via_solve.schedule == direct.schedule);
    CHECK(via_solve.min_feasible_budget == direct.min_feasible_budget);
  }
  CHECK_THROWS_AS(remat::solve_revolve(c, -1), remat::solver_error);
  static_assert(remat::detail::revolve_split(10, 2) == 6);
  static_assert([] {
    const auto r =
        remat::solve_revolve(homogeneous(10), 6);  // 2 snapshots: 10 + t(10, 2) = 10 + 20
    return r.feasible && r.schedule.makespan == 30;
  }());
}

}  // namespace unit_solvers_revolve_test
