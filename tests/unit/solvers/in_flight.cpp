// Several micro-batches in flight (solve_options::in_flight, docs/pipelines.md): a schedule fits
// when peak + (K - 1) * retained <= budget. The optimal solver is exact under it: on random
// chains of up to 3 stages (with and without options), K = 1..4, at every budget from below the
// least to store-all's need, it equals the best of every persistent schedule (the op sequences
// the DP's recursion builds, each replayed), ties to the least retained, and the exhaustive
// search over every op sequence is never slower and feasible wherever it is (docs/model.md:
// a non-persistent sequence is sometimes faster); `retained` is what a replay holds before the
// loss; K = 1 is the plain solve op for op; the baselines keep the constraint or say the budget
// they need; offloading refuses K > 1.
#include <remat/solve.hpp>

#include <remat/simulate.hpp>

#include <doctest/doctest.h>

#include "random_chain.hpp"
#include "trials.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

namespace unit_solvers_in_flight_test {

namespace {

using remat::chain;
using remat::size_type;
using remat::solve_options;
using remat::solve_result;
using remat::solver;
using remat::testing::random_chain;

bool close(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b)); }

// The budget store-all needs with K in flight: past it every solver's answer is settled.
size_type store_all_need(const chain& c, std::size_t K) {
  const remat::replay_result r =
      remat::simulate(c, remat::detail::store_all_ops(static_cast<std::int32_t>(c.length())));
  return r.peak_memory + static_cast<size_type>(K - 1) * r.retained;
}

// A result judged by the simulator: valid, within the budget with K in flight, its makespan and
// retained what a replay gives.
void check_keeps(const chain& c, const solve_result& s, size_type budget, std::size_t K) {
  if (!s.feasible) {
    CHECK(s.schedule.ops.empty());
    return;
  }
  const remat::replay_result r = remat::simulate(c, s.schedule);
  REQUIRE(r.valid());
  CHECK(r.peak_memory == s.schedule.peak_memory);
  CHECK(r.retained == s.retained);
  CHECK(r.peak_memory + static_cast<size_type>(K - 1) * r.retained <= budget);
  CHECK(close(r.makespan, s.schedule.makespan));
}

// Every persistent schedule of interval (i, l) (docs/model.md's recursion: the base cases, the
// tape branch with each option, the checkpoint branch at each j), all stages recording with
// options when `tape` is false only in the base cases (checkpoint-only).
std::vector<std::vector<remat::op>> persistent(const chain& c, std::int32_t i, std::int32_t l,
                                               bool tape) {
  const auto L = static_cast<std::int32_t>(c.length());
  std::vector<std::vector<remat::op>> out;
  if (i == L) return {{remat::loss_op(L)}};
  const std::size_t options = remat::option_count(c.stages[static_cast<std::size_t>(i)]);
  if (i == l) {
    for (std::size_t o = 0; o < options; ++o)
      out.push_back({remat::f_all(i, static_cast<std::uint16_t>(o)), remat::backward(i)});
    return out;
  }
  if (tape)
    for (std::size_t o = 0; o < options; ++o)
      for (const auto& rest : persistent(c, i + 1, l, tape)) {
        std::vector<remat::op> s{remat::f_all(i, static_cast<std::uint16_t>(o))};
        s.insert(s.end(), rest.begin(), rest.end());
        s.push_back(remat::backward(i));
        out.push_back(std::move(s));
      }
  for (std::int32_t j = i + 1; j <= l; ++j)
    for (const auto& right : persistent(c, j, l, tape))
      for (const auto& left : persistent(c, i, j - 1, tape)) {
        std::vector<remat::op> s{remat::f_ck(i)};
        for (std::int32_t k = i + 1; k < j; ++k) s.push_back(remat::f_none(k));
        s.insert(s.end(), right.begin(), right.end());
        s.insert(s.end(), left.begin(), left.end());
        out.push_back(std::move(s));
      }
  return out;
}

// The oracle: the fastest persistent schedule keeping the constraint, ties to the least
// retained; and the least budget any persistent schedule needs.
struct best_persistent {
  bool feasible = false;
  double makespan = 0;
  size_type retained = 0;
  size_type least = -1;
};

best_persistent search_persistent(const chain& c, size_type budget, std::size_t K, bool tape) {
  best_persistent b;
  for (const auto& ops : persistent(c, 0, static_cast<std::int32_t>(c.length()), tape)) {
    const remat::replay_result r = remat::simulate(c, ops);
    REQUIRE(r.valid());
    const size_type need = r.peak_memory + static_cast<size_type>(K - 1) * r.retained;
    if (b.least < 0 || need < b.least) b.least = need;
    if (need > budget) continue;
    if (!b.feasible || r.makespan < b.makespan - 1e-9 ||
        (close(r.makespan, b.makespan) && r.retained < b.retained)) {
      b.feasible = true;
      b.makespan = r.makespan;
      b.retained = r.retained;
    }
  }
  return b;
}

void compare_with_exhaustive(const chain& c, std::size_t K) {
  CAPTURE(K);
  const size_type top = store_all_need(c, K) + 2;
  for (size_type budget = 0; budget <= top; ++budget) {
    CAPTURE(budget);
    const solve_result e = remat::solve(c, budget, {.solver = solver::exhaustive, .in_flight = K});
    const solve_result o = remat::solve(
        c, budget, {.solver = solver::optimal, .slots = remat::exact_units, .in_flight = K});
    check_keeps(c, e, budget, K);
    check_keeps(c, o, budget, K);
    const best_persistent p = search_persistent(c, budget, K, true);
    CHECK(o.min_feasible_budget == p.least);
    CHECK(e.min_feasible_budget <= o.min_feasible_budget);
    REQUIRE(o.feasible == p.feasible);
    CHECK(o.feasible == (budget >= o.min_feasible_budget));
    CHECK(e.feasible == (budget >= e.min_feasible_budget));
    if (o.feasible) CHECK(e.feasible);
    if (e.feasible && o.feasible) CHECK(e.schedule.makespan <= o.schedule.makespan + 1e-9);
    // checkpoint-only against its own persistent schedules
    const solve_result k = remat::solve(
        c, budget, {.solver = solver::checkpoint_only, .slots = remat::exact_units, .in_flight = K});
    check_keeps(c, k, budget, K);
    const best_persistent pk = search_persistent(c, budget, K, false);
    REQUIRE(k.feasible == pk.feasible);
    if (k.feasible) {
      CHECK(close(k.schedule.makespan, pk.makespan));
      if (K > 1) CHECK(k.retained == pk.retained);
    }
    // Each solver's own function honours K as remat::solve does.
    CHECK(remat::solve_optimal(c, budget, {.slots = remat::exact_units, .in_flight = K}) == o);
    CHECK(remat::solve_exhaustive(c, budget, {.in_flight = K}) == e);
    if (!o.feasible) continue;
    CHECK(o.exact);
    CHECK(close(o.schedule.makespan, p.makespan));
    if (K > 1) CHECK(o.retained == p.retained);  // ties: the least (K = 1: the plain DP's ties)
    // The default (exact on these small sizes) and min-memory agree.
    const solve_result d = remat::solve(c, budget, {.in_flight = K});
    check_keeps(c, d, budget, K);
    CHECK(close(d.schedule.makespan, o.schedule.makespan));
    const solve_result m = remat::solve(c, budget, {.solver = solver::min_memory, .in_flight = K});
    check_keeps(c, m, budget, K);
    CHECK(m.feasible);
    CHECK(m.min_feasible_budget == o.min_feasible_budget);
  }
}

}  // namespace

TEST_CASE("in flight: the optimal solver equals the exhaustive search, K = 1..4") {
  std::mt19937_64 rng(20261207);
  for (int trial = 0; trial < remat::testing::trials(40); ++trial) {
    CAPTURE(trial);
    const chain c = random_chain(rng, {.min_stages = 1, .max_stages = 3, .max_size = 6});
    for (std::size_t K = 1; K <= 4; ++K) compare_with_exhaustive(c, K);
  }
}

TEST_CASE("in flight: with options per stage, the optimal solver equals the exhaustive search") {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 15; ++trial) {
    CAPTURE(trial);
    chain c = random_chain(rng, {.min_stages = 1, .max_stages = 3, .max_size = 5});
    remat::testing::add_random_options(rng, c, 2, 5);
    for (std::size_t K = 2; K <= 3; ++K) compare_with_exhaustive(c, K);
  }
}

TEST_CASE("in flight: K = 1 is the plain solve, op for op") {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    const chain c = random_chain(rng, {.min_stages = 1, .max_stages = 8});
    const size_type top = store_all_need(c, 1);
    for (size_type budget = 0; budget <= top; budget += 3) {
      const solve_result a = remat::solve(c, budget);
      const solve_result b = remat::solve(c, budget, {.in_flight = 1});
      CHECK(a == b);
      if (a.feasible) CHECK(a.retained == remat::simulate(c, a.schedule).retained);
    }
  }
}

TEST_CASE("in flight: more micro-batches never make a schedule faster, and slots keep the bound") {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 30; ++trial) {
    const chain c = random_chain(rng, {.min_stages = 2, .max_stages = 10, .max_size = 40});
    const size_type top = store_all_need(c, 4);
    for (size_type budget = top / 4; budget <= top; budget += std::max<size_type>(1, top / 9)) {
      CAPTURE(budget);
      double before = 0;
      for (std::size_t K = 1; K <= 4; ++K) {
        CAPTURE(K);
        const solve_result o = remat::solve(c, budget, {.slots = remat::exact_units, .in_flight = K});
        check_keeps(c, o, budget, K);
        const solve_result s = remat::solve(c, budget, {.slots = 7, .in_flight = K});
        check_keeps(c, s, budget, K);
        if (s.feasible) {
          CHECK(o.feasible);
          CHECK(o.schedule.makespan <= s.schedule.makespan + 1e-9);
        }
        if (!o.feasible) break;
        CHECK(o.schedule.makespan >= before - 1e-9);
        before = o.schedule.makespan;
      }
    }
  }
}

TEST_CASE("in flight: the baselines keep the constraint or say the budget they need") {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 30; ++trial) {
    const chain c = random_chain(rng, {.min_stages = 2, .max_stages = 9, .max_size = 20});
    const size_type top = store_all_need(c, 3);
    for (const solver s : {solver::store_all, solver::sequential, solver::chen_sqrt,
                           solver::chen_greedy, solver::revolve, solver::checkpoint_only}) {
      CAPTURE(remat::name(s));
      for (size_type budget = 0; budget <= top; budget += std::max<size_type>(1, top / 7)) {
        const solve_result r = remat::solve(c, budget, {.solver = s, .in_flight = 3});
        check_keeps(c, r, budget, 3);
        if (s == solver::store_all) CHECK(r == remat::solve_store_all(c, budget, {.in_flight = 3}));
        if (s == solver::revolve) CHECK(r == remat::solve_revolve(c, budget, {.in_flight = 3}));
        if (!r.feasible)
          CHECK((r.min_feasible_budget == solve_result::no_budget ||
                 r.min_feasible_budget > budget));
        // Where a baseline is feasible, the optimal solver is too, and no slower.
        const solve_result o =
            remat::solve(c, budget, {.slots = remat::exact_units, .in_flight = 3});
        if (r.feasible) {
          CHECK(o.feasible);
          CHECK(o.schedule.makespan <= r.schedule.makespan + 1e-9);
        }
      }
    }
  }
}

TEST_CASE("in flight: coarsening keeps the constraint") {
  std::mt19937_64 rng(17);
  for (int trial = 0; trial < 20; ++trial) {
    const chain c = random_chain(rng, {.min_stages = 6, .max_stages = 14, .max_size = 30});
    const size_type top = store_all_need(c, 2);
    for (size_type budget = top / 3; budget <= top; budget += std::max<size_type>(1, top / 6)) {
      const solve_result r = remat::solve(c, budget, {.coarsen = 4, .in_flight = 2});
      check_keeps(c, r, budget, 2);
    }
  }
}

TEST_CASE("in flight: requests it cannot honour are refused by name") {
  std::mt19937_64 rng(1);
  chain c = random_chain(rng, {.min_stages = 3, .max_stages = 3});
  CHECK_THROWS_WITH_AS(remat::solve(c, 100, {.in_flight = 0}),
                       doctest::Contains("in_flight must be between 1"), remat::solver_error);
  c.transfer.offload_bandwidth = 1;
  c.transfer.prefetch_bandwidth = 1;
  for (const solver s : {solver::offload, solver::save_on_cpu, solver::exhaustive})
    CHECK_THROWS_WITH_AS(remat::solve(c, 100, {.solver = s, .in_flight = 2}),
                         doctest::Contains("micro-batches in flight"), remat::solver_error);
}

}  // namespace unit_solvers_in_flight_test
