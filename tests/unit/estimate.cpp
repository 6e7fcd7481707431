// The estimate of a DP solve: the plan the solve makes, costed; measured when the probe finishes
// the frontier DP, projected otherwise, and compared with the limits.
#include <remat/estimate.hpp>
#include <remat/solve.hpp>
#include <remat/zoo.hpp>

#include <doctest/doctest.h>

#include "random_chain.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
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
  CHECK(e.within_limits);
  CHECK_FALSE(remat::estimate_solve(c, {.max_estimated_seconds = 0}).within_limits);
  CHECK_FALSE(remat::estimate_solve(c, {.max_table_bytes = 16}).within_limits);
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
      remat::detail::frontier_least_work(120) / remat::detail::tuning.frontier_work_per_second;
  const remat::solve_estimate q = remat::estimate_solve(long_chain, {}, least / 3);
  CHECK_FALSE(q.measured);
  CHECK(q.seconds > 3 * least);
  // Solvers that never refuse cost nothing here.
  const remat::solve_estimate r = remat::estimate_solve(c, {.solver = remat::solver::revolve});
  CHECK(r.seconds == 0);
  CHECK(r.within_limits);
}

namespace {

using remat::size_type;

size_type store_all_peak(const remat::chain& c) {
  return remat::simulate(c, remat::detail::store_all_ops(static_cast<std::int32_t>(c.length())))
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

// Whether the solve at `budget` runs (is not refused), and whether its result is exact.
struct outcome {
  bool runs = false;
  bool exact = false;
};

outcome solve_outcome(const remat::chain& c, size_type budget, const remat::solve_options& o) {
  try {
    const remat::solve_result r = remat::solve(c, budget, o);
    return {true, !r.feasible || r.exact};
  } catch (const remat::solver_error&) {
    return {};
  }
}

}  // namespace

TEST_CASE("estimate_solve_at: no DP over memory below the least budget or from store-all's peak up") {
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
      CHECK_FALSE(e.runs_dp);
      CHECK(e.seconds == remat::detail::need_dp_seconds(c, 1));
      CHECK(e.bytes == remat::detail::need_dp_bytes(L));
      CHECK(e.within_limits);
      CHECK(e.exact);
      const outcome o = solve_outcome(c, budget, {.max_table_bytes = 16});
      CHECK(o.runs);
      CHECK(o.exact);
      CHECK(remat::solve(c, budget).feasible == (budget >= least));
      // A limit below the least-memory DP's own estimate: refused, as the solve refuses it.
      CHECK_FALSE(remat::estimate_solve_at(c, budget, {.max_estimated_seconds = 0}).within_limits);
      CHECK_FALSE(solve_outcome(c, budget, {.max_estimated_seconds = 0}).runs);
    }
    // Between them a DP over memory runs: a 16-byte table is refused, there as in the solve, by
    // default and when exact is asked for.
    const size_type mid = least + (peak - least) / 2;
    for (const size_type slots : {remat::auto_slots, remat::exact_units}) {
      const remat::solve_options o{.slots = slots, .max_table_bytes = 16};
      const remat::solve_estimate f = remat::estimate_solve_at(c, mid, o);
      CHECK(f.runs_dp);
      CHECK_FALSE(f.within_limits);
      CHECK_FALSE(solve_outcome(c, mid, o).runs);
    }
  }
  CHECK_THROWS_AS((void)remat::estimate_solve_at(some_chains()[0].c, -1), remat::solver_error);
}

// Exact asked for, under limits from half the estimate to far above it, and by default: the
// estimate says whether the solve runs and whether it is exact, as the solve's own plan decides.
TEST_CASE("estimate_solve_at: the plan of the solve at one budget, costed") {
  int agree = 0, disagree = 0, exact_by_default = 0, bounded_by_default = 0;
  for (const named_chain& n : some_chains()) {
    CAPTURE(n.name);
    const remat::chain& c = n.c;
    const auto L = static_cast<std::int32_t>(c.length());
    const double need_seconds = remat::detail::need_dp_seconds(c, 1);
    for (const double f : {0.1, 0.3}) {
      const size_type budget =
          n.least + static_cast<size_type>(f * static_cast<double>(n.peak - n.least));
      CAPTURE(budget);
      const remat::solve_options exact{.slots = remat::exact_units};
      const remat::solve_estimate e = remat::estimate_solve_at(c, budget, exact);
      REQUIRE(e.runs_dp);
      CHECK(e.within_limits);
      CHECK(e.exact);
      // The engine's table (the dense DP's, where it is the fastest, can be larger than the whole
      // frontier's: the engines are weighed by time, within the table limit).
      REQUIRE(e.bytes > remat::detail::need_dp_bytes(L));
      for (const double k : {0.5, 1.5, 2.0, 4.0, 100.0}) {
        CAPTURE(k);
        const double dp_seconds = e.seconds - need_seconds;
        for (const remat::solve_options& o :
             {remat::solve_options{.slots = remat::exact_units,
                                   .max_table_bytes = static_cast<std::size_t>(k * e.bytes)},
              remat::solve_options{.slots = remat::exact_units,
                                   .max_estimated_seconds = need_seconds + k * dp_seconds}}) {
          const bool within = remat::estimate_solve_at(c, budget, o).within_limits;
          const outcome r = solve_outcome(c, budget, o);
          CHECK(r.exact == r.runs);  // exact asked for: exact, or refused
          (within == r.runs ? agree : disagree) += 1;
          if (k == 100.0) CHECK(r.runs);
        }
      }
      // By default: never refused here (the 500-slot fallback fits), exact as predicted.
      const remat::solve_estimate d = remat::estimate_solve_at(c, budget);
      const outcome r = solve_outcome(c, budget, {});
      CHECK(d.within_limits);
      CHECK(r.runs);
      CHECK(d.exact == r.exact);
      (r.exact ? exact_by_default : bounded_by_default) += 1;
    }
  }
  // The estimate runs the solve's own probe and weighs its engines as it does: it can differ
  // only where an engine it counted on stops past a projection the probe did not see.
  CHECK(disagree * 10 <= agree);
  CHECK(exact_by_default > 0);
}

TEST_CASE("estimate_solve_at: the whole curve's estimate where the sums round, as the solve") {
  std::mt19937_64 rng(99);
  remat::chain c = remat::testing::random_chain(rng, {.min_stages = 20, .max_stages = 20});
  c.stages[0].forward_time = 1e306;  // times within a factor 8 (L + 1) of the largest double
  REQUIRE_FALSE(remat::detail::make_model(c, 1).exact_sums);
  const remat::solve_estimate whole = remat::estimate_solve(c);
  for (const size_type budget : {size_type{0}, store_all_peak(c)}) {
    const remat::solve_estimate e = remat::estimate_solve_at(c, budget);
    CHECK(e.runs_dp);
    CHECK(e.measured);
    CHECK(e.bytes == whole.bytes);
    CHECK(e.seconds == whole.seconds);
  }
}

namespace {

// Whether `solve` refuses `c` at `budget` under `o` (a `solver_error`), else its result.
std::optional<remat::solve_result> solved(const remat::chain& c, size_type budget,
                                          const remat::solve_options& o) {
  try {
    return remat::solve(c, budget, o);
  } catch (const remat::solver_error&) {
    return std::nullopt;
  }
}

}  // namespace

// Every solver, at budgets from below the least to store-all's peak, on chains with and without a
// link: the estimate refuses where the solve refuses (no time at all, a 16-byte table), says a DP
// over memory runs where the engine the solve takes has a table (refused at 16 bytes, or for
// min-memory its fallback taken there), and predicts exactness. The solvers without a DP over
// memory cost nothing and never refuse for the limits.
TEST_CASE("estimate_solve_at: every solver, refused and run as its solve is") {
  std::mt19937_64 rng(4949);
  std::vector<remat::chain> chains;
  for (const int n : {4, 4, 16, 24}) {
    remat::chain c =
        remat::testing::random_chain(rng, {.min_stages = n, .max_stages = n, .max_size = 1000});
    if (n == 24) remat::testing::add_random_options(rng, c, 3, 1000);
    chains.push_back(c);
    c.transfer = {40, 60};  // size units per time unit: a move takes about a stage's time
    chains.push_back(c);
  }
  int ran_dp = 0, spine_ran = 0, refused_at_zero = 0;
  for (const remat::chain& c : chains) {
    const size_type least = remat::solve(c, 0).min_feasible_budget;
    const size_type peak = store_all_peak(c);
    const auto L = c.length();
    for (const remat::solver s : remat::all_solvers) {
      const remat::solver_info& about = remat::info(s);
      if (about.needs_link && !c.transfer.available()) continue;
      const std::size_t most = c.transfer.available() ? about.max_link_stages : about.max_stages;
      if (most != 0 && L > most) continue;  // refused for its length, whatever the limits
      // (The exhaustive search with transfers can give up past its states, whatever the limits.)
      if (s == remat::solver::exhaustive && c.transfer.available()) continue;
      CAPTURE(remat::name(s));
      for (const size_type budget : {least / 2, least, (least + peak) / 2, peak}) {
        CAPTURE(budget);
        const remat::solve_options o{.solver = s};
        const remat::solve_estimate e = remat::estimate_solve_at(c, budget, o);
        const std::optional<remat::solve_result> r = solved(c, budget, o);
        REQUIRE(e.within_limits);
        REQUIRE(r.has_value());
        const remat::solve_options zero{.solver = s, .max_estimated_seconds = 0};
        const remat::solve_options tiny{.solver = s, .max_table_bytes = 16};
        const bool refused_at_16 = !solved(c, budget, tiny).has_value();
        CHECK(remat::estimate_solve_at(c, budget, zero).within_limits ==
              solved(c, budget, zero).has_value());
        CHECK(remat::estimate_solve_at(c, budget, tiny).within_limits == !refused_at_16);
        if (about.dp == remat::solver_dp::none) {
          CHECK(e.seconds == 0);
          CHECK(e.bytes == 0);
          CHECK_FALSE(e.runs_dp);
          CHECK(solved(c, budget, zero).has_value());
          CHECK_FALSE(refused_at_16);
          continue;
        }
        refused_at_zero += solved(c, budget, zero).has_value() ? 0 : 1;
        CHECK(e.seconds > 0);
        CHECK(e.bytes > 0);
        ran_dp += e.runs_dp ? 1 : 0;
        if (about.dp == remat::solver_dp::least_memory) {
          // Its exact solve's engine refused at 16 bytes: the least-peak DP's schedule instead.
          CHECK_FALSE(refused_at_16);
          const remat::solve_result fallen = *solved(c, budget, tiny);
          if (!e.runs_dp) CHECK(fallen == *r);
          if (e.runs_dp) CHECK_FALSE(fallen.exact);
        } else {
          CHECK(e.runs_dp == refused_at_16);
        }
        if (about.dp != remat::solver_dp::offload && r->feasible) CHECK(e.exact == r->exact);
        // Offload: exact where the spine DP ran on the chain's own units; a baseline faster than
        // its schedule (which the estimate does not run) makes the solve inexact.
        if (about.dp == remat::solver_dp::offload && r->exact) CHECK(e.exact);
        // Offload with a link: the spine DP's table, beyond the recompute-only solve's.
        if (about.dp == remat::solver_dp::offload && c.transfer.available() &&
            e.bytes > remat::estimate_solve_at(c, budget, {}).bytes)
          ++spine_ran;
      }
    }
  }
  CHECK(ran_dp > 20);
  CHECK(spine_ran > 0);
  CHECK(refused_at_zero > 20);
}

// The offload solver's spine DP past the limits: with the chain's own sizes as units its table
// passes a small limit, and the estimate says so before the solve refuses; by default (500
// slots) it fits.
TEST_CASE("estimate_solve_at: offload's spine DP, its table and its refusal") {
  std::mt19937_64 rng(5050);
  remat::chain c =
      remat::testing::random_chain(rng, {.min_stages = 12, .max_stages = 12, .max_size = 100000});
  c.transfer = {40000, 60000};
  const size_type budget = store_all_peak(c) / 2;
  const remat::solve_options automatic{.solver = remat::solver::offload};
  const remat::solve_options exact{.solver = remat::solver::offload, .slots = remat::exact_units};
  const remat::solve_estimate a = remat::estimate_solve_at(c, budget, automatic);
  const remat::solve_estimate x = remat::estimate_solve_at(c, budget, exact);
  REQUIRE(a.runs_dp);
  REQUIRE(x.runs_dp);
  // The spine's table over the budget's own bytes is far larger than over 500 slots.
  CHECK(x.bytes > 100 * a.bytes);
  const auto between = static_cast<std::size_t>(10 * a.bytes);
  const remat::solve_options exact_small{
      .solver = remat::solver::offload, .slots = remat::exact_units, .max_table_bytes = between};
  const remat::solve_options automatic_small{.solver = remat::solver::offload,
                                             .max_table_bytes = between};
  CHECK_FALSE(remat::estimate_solve_at(c, budget, exact_small).within_limits);
  CHECK_THROWS_AS((void)remat::solve(c, budget, exact_small), remat::solver_error);
  CHECK(remat::estimate_solve_at(c, budget, automatic_small).within_limits);
  CHECK(remat::solve(c, budget, automatic_small).feasible);
}

// Each row's estimate with the chain's own units (`exact_units`): the one `estimate_solve_at`
// returns, refused where its solve refuses, a DP over memory only for the rows that have one,
// exactness predicted (offload: never inexact where its solve is exact). Min-memory and offload
// run more than one dispatch, each costed.
TEST_CASE("estimate_solve_at: every row's estimate in exact units, against its solve") {
  std::mt19937_64 rng(4950);
  std::vector<remat::chain> chains;
  for (const int n : {3, 6, 12}) {
    remat::chain c =
        remat::testing::random_chain(rng, {.min_stages = n, .max_stages = n, .max_size = 300});
    chains.push_back(c);
    c.transfer = {40, 60};
    chains.push_back(c);
  }
  int exact = 0, refused = 0;
  for (const remat::chain& c : chains) {
    const size_type least = remat::solve(c, 0).min_feasible_budget;
    const size_type peak = store_all_peak(c);
    for (const remat::solver s : remat::all_solvers) {
      const remat::solver_info& about = remat::info(s);
      if (about.needs_link && !c.transfer.available()) continue;
      const std::size_t most = c.transfer.available() ? about.max_link_stages : about.max_stages;
      if (most != 0 && c.length() > most) continue;
      if (s == remat::solver::exhaustive && c.transfer.available()) continue;
      CAPTURE(remat::name(s));
      for (const size_type budget : {least / 2, least, (least + peak) / 2, peak}) {
        CAPTURE(budget);
        for (const double seconds : {60.0, 0.0}) {
          const remat::solve_options o{
              .solver = s, .slots = remat::exact_units, .max_estimated_seconds = seconds};
          const remat::solve_estimate e = remat::estimate_solve_at(c, budget, o);
          const remat::solve_estimate row = remat::detail::row_of(s).estimate(c, budget, o);
          CHECK(row.seconds == e.seconds);
          CHECK(row.bytes == e.bytes);
          CHECK(row.within_limits == e.within_limits);
          const std::optional<remat::solve_result> r = solved(c, budget, o);
          CHECK(e.within_limits == r.has_value());
          refused += r ? 0 : 1;
          if (about.dp == remat::solver_dp::none) {
            CHECK_FALSE(e.runs_dp);
            CHECK(e.seconds == 0);
          }
          if (!r || !r->feasible) continue;
          if (about.dp == remat::solver_dp::offload)
            CHECK((!r->exact || e.exact));
          else if (about.dp != remat::solver_dp::none)
            CHECK(e.exact == r->exact);
          exact += r->exact ? 1 : 0;
        }
      }
    }
  }
  CHECK(exact > 20);
  CHECK(refused > 10);
}

}  // namespace unit_estimate_test
