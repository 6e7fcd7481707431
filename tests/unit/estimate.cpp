// The estimate of an exact solve: measured when the probe finishes the DP, projected otherwise,
// and compared with the limits.
#include <remat/estimate.hpp>

#include <doctest/doctest.h>

#include "random_chain.hpp"

#include <random>

namespace unit_estimate_test {

TEST_CASE("estimate_solve: measured on small chains, within the limits, compared with them") {
  std::mt19937_64 rng(1520);
  const remat::chain c = remat::testing::random_chain(rng, {.min_stages = 12, .max_stages = 12});
  const remat::solve_estimate e = remat::estimate_solve(c);
  CHECK(e.measured);
  CHECK(e.seconds > 0);
  CHECK(e.bytes > 0);
  CHECK(e.exact_within_limits);
  CHECK_FALSE(remat::estimate_solve(c, {.max_estimated_seconds = 0}).exact_within_limits);
  CHECK_FALSE(remat::estimate_solve(c, {.max_table_bytes = 16}).exact_within_limits);
  // A probe that stops at once projects the rest.
  const remat::chain long_chain =
      remat::testing::random_chain(rng, {.min_stages = 120, .max_stages = 120, .max_size = 1000});
  const remat::solve_estimate p = remat::estimate_solve(long_chain, {}, 1e-6);
  CHECK_FALSE(p.measured);
  CHECK(p.seconds > 0);
  CHECK(p.bytes > 0);
  // A probe shorter than the least work (every interval trying each split point once) still runs
  // the first diagonals and projects from them: it used to stop at once and give that least,
  // far below the cost of chains whose frontiers have many points (resnet1001: 0.14 s projected
  // for a 25 s solve).
  const double least =
      remat::detail::frontier_least_work(120) / remat::detail::frontier_work_per_second;
  const remat::solve_estimate q = remat::estimate_solve(long_chain, {}, least / 3);
  CHECK_FALSE(q.measured);
  CHECK(q.seconds > 3 * least);
  // Solvers that never refuse cost nothing here.
  const remat::solve_estimate r = remat::estimate_solve(c, {.solver = remat::solver::revolve});
  CHECK(r.seconds == 0);
  CHECK(r.exact_within_limits);
}

}  // namespace unit_estimate_test
