// The properties every solver must have, checked on random (chain, budget) cases, sizes exact:
// its schedule replays in the simulator within the budget and to the makespan and peak it
// claims; an infeasible budget is reported with no schedule and is below `min_feasible_budget`;
// that budget is honest (the solver finds a schedule there and none one below); and the optimal
// DP is never slower on the same (chain, budget).
#pragma once

#include <doctest/doctest.h>

#include <remat/simulate.hpp>
#include <remat/solver_options.hpp>
#include <remat/solvers/optimal.hpp>
#include <remat/solvers/store_all.hpp>

#include "random_chain.hpp"

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>

namespace remat::testing {

struct property_counts {
  int cases = 0;
  int feasible = 0;
  int infeasible = 0;
};

struct property_options {
  int cases = 2000;
  std::uint64_t seed = 1;
  random_chain_options chains{1, 12, 10, true};
};

/// `solve(chain, budget)` returns a `solve_result`. Budgets are drawn between a little below the
/// least persistent budget and a little above the store-all peak.
template <class Solve>
property_counts check_solver_properties(Solve solve, const property_options& o = {}) {
  std::mt19937_64 rng(o.seed);
  property_counts n;
  const solve_options exact{.solver = solver::optimal, .slots = exact_units};
  for (int t = 0; t < o.cases; ++t) {
    const chain c = random_chain(rng, o.chains);
    const size_type lowest = solve_optimal(c, 0, exact).min_feasible_budget;
    const size_type highest = solve_store_all(c, 0).min_feasible_budget;
    const size_type budget = std::uniform_int_distribution<size_type>(
        std::max<size_type>(0, lowest - 3), highest + 3)(rng);
    INFO("case ", t, ", budget ", budget);
    const solve_result r = solve(c, budget);
    ++n.cases;
    REQUIRE(r.budget == budget);
    if (!r.feasible) {
      ++n.infeasible;
      CHECK(r.schedule.ops.empty());
      REQUIRE(r.min_feasible_budget != solve_result::no_budget);
      CHECK(budget < r.min_feasible_budget);
    } else {
      ++n.feasible;
      const replay_result replayed = simulate(c, r.schedule);
      INFO(describe(replayed, r.schedule.ops));
      REQUIRE(replayed.valid());
      CHECK(replayed.peak_memory <= budget);
      CHECK(replayed.peak_memory == r.schedule.peak_memory);
      // Times are multiples of 0.5 and few: every sum is exact in double.
      CHECK(replayed.makespan == r.schedule.makespan);
      CHECK(r.min_feasible_budget <= budget);
      const solve_result best = solve_optimal(c, budget, exact);
      REQUIRE(best.feasible);
      CHECK(best.schedule.makespan <= r.schedule.makespan);
    }
    // The smallest budget it reports is one at which it finds a schedule.
    const solve_result at_min = solve(c, r.min_feasible_budget);
    CHECK(at_min.feasible);
    CHECK(at_min.min_feasible_budget == r.min_feasible_budget);
    if (r.min_feasible_budget > 0) CHECK_FALSE(solve(c, r.min_feasible_budget - 1).feasible);
  }
  return n;
}

}  // namespace remat::testing
