// Several options per stage (docs/model.md): the DP with options against independent oracles.
// A persistent schedule records each stage once, so the optimum with options is the least, over
// every choice of one option per stage, of the optimum of the chain that has only that option;
// the exhaustive search over all op sequences is never slower than it. A stage with one option
// (its own fields, or listed) gives today's results bit for bit; Rockmate's ResNet-18 options
// beat its single-option chain at some budgets and never lose.
#include <remat/solvers/optimal.hpp>

#include <remat/io/chain_json.hpp>
#include <remat/simulate.hpp>
#include <remat/solve.hpp>
#include <remat/solvers/exhaustive.hpp>
#include <remat/solvers/min_memory.hpp>
#include <remat/trade_off.hpp>

#include <doctest/doctest.h>

#include "chain_text.hpp"
#include "random_chain.hpp"
#include "trials.hpp"

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace unit_solvers_options_test {

namespace {

using remat::chain;
using remat::size_type;
using remat::solve_result;
using remat::stage;
using remat::stage_option;
using remat::testing::add_random_options;
using remat::testing::chain_text;
using remat::testing::random_chain;

constexpr remat::solve_options exact{.slots = remat::exact_units};

// `c` with stage k running only option choice[k] (its F_all takes that option's time where the
// option's forward time differs, so the chain lists it).
chain with_one_option(const chain& c, const std::vector<std::size_t>& choice) {
  chain out = c;
  for (std::size_t k = 0; k < c.length(); ++k) {
    stage& s = out.stages[k];
    const stage_option o = remat::option_at(c.stages[k], choice[k]);
    s.options.clear();
    if (o.forward_time == s.forward_time) {
      s.backward_time = o.backward_time;
      s.tape_size = o.tape_size;
      s.backward_overhead = o.backward_overhead;
      s.recording_overhead = o.forward_overhead;
    } else {
      s.options = {o};
    }
  }
  return out;
}

// Calls f(chain with one option per stage) for every choice of options.
template <class F>
void for_each_choice(const chain& c, F f) {
  std::vector<std::size_t> choice(c.length(), 0);
  while (true) {
    f(with_one_option(c, choice));
    std::size_t k = 0;
    while (k < c.length() && ++choice[k] == remat::option_count(c.stages[k])) choice[k++] = 0;
    if (k == c.length()) return;
  }
}

size_type store_all_peak(const chain& c) {
  return remat::simulate(c, remat::detail::store_all_ops(static_cast<std::int32_t>(c.length())))
      .peak_memory;
}

// The schedule replays to what the result claims, within the budget. The claimed makespan sums
// the model's times, rounded to a grid on which every order of summation is exact (docs/model.md);
// the replay sums the chain's own times in its order: on times like 0.5 both are exact and equal,
// on measured milliseconds they agree to `epsilon` (relative).
void check_replays(const chain& c, const solve_result& r, double epsilon = 0) {
  const remat::replay_result p = remat::simulate(c, r.schedule.ops);
  REQUIRE(p.valid());
  CHECK(p.peak_memory <= r.budget);
  CHECK(p.peak_memory == r.schedule.peak_memory);
  if (epsilon == 0)
    CHECK(p.makespan == r.schedule.makespan);
  else
    CHECK(p.makespan == doctest::Approx(r.schedule.makespan).epsilon(epsilon));
}

}  // namespace

TEST_CASE("property: with options, optimal is the least over one option per stage") {
  std::mt19937_64 rng(4301);
  int feasible = 0, better = 0;
  for (int n = 0; n < remat::testing::trials(600); ++n) {
    chain c = random_chain(rng, {.min_stages = 1, .max_stages = 5, .max_size = 8});
    add_random_options(rng, c, 3, 8, n % 2 == 0);
    CAPTURE(chain_text(c));
    const size_type top = store_all_peak(c) + 4;
    for (int b = 0; b < 4; ++b) {
      const size_type budget = std::uniform_int_distribution<size_type>(0, top)(rng);
      CAPTURE(budget);
      const solve_result r = remat::solve_optimal(c, budget, exact);
      double least = std::numeric_limits<double>::infinity();
      size_type least_budget = std::numeric_limits<size_type>::max();
      for_each_choice(c, [&](const chain& one) {
        const solve_result s = remat::solve_optimal(one, budget, exact);
        if (s.feasible) least = std::min(least, s.schedule.makespan);
        least_budget = std::min(least_budget, s.min_feasible_budget);
      });
      CHECK(r.min_feasible_budget == least_budget);
      REQUIRE(r.feasible == (least < std::numeric_limits<double>::infinity()));
      if (!r.feasible) continue;
      ++feasible;
      CHECK(r.schedule.makespan == least);
      check_replays(c, r);
      // The frontier DP's whole curve agrees at this budget.
      const remat::trade_off_result curve = remat::trade_off(c, exact);
      double at_budget = std::numeric_limits<double>::infinity();
      for (const remat::trade_off_point& p : curve.points)
        if (p.budget <= budget) at_budget = p.makespan;
      CHECK(at_budget == r.schedule.makespan);
      const solve_result first = remat::solve_optimal(
          with_one_option(c, std::vector<std::size_t>(c.length(), 0)), budget, exact);
      if (!first.feasible || r.schedule.makespan < first.schedule.makespan) ++better;
    }
  }
  CHECK(feasible > remat::testing::trials(500));
  CHECK(better > remat::testing::trials(50));
}

TEST_CASE("property: the exhaustive search with options is never slower than the DP") {
  std::mt19937_64 rng(4302);
  for (int n = 0; n < remat::testing::trials(250); ++n) {
    chain c = random_chain(rng, {.min_stages = 1, .max_stages = 3, .max_size = 6});
    add_random_options(rng, c, 3, 6);
    CAPTURE(chain_text(c));
    const size_type budget =
        std::uniform_int_distribution<size_type>(0, store_all_peak(c) + 2)(rng);
    CAPTURE(budget);
    const solve_result dp = remat::solve_optimal(c, budget, exact);
    const solve_result ex = remat::solve_exhaustive(c, budget);
    CHECK(ex.min_feasible_budget <= dp.min_feasible_budget);
    if (dp.feasible) {
      REQUIRE(ex.feasible);
      CHECK(ex.schedule.makespan <= dp.schedule.makespan);
    }
    if (!ex.feasible) continue;
    check_replays(c, ex);
    // With a choice of options it is no slower than with any one option per stage.
    for_each_choice(c, [&](const chain& one) {
      const solve_result s = remat::solve_exhaustive(one, budget);
      if (s.feasible) CHECK(ex.schedule.makespan <= s.schedule.makespan);
    });
  }
}

// The search with transfers steps the walk, so options come with the link: never slower than the
// same chain without the link (its schedules run unchanged with one), nor than any one option per
// stage with the link; the least budget likewise.
TEST_CASE("property: the exhaustive search with transfers takes options") {
  std::mt19937_64 rng(4304);
  for (int n = 0; n < remat::testing::trials(8); ++n) {
    chain c = random_chain(rng, {.min_stages = 1, .max_stages = 2, .max_size = 3});
    add_random_options(rng, c, 2, 3);
    chain linked = c;
    linked.transfer = {2, 2};
    CAPTURE(chain_text(c));
    const size_type budget =
        std::uniform_int_distribution<size_type>(0, store_all_peak(c) + 1)(rng);
    CAPTURE(budget);
    const solve_result ex = remat::solve_exhaustive(linked, budget);
    const solve_result unlinked = remat::solve_exhaustive(c, budget);
    CHECK(ex.min_feasible_budget <= unlinked.min_feasible_budget);
    if (unlinked.feasible) {
      REQUIRE(ex.feasible);
      CHECK(ex.schedule.makespan <= unlinked.schedule.makespan + 1e-12);
    }
    for_each_choice(linked, [&](const chain& one) {
      const solve_result s = remat::solve_exhaustive(one, budget);
      CHECK(ex.min_feasible_budget <= s.min_feasible_budget);
      if (s.feasible) {
        REQUIRE(ex.feasible);
        CHECK(ex.schedule.makespan <= s.schedule.makespan + 1e-12);
      }
    });
    if (ex.feasible) check_replays(linked, ex, 1e-12);
  }
}

TEST_CASE("one option, listed or not, gives the schedules of a chain without options") {
  std::mt19937_64 rng(4303);
  for (int n = 0; n < remat::testing::trials(300); ++n) {
    const chain c = random_chain(rng, {.min_stages = 1, .max_stages = 9, .max_size = 12});
    chain listed = c;
    for (stage& s : listed.stages) s.options = {remat::option_at(s, 0)};
    CAPTURE(chain_text(c));
    const size_type budget =
        std::uniform_int_distribution<size_type>(0, store_all_peak(c) + 2)(rng);
    for (const remat::solver which :
         {remat::solver::optimal, remat::solver::checkpoint_only, remat::solver::min_memory}) {
      remat::solve_options o = exact;
      o.solver = which;
      const solve_result a = remat::solve(c, budget, o);
      const solve_result b = remat::solve(listed, budget, o);
      CHECK(a.feasible == b.feasible);
      CHECK(a.schedule == b.schedule);
      CHECK(a.min_feasible_budget == b.min_feasible_budget);
    }
    const solve_result a = remat::solve_optimal(c, budget);  // 500 slots
    const solve_result b = remat::solve_optimal(listed, budget);
    CHECK(a.schedule == b.schedule);
  }
}

TEST_CASE("a dominated option changes nothing") {
  std::mt19937_64 rng(4304);
  for (int n = 0; n < remat::testing::trials(200); ++n) {
    chain c = random_chain(rng, {.min_stages = 1, .max_stages = 7, .max_size = 10});
    add_random_options(rng, c, 3, 10);
    chain more = c;
    for (stage& s : more.stages) {
      stage_option o = remat::option_at(s, 0);
      s.options.resize(remat::option_count(s), remat::option_at(s, 0));
      if (s.options.size() == 1) s.options[0] = o;
      o.backward_time += 0.5;
      o.tape_size += 1;
      s.options.push_back(o);
    }
    CAPTURE(chain_text(c));
    const size_type budget =
        std::uniform_int_distribution<size_type>(0, store_all_peak(c) + 2)(rng);
    const solve_result a = remat::solve_optimal(c, budget, exact);
    const solve_result b = remat::solve_optimal(more, budget, exact);
    CHECK(a.schedule == b.schedule);
  }
}

TEST_CASE("ResNet-18 with Rockmate's options: never slower than without, faster at some budgets") {
  const std::filesystem::path dir =
      std::filesystem::path(REMAT_SOURCE_DIR) / "tests" / "data" / "chains";
  const chain with = remat::io::read_chain_file(dir / "resnet18-rockmate-options.json").chain;
  const chain without = remat::io::read_chain_file(dir / "resnet18-rockmate.json").chain;
  REQUIRE(with.length() == without.length());
  const size_type top = store_all_peak(without);
  // Every budget from a little below the least that either chain needs up to store-all: the
  // feasible ones are a narrow band (the least budget is above 90% of store-all's peak).
  const size_type least = remat::solve_optimal(without, top, exact).min_feasible_budget;
  const size_type least_with = remat::solve_optimal(with, top, exact).min_feasible_budget;
  CHECK(least_with <= least);
  int faster = 0, both = 0;
  for (size_type budget = std::min(least, least_with) - 3; budget <= top; ++budget) {
    CAPTURE(budget);
    const solve_result a = remat::solve_optimal(with, budget, exact);
    const solve_result b = remat::solve_optimal(without, budget, exact);
    CHECK(a.feasible == (budget >= least_with));
    CHECK(b.feasible == (budget >= least));
    if (b.feasible) {
      REQUIRE(a.feasible);
      CHECK(a.schedule.makespan <= b.schedule.makespan);
      ++both;
      if (a.schedule.makespan < b.schedule.makespan) ++faster;
    }
    if (a.feasible) check_replays(with, a, 1e-12);
  }
  CHECK(both > 10);
  CHECK(faster > 10);
}

TEST_CASE("F_all names its option; a bad option is an invalid op") {
  chain c;
  c.input_size = 1;
  c.stages = {{1, 2, 1, 2, 0, 0, {}, {{1, 5, 1, 0, 0}, {1, 2, 4, 0, 0}}}};
  CHECK(remat::to_string(remat::f_all(0, 1)) == "F_all(0,1)");
  CHECK(remat::to_string(remat::f_all(0)) == "F_all(0)");
  const std::vector<remat::op> good{remat::f_all(0, 1), remat::loss_op(1), remat::backward(0)};
  const remat::replay_result r = remat::simulate(c, good);
  REQUIRE(r.valid());
  CHECK(r.makespan == 1 + 0 + 2);  // option 1's F_all and B
  CHECK(r.peak_memory == 1 + 4 + 1 + 1);  // a_0, t_1 of option 1, g_1, then g_0
  const std::vector<remat::op> wrong{remat::f_all(0, 2), remat::loss_op(1), remat::backward(0)};
  const remat::replay_result bad = remat::simulate(c, wrong);
  CHECK(bad.error == remat::replay_error::bad_option);
  CHECK(remat::describe(bad, std::vector<remat::op>{remat::f_all(0, 2)}).find("no option 2") !=
        std::string::npos);
}

TEST_CASE("bad options are chain errors naming the stage, the option and the field") {
  chain c;
  c.input_size = 1;
  c.stages = {{1, 1, 4, 4, 0, 0}, {1, 1, 4, 4, 0, 0}};
  c.stages[1].options = {{1, 1, 4, 0, 0}, {1, 1, 3, 0, 0}};
  try {
    remat::validate(c);
    FAIL("validate accepted a tape below the output");
  } catch (const remat::chain_error& e) {
    CHECK(std::string(e.what()) == "stages[1].options[1].tape_size: must be >= output_size (3 < 4)");
    CHECK(e.stage_index() == 1);
    CHECK(e.field() == "options[1].tape_size");
  }
  c.stages[1].options[1] = {-1, 1, 4, 0, 0};
  CHECK_THROWS_WITH_AS(remat::validate(c), "stages[1].options[1].forward_time: must be >= 0 (-1.000000)",
                       remat::chain_error);
  c.stages[1].options[1] = {1, 1, 4, 0, -2};
  CHECK_THROWS_WITH_AS(remat::validate(c), "stages[1].options[1].backward_overhead: must be >= 0 (-2)",
                       remat::chain_error);
}

}  // namespace unit_solvers_options_test
