// Pipelines (remat/pipeline.hpp, docs/pipelines.md): K per rank for GPipe and 1F1B; a rank's
// chain; the split that makes the slowest rank fastest equals the best of every contiguous split
// (each rank solved on its own chain with its own K; among the splits as fast, the least sum of
// the ranks' times), on random chains with and without
// options, and its schedules keep each rank's budget when replayed; where no split fits, the
// least budget per rank is the least over every split; the every-stage-checkpointed baseline is
// checkpoint_sequential with one segment per stage.
#include <remat/pipeline.hpp>

#include <remat/simulate.hpp>

#include <doctest/doctest.h>

#include "random_chain.hpp"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <random>
#include <vector>

namespace unit_pipeline_test {

namespace {

using remat::chain;
using remat::pipeline_result;
using remat::size_type;
using remat::solve_options;
using remat::solve_result;

constexpr double inf = std::numeric_limits<double>::infinity();

// Every split of `length` stages into `ranks` non-empty runs, as first stages.
void each_split(std::size_t length, std::size_t ranks, std::vector<std::size_t>& starts,
                const auto& visit) {
  if (starts.size() == ranks) {
    visit(starts);
    return;
  }
  const std::size_t from = starts.empty() ? 0 : starts.back() + 1;
  const std::size_t to = starts.empty() ? 0 : length - (ranks - starts.size());
  for (std::size_t s = from; s <= to; ++s) {
    starts.push_back(s);
    each_split(length, ranks, starts, visit);
    starts.pop_back();
  }
}

struct brute {
  double slowest = inf;
  double sum = inf;  // the least sum of the ranks' times among the splits as fast
  size_type least = solve_result::no_budget;
};

// The best split by trying every one, each rank solved directly on its chain.
brute best_of_every_split(const chain& c, size_type budget, const std::vector<std::size_t>& K,
                          const solve_options& options) {
  brute b;
  std::vector<std::size_t> starts;
  each_split(c.length(), K.size(), starts, [&](const std::vector<std::size_t>& s) {
    double slowest = 0, sum = 0;
    size_type least = 0;
    for (std::size_t r = 0; r < s.size(); ++r) {
      const std::size_t end = r + 1 < s.size() ? s[r + 1] : c.length();
      solve_options o = options;
      o.in_flight = K[r];
      const solve_result res = remat::solve(remat::stage_chain(c, s[r], end), budget, o);
      slowest = std::max(slowest, res.feasible ? res.schedule.makespan : inf);
      sum += res.feasible ? res.schedule.makespan : inf;
      least = res.min_feasible_budget == solve_result::no_budget || least == solve_result::no_budget
                  ? solve_result::no_budget
                  : std::max(least, res.min_feasible_budget);
    }
    if (slowest < b.slowest - 1e-9) {
      b.slowest = slowest;
      b.sum = sum;
    } else if (slowest <= b.slowest + 1e-9) {
      b.sum = std::min(b.sum, sum);
    }
    if (least != solve_result::no_budget &&
        (b.least == solve_result::no_budget || least < b.least))
      b.least = least;
  });
  return b;
}

// Each rank's schedule replayed on its own chain: valid, within the budget with its K, times and
// retained as reported; the ranks cover the chain in order.
void check_pipeline(const chain& c, const pipeline_result& p, const std::vector<std::size_t>& K) {
  REQUIRE(p.stages.size() == K.size());
  double slowest = 0;
  for (std::size_t r = 0; r < K.size(); ++r) {
    const remat::pipeline_stage& s = p.stages[r];
    CHECK(s.first == (r == 0 ? 0 : p.stages[r - 1].end));
    CHECK(s.in_flight == K[r]);
    REQUIRE(s.result.feasible);
    const remat::replay_result rr =
        remat::simulate(remat::stage_chain(c, s.first, s.end), s.result.schedule);
    REQUIRE(rr.valid());
    CHECK(rr.retained == s.result.retained);
    CHECK(s.memory() == rr.peak_memory + static_cast<size_type>(K[r] - 1) * rr.retained);
    CHECK(s.memory() <= p.budget);
    slowest = std::max(slowest, s.time());
  }
  CHECK(p.stages.back().end == c.length());
  CHECK(p.slowest == doctest::Approx(slowest));
}

}  // namespace

TEST_CASE("micro-batches in flight: GPipe holds every micro-batch, 1F1B P - r on rank r") {
  using remat::pipeline_schedule;
  CHECK(remat::micro_batches_in_flight(pipeline_schedule::gpipe, 4, 8) ==
        std::vector<std::size_t>{8, 8, 8, 8});
  CHECK(remat::micro_batches_in_flight(pipeline_schedule::one_f_one_b, 4, 8) ==
        std::vector<std::size_t>{4, 3, 2, 1});
  CHECK(remat::micro_batches_in_flight(pipeline_schedule::one_f_one_b, 4, 2) ==
        std::vector<std::size_t>{2, 2, 2, 1});
  CHECK(remat::parse_pipeline_schedule("1f1b") == pipeline_schedule::one_f_one_b);
  CHECK(remat::parse_pipeline_schedule(remat::name(pipeline_schedule::gpipe)) ==
        pipeline_schedule::gpipe);
  CHECK_FALSE(remat::parse_pipeline_schedule("zero-bubble"));
  CHECK_THROWS_AS(remat::micro_batches_in_flight(pipeline_schedule::gpipe, 0, 8),
                  std::invalid_argument);
}

TEST_CASE("stage_chain: a rank's input is the previous stage's output; the loss is the last's") {
  chain c;
  c.input_size = 5;
  for (int k = 0; k < 4; ++k)
    c.stages.push_back({1.0 + k, 2.0, 10 + k, 20 + k, 1, 2, std::nullopt, {}});
  c.loss_time = 3;
  c.loss_overhead = 7;
  const chain mid = remat::stage_chain(c, 1, 3);
  REQUIRE(mid.length() == 2);
  CHECK(mid.input_size == 10);
  CHECK(mid.stages[0] == c.stages[1]);
  CHECK(mid.loss_time == 0);
  CHECK(mid.loss_overhead == 0);
  const chain last = remat::stage_chain(c, 2, 4);
  CHECK(last.input_size == 11);
  CHECK(last.loss_time == 3);
  CHECK(last.loss_overhead == 7);
  CHECK(remat::stage_chain(c, 0, 4) == c);
  CHECK_THROWS_AS(remat::stage_chain(c, 2, 2), std::invalid_argument);
  CHECK_THROWS_AS(remat::stage_chain(c, 0, 5), std::invalid_argument);
  CHECK(remat::equal_starts(10, 4) == std::vector<std::size_t>{0, 3, 6, 8});
  CHECK_THROWS_AS(remat::equal_starts(3, 4), std::invalid_argument);
}

TEST_CASE("split_pipeline equals the best of every contiguous split, each rank with its own K") {
  std::mt19937_64 rng(50);
  for (int trial = 0; trial < 120; ++trial) {
    CAPTURE(trial);
    remat::testing::random_chain_options ro;
    ro.min_stages = 1;
    ro.max_stages = 7;
    chain c = remat::testing::random_chain(rng, ro);
    if (trial % 3 == 2) remat::testing::add_random_options(rng, c, 2);
    const std::size_t L = c.length();
    const std::size_t P = 1 + static_cast<std::size_t>(rng() % std::min<std::size_t>(L, 4));
    const std::size_t M = 1 + static_cast<std::size_t>(rng() % 4);
    const std::vector<std::size_t> K = remat::micro_batches_in_flight(
        trial % 2 == 0 ? remat::pipeline_schedule::one_f_one_b : remat::pipeline_schedule::gpipe,
        P, M);
    solve_options options;
    options.slots = remat::exact_units;
    if (trial % 5 == 4) options.solver = remat::solver::checkpoint_only;
    // Budgets from below the least to past store-all's need on the whole chain.
    const size_type top = remat::solve(c, 0, {.solver = remat::solver::store_all}).min_feasible_budget;
    const size_type M_all = top * static_cast<size_type>(M) + 2;
    for (const size_type budget : {size_type{0}, M_all / 6, M_all / 4, M_all / 3, M_all / 2, M_all}) {
      CAPTURE(budget);
      const pipeline_result p = remat::split_pipeline(c, budget, K, options);
      const brute b = best_of_every_split(c, budget, K, options);
      CHECK(p.feasible == (b.slowest < inf));
      if (p.feasible) {
        CHECK(p.slowest == doctest::Approx(b.slowest));
        double sum = 0;
        for (const remat::pipeline_stage& st : p.stages) sum += st.time();
        CHECK(sum == doctest::Approx(b.sum));
        check_pipeline(c, p, K);
        // The split it names, solved again, is what it returned.
        const pipeline_result again = remat::solve_pipeline(c, budget, K, p.starts(), options);
        CHECK(again.stages == p.stages);
      } else {
        CHECK(p.stages.empty());
        CHECK(p.min_feasible_budget == b.least);
        if (b.least != solve_result::no_budget)
          CHECK(remat::split_pipeline(c, b.least, K, options).feasible);
      }
    }
  }
}

TEST_CASE("checkpoint_every_stage: checkpoint_sequential with one segment per stage, per rank") {
  std::mt19937_64 rng(51);
  for (int trial = 0; trial < 30; ++trial) {
    CAPTURE(trial);
    const chain c = remat::testing::random_chain(rng, {.min_stages = 2, .max_stages = 8});
    const std::size_t P = 1 + static_cast<std::size_t>(rng() % std::min<std::size_t>(c.length(), 3));
    const auto K = remat::micro_batches_in_flight(remat::pipeline_schedule::one_f_one_b, P, 4);
    const auto starts = remat::equal_starts(c.length(), P);
    const pipeline_result a = remat::checkpoint_every_stage(c, 1 << 20, K, starts);
    REQUIRE(a.feasible);
    for (std::size_t r = 0; r < P; ++r) {
      const remat::pipeline_stage& s = a.stages[r];
      const chain sc = remat::stage_chain(c, s.first, s.end);
      const auto n = static_cast<std::int32_t>(sc.length());
      CHECK(s.result.schedule.ops == remat::detail::sequential_ops(n, n));
      const remat::replay_result rr = remat::simulate(sc, s.result.schedule);
      REQUIRE(rr.valid());
      CHECK(s.memory() == rr.peak_memory + static_cast<size_type>(K[r] - 1) * rr.retained);
    }
    // At the budget it says it needs it fits, one unit below it does not.
    const size_type need = a.min_feasible_budget;
    CHECK(remat::checkpoint_every_stage(c, need, K, starts).feasible);
    if (need > 0) CHECK_FALSE(remat::checkpoint_every_stage(c, need - 1, K, starts).feasible);
  }
}

TEST_CASE("pipelines: bad requests are refused naming what is wrong") {
  chain c;
  c.input_size = 1;
  for (int k = 0; k < 3; ++k) c.stages.push_back({1, 1, 1, 1, 0, 0, std::nullopt, {}});
  const std::vector<std::size_t> four{1, 1, 1, 1};
  CHECK_THROWS_WITH_AS(remat::split_pipeline(c, 100, four), doctest::Contains("4 ranks over 3"),
                       remat::solver_error);
  const std::vector<std::size_t> zero{2, 0};
  CHECK_THROWS_WITH_AS(remat::split_pipeline(c, 100, zero), doctest::Contains("rank 1"),
                       remat::solver_error);
  const std::vector<std::size_t> two{2, 1};
  const std::vector<std::size_t> bad{0, 3};
  CHECK_THROWS_WITH_AS(remat::solve_pipeline(c, 100, two, bad), doctest::Contains("rank 1 starts"),
                       remat::solver_error);
  const std::vector<std::size_t> late{1, 2};
  CHECK_THROWS_WITH_AS(remat::solve_pipeline(c, 100, two, late),
                       doctest::Contains("first rank"), remat::solver_error);
  CHECK_THROWS_AS(remat::split_pipeline(c, -1, two), remat::solver_error);
  // Offloading is refused with K > 1, naming the rank's stages.
  c.transfer = {1, 1};
  CHECK_THROWS_WITH_AS(remat::split_pipeline(c, 100, two, {.solver = remat::solver::offload}),
                       doctest::Contains("pipeline stage"), remat::solver_error);
}

}  // namespace unit_pipeline_test
