// The curve from one solve against `solve` at each budget: the same makespans, the same least
// budget, and nothing changes between two points.
#include <remat/trade_off.hpp>

#include <remat/simulate.hpp>
#include <remat/solve.hpp>

#include <doctest/doctest.h>

#include "chain_text.hpp"
#include "random_chain.hpp"

#include <cstddef>
#include <random>

namespace unit_trade_off_test {

TEST_CASE("property: every point is solve's makespan at its budget, and holds up to the next") {
  std::mt19937_64 rng(1510);
  for (int n = 0; n < 200; ++n) {
    const remat::chain c =
        remat::testing::random_chain(rng, {.min_stages = 1, .max_stages = 10, .max_size = 100});
    CAPTURE(remat::testing::chain_text(c));
    for (const remat::solver s : {remat::solver::optimal, remat::solver::checkpoint_only}) {
      const remat::trade_off_result curve = remat::trade_off(c, {.solver = s});
      REQUIRE(!curve.points.empty());
      const remat::solve_result least = remat::solve(c, 0, {.solver = s});
      CHECK(curve.points.front().budget == least.min_feasible_budget);
      for (std::size_t k = 0; k < curve.points.size(); ++k) {
        const remat::trade_off_point& p = curve.points[k];
        if (k > 0) {
          CHECK(curve.points[k - 1].budget < p.budget);
          CHECK(p.makespan < curve.points[k - 1].makespan);
          // One byte less: the previous point's makespan.
          CHECK(remat::solve(c, p.budget - 1, {.solver = s}).schedule.makespan ==
                curve.points[k - 1].makespan);
        }
        const remat::solve_result r = remat::solve(c, p.budget, {.solver = s});
        REQUIRE(r.feasible);
        CHECK(r.schedule.makespan == p.makespan);
      }
      // The last point is the fastest schedule's: nothing faster at any budget.
      CHECK(remat::solve(c, remat::max_size, {.solver = s}).schedule.makespan ==
            curve.points.back().makespan);
    }
  }
}

TEST_CASE("trade_off: only the DP solvers with a memory dimension have a curve") {
  remat::chain c;
  c.stages = {{1, 1, 1, 1, 0, 0}};
  CHECK_THROWS_AS((void)remat::trade_off(c, {.solver = remat::solver::revolve}),
                  remat::solver_error);
}

}  // namespace unit_trade_off_test
