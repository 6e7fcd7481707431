// remat::solve: dispatch by options; an infeasible budget is a result, bad requests are errors.
#include <remat/detail/verify/recorded_inputs.hpp>
#include <remat/simulate.hpp>
#include <remat/solve.hpp>
#include <remat/zoo.hpp>

#include <doctest/doctest.h>

#include "chain_text.hpp"
#include "random_chain.hpp"

#include <algorithm>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace unit_solve_test {

namespace {

using remat::chain;
using remat::size_type;
using remat::solve_options;
using remat::solve_result;
using remat::solver;

// x0 = 2, two stages of output 3 and tape 4, a forward overhead of 5 on stage 1.
chain small() {
  chain c;
  c.input_size = 2;
  c.stages = {{1, 2, 3, 4, 0, 0}, {1, 2, 3, 4, 5, 0}};
  c.loss_time = 0.5;
  return c;
}

bool same(const solve_result& a, const solve_result& b) {
  return a.feasible == b.feasible && a.schedule == b.schedule && a.budget == b.budget &&
         a.min_feasible_budget == b.min_feasible_budget && a.unit == b.unit;
}

constexpr chain constexpr_chain() {
  chain c;
  c.input_size = 1;
  c.stages.assign(4, {1, 1, 1, 2, 0, 0});
  return c;
}
static_assert(remat::solve(constexpr_chain(), 1000).schedule.makespan == 8);
static_assert(remat::solve(constexpr_chain(), 1000, {.solver = solver::store_all}).feasible);
static_assert(!remat::solve(constexpr_chain(), 0, {.slots = remat::exact_units}).feasible);
// Three such stages, budget 7: on the exact sizes the DP finds time 8 (min-memory's least-peak
// schedule takes 9); with 3 slots, sizes rounded up to the unit leave nothing that fits.
constexpr chain three_stages() {
  chain c = constexpr_chain();
  c.stages.resize(3);
  return c;
}
static_assert(remat::solve(three_stages(), 7, {.solver = solver::min_memory}).schedule.makespan ==
              9);
static_assert(remat::solve(three_stages(), 7).schedule.makespan == 8);
static_assert(!remat::solve(three_stages(), 7, {.slots = 3}).feasible);

}  // namespace

TEST_CASE("solver names") {
  CHECK(remat::name(solver::optimal) == "optimal");
  CHECK(remat::name(solver::store_all) == "store-all");
  CHECK(remat::name(solver::exhaustive) == "exhaustive");
  CHECK(remat::solver_from_name("store-all") == solver::store_all);
  CHECK(remat::solver_from_name("store_all") == std::nullopt);
  CHECK(remat::solver_from_name("") == std::nullopt);
  for (solver s : remat::all_solvers) {
    CAPTURE(remat::name(s));
    CHECK(remat::solver_from_name(remat::name(s)) == s);
  }
  // The default is the optimal DP, exact unless that is expensive, and bounded there.
  const solve_options o;
  CHECK(o.solver == solver::optimal);
  CHECK(o.slots == remat::default_slots);
  CHECK(remat::default_slots == remat::auto_slots);
}

// What each solver is, said once (solver_info): a row per solver, in the tools' order, and what
// the dispatch reads from it agrees with what the solvers do.
TEST_CASE("solver_info: one row per solver, read by the dispatch") {
  REQUIRE(std::size(remat::solver_table) == std::size(remat::all_solvers));
  for (std::size_t k = 0; k < std::size(remat::all_solvers); ++k) {
    const solver s = remat::all_solvers[k];
    const remat::solver_info& i = remat::info(s);
    CAPTURE(i.name);
    CHECK(i.solver == s);
    CHECK(&remat::solver_table[k] == &i);
    CHECK(remat::name(s) == i.name);
    CHECK(remat::needs_link(s) == i.needs_link);
    CHECK((!i.needs_link || i.uses_link));
    CHECK((!i.refuses_long_chains() || i.dp != remat::solver_dp::none));
    CHECK((!i.has_curve() || i.refuses_long_chains()));
  }
  CHECK(remat::info(solver::checkpoint_only).has_curve());
  CHECK_FALSE(remat::info(solver::checkpoint_only).tape_branch);
  CHECK(remat::info(solver::min_memory).refuses_long_chains());
  CHECK_FALSE(remat::info(solver::offload).coarsens);
  CHECK(remat::info(solver::exhaustive).max_stages == remat::exhaustive_max_stages);
  // A solver that says it is not constant-evaluable refuses there: at run time it answers.
  const chain c = small();
  for (const solver s : remat::all_solvers)
    if (!remat::info(s).needs_link) CHECK_NOTHROW((void)remat::solve(c, 30, {.solver = s}));
  // Offload refuses coarsening, as its row says.
  CHECK_THROWS_AS((void)remat::solve(c, 30, {.solver = solver::offload, .coarsen = 1}),
                  remat::solver_error);
}

TEST_CASE("dispatch by options") {
  const chain c = small();
  for (size_type budget = 0; budget <= 30; ++budget) {
    CAPTURE(budget);
    CHECK(same(remat::solve(c, budget), remat::solve_optimal(c, budget)));
    CHECK(same(remat::solve(c, budget, {.slots = remat::exact_units}),
               remat::solve_optimal(c, budget, {.slots = remat::exact_units})));
    CHECK(same(remat::solve(c, budget, {.solver = solver::optimal, .slots = 7}),
               remat::solve_optimal(c, budget, {.slots = 7})));
    CHECK(same(remat::solve(c, budget, {.solver = solver::store_all}),
               remat::solve_store_all(c, budget)));
    CHECK(same(remat::solve(c, budget, {.solver = solver::exhaustive}),
               remat::solve_exhaustive(c, budget)));
  }
  // The solvers differ on this chain, so dispatching to the wrong one shows: store-all needs 16
  // (B(1): a0 t1 t2 g2 g1), the DP holds a1 instead of t1 and recomputes stage 0 to fit in 15.
  CHECK(remat::solve(c, 15, {.solver = solver::store_all}).min_feasible_budget == 16);
  CHECK_FALSE(remat::solve(c, 15, {.solver = solver::store_all}).feasible);
  const solve_result dp = remat::solve(c, 15, {.slots = remat::exact_units});
  REQUIRE(dp.feasible);
  CHECK(remat::to_string(dp.schedule) == "F_ck(0) F_all(1) loss B(1) F_all(0) B(0)");
}

TEST_CASE("an infeasible budget is a result, for every solver") {
  const chain c = small();
  for (solver s : {solver::optimal, solver::store_all, solver::exhaustive}) {
    CAPTURE(remat::name(s));
    for (const size_type slots : {remat::exact_units, remat::default_slots}) {
      solve_result r;
      CHECK_NOTHROW(r = remat::solve(c, 3, {.solver = s, .slots = slots}));
      CHECK_FALSE(r.feasible);
      CHECK(r.schedule.ops.empty());
      CHECK(r.budget == 3);
      CHECK(r.min_feasible_budget > 3);
      const solve_result at = remat::solve(c, r.min_feasible_budget, {.solver = s, .slots = slots});
      CHECK(at.feasible);
    }
  }
}

TEST_CASE("bad requests throw: negative budgets, malformed chains, too long for exhaustive") {
  chain bad = small();
  bad.stages[0].tape_size = 1;
  for (solver s : {solver::optimal, solver::store_all, solver::exhaustive}) {
    CAPTURE(remat::name(s));
    CHECK_THROWS_AS((void)remat::solve(small(), -1, {.solver = s}), remat::solver_error);
    CHECK_THROWS_AS((void)remat::solve(bad, 100, {.solver = s}), remat::chain_error);
  }
  chain eight;
  eight.input_size = 1;
  eight.stages.assign(8, {1, 1, 1, 1, 0, 0});
  CHECK_THROWS_AS((void)remat::solve(eight, 100, {.solver = solver::exhaustive}),
                  remat::solver_error);
  CHECK(remat::solve(eight, 100).feasible);
}

// Whatever solvers remat has, solve keeps the same contract: a schedule it returns replays
// within the budget to its claimed peak, an infeasible budget is a result below
// min_feasible_budget, and a negative budget is a solver_error.
TEST_CASE("property: every solver keeps solve's contract") {
  std::mt19937_64 rng(9);
  for (int n = 0; n < 40; ++n) {
    const chain c = remat::testing::random_chain(rng, {1, 4, 10, true});
    INFO(remat::testing::chain_text(c));
    const size_type top =
        remat::simulate(c, remat::detail::store_all_ops(static_cast<std::int32_t>(c.length())))
            .peak_memory;
    const size_type budget = std::uniform_int_distribution<size_type>(0, top + 2)(rng);
    CAPTURE(budget);
    for (solver s : remat::all_solvers) {
      CAPTURE(remat::name(s));
      if (remat::needs_link(s)) continue;  // tests/unit/solvers/offload.cpp
      const solve_result r = remat::solve(c, budget, {.solver = s});
      CHECK(r.budget == budget);
      if (r.feasible) {
        const remat::replay_result sim = remat::simulate(c, r.schedule);
        REQUIRE(sim.valid());
        CHECK(sim.peak_memory <= budget);
        CHECK(sim.peak_memory == r.schedule.peak_memory);
        // What an executor can run as modelled: no a_k dropped while the tape recorded from it
        // is held (detail/verify/recorded_inputs.hpp).
        CHECK(remat::detail::first_drop_of_recorded_input(r.schedule.ops, c.length()) ==
              r.schedule.ops.size());
      } else {
        CHECK(r.schedule.ops.empty());
        CHECK((r.min_feasible_budget > budget || r.min_feasible_budget == solve_result::no_budget));
      }
      CHECK_THROWS_AS((void)remat::solve(c, -1, {.solver = s}), remat::solver_error);
    }
  }
}

// The recording of t_{k+1} holds a_k in a framework, so a schedule an executor runs must not
// drop a_k with F_none(k) while t_{k+1} is held: the drop would free nothing there. Every solver,
// with and without a link to host memory, at budgets from 0 to store-all's peak.
TEST_CASE("property: no solver drops the input of a held tape") {
  std::mt19937_64 rng(48);
  int schedules = 0;
  for (int n = 0; n < 30; ++n) {
    chain c = remat::testing::random_chain(rng, {1, 4, 10, true});
    if (n % 3 == 0) remat::testing::add_random_options(rng, c, 2);
    INFO(remat::testing::chain_text(c));
    const size_type top =
        remat::simulate(c, remat::detail::store_all_ops(static_cast<std::int32_t>(c.length())))
            .peak_memory;
    for (solver s : remat::all_solvers) {
      CAPTURE(remat::name(s));
      chain linked = c;
      if (remat::needs_link(s) || (s == solver::exhaustive && n % 2 == 1 && c.length() <= 2)) {
        if (n % 3 == 0) continue;  // the searches with transfers take stages without options
        linked.transfer = {4, 4};
      }
      for (size_type budget = 0; budget <= top; budget += std::max<size_type>(1, top / 12)) {
        CAPTURE(budget);
        const solve_result r = remat::solve(linked, budget, {.solver = s});
        if (!r.feasible) continue;
        ++schedules;
        CHECK(remat::detail::first_drop_of_recorded_input(r.schedule.ops, c.length()) ==
              r.schedule.ops.size());
      }
    }
  }
  MESSAGE(schedules << " schedules checked");
}

// `solve_options::threads` changes how fast the DP solvers are, never what they find. On networks
// of the zoo at 30% and 50% of store-all, where the exact solve at one budget searches (resnet101
// at 50%, densenet121) or caps the frontier DP (gpt2-medium), and with 500 slots: one thread and
// four give the same least budget and makespan, and schedules that replay within the budget; with
// slots, the same schedule. (This file mentions threads, so ThreadSanitizer runs it.)
TEST_CASE("threads: one thread or four, the same optimum, on networks of the zoo") {
  int cases = 0;
  for (const char* name : {"resnet101", "densenet121", "gpt2-medium"}) {
    const chain c = remat::zoo::build(name).chain;
    const size_type top =
        remat::solve(c, remat::max_size, {.solver = solver::store_all}).min_feasible_budget;
    for (const double share : {0.3, 0.5}) {
      const auto budget = static_cast<size_type>(share * static_cast<double>(top));
      for (const solver which : {solver::optimal, solver::checkpoint_only, solver::min_memory}) {
        for (const size_type slots : {remat::auto_slots, remat::exact_units, size_type{500}}) {
          CAPTURE(name);
          CAPTURE(share);
          CAPTURE(remat::name(which));
          CAPTURE(slots);
          const solve_options one{.solver = which, .slots = slots, .threads = 1};
          solve_options four = one;
          four.threads = 4;
          const solve_result a = remat::solve(c, budget, one);
          const solve_result b = remat::solve(c, budget, four);
          CHECK(a.feasible == b.feasible);
          CHECK(a.min_feasible_budget == b.min_feasible_budget);
          CHECK(a.unit == b.unit);
          // Every engine reads back the same schedule, and the default weighs its engines on one
          // thread's estimates: the same schedule, whatever the threads.
          CHECK(a.schedule == b.schedule);
          CHECK(a.exact == b.exact);
          if (!a.feasible || !b.feasible) continue;
          ++cases;
          CHECK(a.schedule.makespan == b.schedule.makespan);
          const remat::replay_result run = remat::simulate(c, b.schedule);
          REQUIRE(run.valid());
          CHECK(run.peak_memory <= budget);
        }
      }
    }
  }
  CHECK(cases > 20);
}

}  // namespace unit_solve_test
