// Tests of remat/solve_graph.hpp: every solver's schedules on random graphs at random budgets
// replay node by node within the budget at the claimed makespan (solve_graph checks it and
// throws otherwise; the test checks the figures it returns too), and bad graphs are errors.
#include <remat/solve_graph.hpp>

#include <doctest/doctest.h>

#include <random_graph.hpp>
#include <trials.hpp>

#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

namespace unit_solve_graph_test {

namespace {

using remat::size_type;
using remat::solver;

}  // namespace

TEST_CASE("solve_graph: schedules at random budgets replay node by node within them") {
  std::mt19937_64 rng(4303);
  const solver solvers[] = {solver::optimal,    solver::checkpoint_only, solver::min_memory,
                            solver::store_all,  solver::sequential,      solver::chen_sqrt,
                            solver::chen_greedy, solver::revolve,        solver::exhaustive};
  std::size_t feasible = 0, solved = 0;
  for (int trial = 0; trial < remat::testing::trials(600); ++trial) {
    const remat::graph g = remat::testing::random_graph(rng, {.min_nodes = 1, .max_nodes = 12});
    const remat::linearization lin = remat::linearize(g);
    const size_type most =
        remat::solve(lin.chain, remat::max_size, {.solver = solver::store_all}).schedule.peak_memory;
    const size_type least = remat::solve(lin.chain, 0).min_feasible_budget;
    REQUIRE(least <= most);
    for (int draw = 0; draw < 3; ++draw) {
      const size_type budget = std::uniform_int_distribution<size_type>(least, most)(rng);
      for (const solver s : solvers) {
        if (s == solver::exhaustive && lin.chain.length() > 4) continue;
        CAPTURE(trial);
        CAPTURE(budget);
        CAPTURE(remat::name(s));
        const remat::graph_solve_result r = remat::solve_graph(g, lin, budget, {.solver = s});
        ++solved;
        if (!r.result.feasible) continue;
        ++feasible;
        REQUIRE(r.replay.valid());
        CHECK(r.replay.fits(budget));
        CHECK(r.replay.peak_memory <= r.result.schedule.peak_memory);
        CHECK(std::fabs(r.replay.makespan - r.result.schedule.makespan) <=
              1e-9 * (1 + r.result.schedule.makespan));
      }
    }
  }
  CHECK(feasible > solved / 2);
}

TEST_CASE("solve_graph: the optimal solver's schedule is that of the chain of blocks") {
  std::mt19937_64 rng(4304);
  for (int trial = 0; trial < remat::testing::trials(200); ++trial) {
    const remat::graph g = remat::testing::random_graph(rng);
    const remat::linearization lin = remat::linearize(g);
    const size_type budget = remat::solve(lin.chain, 0).min_feasible_budget;
    const remat::graph_solve_result r = remat::solve_graph(g, budget);
    REQUIRE(r.result.feasible);
    CHECK(r.result == remat::solve(lin.chain, budget));
    CHECK(r.lin.chain == lin.chain);
    CHECK(r.replay.fits(budget));
  }
}

TEST_CASE("solve_graph: a bad graph is a graph_error naming the node") {
  remat::graph g;
  const auto x = g.input("x", 1);
  g.apply("a", {x, 7}, 1);
  CHECK_THROWS_WITH_AS(remat::solve_graph(g, 100),
                       "node 0 (\"a\"): reads value 7, which does not exist (2 values)",
                       remat::graph_error);
}

}  // namespace unit_solve_graph_test
