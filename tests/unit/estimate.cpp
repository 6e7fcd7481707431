// The estimate of an exact solve: measured when the probe finishes the DP, projected otherwise,
// and compared with the limits.
#include <remat/estimate.hpp>
#include <remat/solve.hpp>
#include <remat/zoo.hpp>

#include <doctest/doctest.h>

#include "random_chain.hpp"

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

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

namespace {

using remat::size_type;

size_type store_all_peak(const remat::chain& c) {
  return remat::simulate(c, remat::store_all_ops(static_cast<std::int32_t>(c.length())))
      .peak_memory;
}

// A chain with its least feasible budget and store-all's peak, between which the solve at one
// budget runs the frontier DP.
struct named_chain {
  std::string name;
  remat::chain c;
  size_type least = 0;
  size_type peak = 0;
};

// Random chains on which the probe finishes the DP (measured), and two zoo networks (exact sums:
// they take the capped path of the solve).
std::vector<named_chain> some_chains() {
  std::mt19937_64 rng(2024);
  std::vector<named_chain> out;
  for (const int n : {30, 45})
    out.push_back(
        {"random " + std::to_string(n),
         remat::testing::random_chain(rng, {.min_stages = n, .max_stages = n, .max_size = 1000})});
  for (const char* m : {"resnet50", "vgg16"}) out.push_back({m, remat::zoo::build(m, {}).chain});
  for (named_chain& n : out) {
    n.least = remat::solve(n.c, 0).min_feasible_budget;
    n.peak = store_all_peak(n.c);
    REQUIRE(n.least > 0);
    REQUIRE(n.least < n.peak);
  }
  return out;
}

// Whether the solve at `budget` was exact: neither thinned nor refused.
bool solve_is_exact(const remat::chain& c, size_type budget, const remat::solve_options& o) {
  try {
    return remat::solve(c, budget, o).epsilon == 0;
  } catch (const remat::solver_error&) {
    return false;
  }
}

// The same without the branch-and-bound search at one budget (the frontier DP alone, which is what
// the estimate estimates): the search can finish exactly where the frontier DP would thin.
bool frontier_solve_is_exact(const remat::chain& c, size_type budget,
                             const remat::solve_options& o) {
  try {
    return remat::detail::solve_exact(c, budget, o, remat::solver::optimal,
                                      remat::detail::dp_branches::tape_and_checkpoint,
                                      remat::detail::infinite_time)
               .epsilon == 0;
  } catch (const remat::solver_error&) {
    return false;
  }
}

}  // namespace

TEST_CASE("estimate_solve_at: no frontier DP below the least budget or from store-all's peak up") {
  for (const named_chain& n : some_chains()) {
    CAPTURE(n.name);
    const remat::chain& c = n.c;
    const auto L = static_cast<std::int32_t>(c.length());
    const size_type least = n.least;
    const size_type peak = n.peak;
    for (const size_type budget : {size_type{0}, least - 1, peak, peak + 1}) {
      CAPTURE(budget);
      // The least-memory DP only: its cost, whatever the table limit (the solve reads none).
      const remat::solve_estimate e = remat::estimate_solve_at(c, budget, {.max_table_bytes = 16});
      CHECK_FALSE(e.runs_frontier);
      CHECK(e.seconds == remat::detail::need_dp_seconds(c, 1));
      CHECK(e.bytes == remat::detail::need_dp_bytes(L));
      CHECK(e.exact_within_limits);
      CHECK(solve_is_exact(c, budget, {.max_table_bytes = 16}));
      CHECK(remat::solve(c, budget).feasible == (budget >= least));
      // A limit below the least-memory DP's own estimate: refused, as the solve refuses it.
      CHECK_FALSE(
          remat::estimate_solve_at(c, budget, {.max_estimated_seconds = 0}).exact_within_limits);
      CHECK_FALSE(solve_is_exact(c, budget, {.max_estimated_seconds = 0}));
    }
    // Between them the frontier DP runs: a 16-byte table is refused, there as in the solve.
    const size_type mid = least + (peak - least) / 2;
    const remat::solve_estimate f = remat::estimate_solve_at(c, mid, {.max_table_bytes = 16});
    CHECK(f.runs_frontier);
    CHECK_FALSE(f.exact_within_limits);
    CHECK_FALSE(solve_is_exact(c, mid, {.max_table_bytes = 16}));
  }
  CHECK_THROWS_AS((void)remat::estimate_solve_at(some_chains()[0].c, -1), remat::solver_error);
}

TEST_CASE("estimate_solve_at: the frontier DP capped at the budget, as the solve runs it") {
  int exact_where_whole_refuses = 0;
  for (const named_chain& n : some_chains()) {
    CAPTURE(n.name);
    const remat::chain& c = n.c;
    const auto L = static_cast<std::int32_t>(c.length());
    const size_type least = n.least;
    const size_type peak = n.peak;
    const remat::solve_estimate whole = remat::estimate_solve(c);
    const double need_seconds = remat::detail::need_dp_seconds(c, 1);
    for (const double f : {0.1, 0.3}) {
      const size_type budget =
          least + static_cast<size_type>(f * static_cast<double>(peak - least));
      CAPTURE(budget);
      const remat::solve_estimate e = remat::estimate_solve_at(c, budget);
      REQUIRE(e.runs_frontier);
      CHECK(e.exact_within_limits);
      REQUIRE(e.bytes > remat::detail::need_dp_bytes(L));  // the frontiers' bytes
      // Never above the whole curve's (in seconds, but for the least-memory DP the solve at one
      // budget runs first).
      CHECK(e.bytes <= whole.bytes);
      if (e.measured && whole.measured) CHECK(e.seconds <= whole.seconds + need_seconds);
      // Under limits from half the estimate to far above it, the estimate says whether the solve
      // is exact (neither thinned nor refused): it checks them against the most the DP projected
      // as it went, as the solve does. (The seconds' limits on the frontier's part, above the
      // least-memory DP's.)
      for (const double k : {0.5, 1.5, 2.0, 4.0, 100.0}) {
        CAPTURE(k);
        const double frontier_seconds = e.seconds - need_seconds;
        for (const remat::solve_options& o :
             {remat::solve_options{.max_table_bytes = static_cast<std::size_t>(k * e.bytes)},
              remat::solve_options{.max_estimated_seconds = need_seconds + k * frontier_seconds}}) {
          const bool exact = frontier_solve_is_exact(c, budget, o);
          const bool within = remat::estimate_solve_at(c, budget, o).exact_within_limits;
          CHECK(within == exact);
          if (k == 0.5) CHECK_FALSE(exact);
          if (k == 100.0) CHECK(exact);
          // With the search first, exact wherever the frontier DP would be, and maybe more.
          if (within) CHECK(solve_is_exact(c, budget, o));
        }
      }
      // A table limit between the two estimates: the whole curve's would refuse where the solve at
      // this budget is exact.
      const remat::solve_options o{.max_table_bytes =
                                       static_cast<std::size_t>((e.bytes + whole.bytes) / 2)};
      const bool exact = frontier_solve_is_exact(c, budget, o);
      CHECK(remat::estimate_solve_at(c, budget, o).exact_within_limits == exact);
      if (exact && !remat::estimate_solve(c, o).exact_within_limits) ++exact_where_whole_refuses;
    }
  }
  CHECK(exact_where_whole_refuses > 0);
}

TEST_CASE("estimate_solve_at: the whole curve's estimate where the sums round, as the solve") {
  std::mt19937_64 rng(99);
  remat::chain c = remat::testing::random_chain(rng, {.min_stages = 20, .max_stages = 20});
  c.stages[0].forward_time = 1e306;  // times within a factor 8 (L + 1) of the largest double
  REQUIRE_FALSE(remat::detail::make_model(c, 1).exact_sums);
  const remat::solve_estimate whole = remat::estimate_solve(c);
  for (const size_type budget : {size_type{0}, store_all_peak(c)}) {
    const remat::solve_estimate e = remat::estimate_solve_at(c, budget);
    CHECK(e.runs_frontier);
    CHECK(e.measured);
    CHECK(e.bytes == whole.bytes);
    CHECK(e.seconds == whole.seconds);
  }
}

}  // namespace unit_estimate_test
