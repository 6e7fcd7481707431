// What a DP solve will cost, before running it: for tools and for automatic coarsening, which
// decide from it whether a chain is solved exactly, thinned or coarsened.
//
//   const remat::solve_estimate e = remat::estimate_solve_at(chain, budget);
//   if (!e.exact_within_limits) ...;  // solve(chain, budget) would thin its frontiers, or refuse
//
// `estimate_solve(chain)` estimates the whole trade-off curve (every budget: sweeps, the curve),
// `estimate_solve_at(chain, budget)` the one solve at that budget, which does less.
#pragma once

#include <remat/chain.hpp>
#include <remat/concepts.hpp>
#include <remat/detail/dp/cost.hpp>
#include <remat/detail/dp/frontier_dp.hpp>
#include <remat/detail/dp/model.hpp>
#include <remat/detail/dp/optimal_fast.hpp>
#include <remat/detail/dp/persistent_dp.hpp>
#include <remat/solver_options.hpp>
#include <remat/solvers/optimal.hpp>

#include <algorithm>
#include <cstddef>

namespace remat {

struct solve_estimate {
  /// The exact solve's time (seconds, with `options.threads` threads) and the most memory of its
  /// tables (bytes): of every budget at once (`estimate_solve`), or of the solve at one budget
  /// (`estimate_solve_at`: its least-memory DP, then its frontier DP capped at the budget, if any).
  double seconds = 0;
  double bytes = 0;
  /// Measured rather than projected: the probe finished the whole frontier DP.
  bool measured = false;
  /// Whether the solve runs the frontier DP at all (not at budgets below the least or from
  /// store-all's peak up, nor when it refuses its least-memory DP).
  bool runs_frontier = false;
  /// Within `options.max_estimated_seconds` and `max_table_bytes` as the solve checks them: `solve`
  /// with these options (at that budget) will be exact (no thinning, no refusal). False: the
  /// frontier DP would pass them; a solve at one budget then still tries branch and bound
  /// (detail/dp/branch_and_bound.hpp) before it thins, and can be exact all the same.
  bool exact_within_limits = true;
};

namespace detail {

// The frontier DP (`cap`: `frontier_options::cap`, as the solve passes it) run for at most
// `probe_seconds` and the rest projected (`frontier::plan::within`), the classes' fixed cost
// included; `exact_within_limits` against the limits as `frontier_within_limits` checks them, on
// the most projected as the DP went (the same as the solve's where the probe finished).
inline solve_estimate probe_frontier(const model& md, dp_branches branches,
                                     const solve_options& options, double probe_seconds,
                                     size_type cap = unreachable) {
  solve_estimate out;
  out.runs_frontier = true;
  interval_bounds bounds;
  if (!md.exact_sums) bounds = make_interval_bounds(md, {}, branches);
  const frontier_limits limits = frontier_limits_of(md, options);  // the solve's, as it runs
  const double rate = limits.rate;
  const frontier_fixed_cost fixed = limits.fixed;
  const frontier_table t = frontier_dp(md, bounds,
                                       {.branches = branches,
                                        .threads = limits.threads,
                                        .max_work = probe_seconds * rate,
                                        .stop_on_projection = false,
                                        .cap = cap});
  out.measured = t.complete;
  const double work = t.complete ? t.work : t.projected_work;
  const double points = t.complete ? t.points_done : t.projected_points;
  out.seconds = fixed.seconds + work / rate;
  out.bytes = fixed.bytes + points * frontier_point_bytes;
  // The solve stops (and thins) as soon as a projection made as it goes passes the limits, which
  // from the first diagonals can be above the whole (or the projection here): the most of them.
  const auto limit = static_cast<double>(limits.byte_limit);
  const double peak_seconds = fixed.seconds + std::max(work, t.peak_projected_work) / rate;
  const double peak_bytes =
      fixed.bytes + std::max(points, t.peak_projected_points) * frontier_point_bytes;
  out.exact_within_limits =
      !(peak_seconds > options.max_estimated_seconds) && !(peak_bytes > limit);
  return out;
}

struct estimate_solve_fn {
  /// The cost of the exact solve (`slots = exact_units`) of `options.solver` on `chain`, every
  /// budget at once: for `optimal` and `checkpoint-only`, the frontier DP run for at most
  /// `probe_seconds` and the rest projected from the diagonals done (frontiers grow with the
  /// interval; the projection fits that growth: from 5% of the work done it came within 0.9 to
  /// 1.3 times the work on the zoo and random chains, up to 2 times high from 1%), at a fixed rate
  /// per work unit (`detail::frontier_work_per_second`), so on a loaded machine the time is low in
  /// proportion to the load; for `min-memory`, its O(L^3) least-memory DP; 0 for the solvers that
  /// never refuse a chain.
  template <chain_like C>
  solve_estimate operator()(const C& chain_in, const solve_options& options = {},
                            double probe_seconds = 0.05) const {
    const chain c = to_chain(chain_in);
    solve_estimate out;
    const auto L = static_cast<std::int32_t>(c.length());
    const double limit =
        static_cast<double>(options.max_table_bytes.value_or(default_table_limit()));
    if (options.solver == solver::min_memory) {
      out.seconds = need_dp_pairs(L) / exact_need_pairs_per_second;
      out.bytes = need_dp_bytes(L);
      out.exact_within_limits =
          !(out.seconds > options.max_estimated_seconds) && !(out.bytes > limit);
    } else if (options.solver == solver::optimal || options.solver == solver::checkpoint_only) {
      const dp_branches branches = options.solver == solver::optimal
                                       ? dp_branches::tape_and_checkpoint
                                       : dp_branches::checkpoint_only;
      out = probe_frontier(make_model(c, 1), branches, options, probe_seconds);
    }
    return out;
  }
};

struct estimate_solve_at_fn {
  /// The cost of `solve(chain, budget, options)` with exact units, as `solve_exact` decides it:
  /// its least-memory DP (O(L^3), estimated, and run here only where the budget lies between
  /// nothing and store-all's peak, to tell whether it is feasible), then, where the budget is
  /// feasible and below the fastest schedule's peak, the frontier DP capped at the budget, probed
  /// for at most `probe_seconds` and projected. Where that projects more than 1 ms and more than
  /// twice the search's lower bounds' DP, the solve runs branch and bound first, given half of that
  /// time (at least 10 ms, at most a quarter of the time limit): the estimate is the frontier
  /// DP's, which the solve passes by that much where the search does not finish, and is usually
  /// well below where it does (`detail::solve_by_search`). `seconds` adds the two, `bytes` is the
  /// larger; `exact_within_limits` checks each against the limits as the solve does (the
  /// least-memory DP's seconds only). Chains whose sums round (or pass 2^52) get the whole curve,
  /// as there. `min-memory` and the solvers that never refuse: as `estimate_solve`.
  template <chain_like C>
  solve_estimate operator()(const C& chain_in, size_type budget, const solve_options& options = {},
                            double probe_seconds = 0.05) const {
    if (budget < 0) throw_solver_error("the budget must be >= 0");
    const chain c = to_chain(chain_in);
    if (options.solver != solver::optimal && options.solver != solver::checkpoint_only)
      return estimate_solve_fn{}(c, options, probe_seconds);
    const dp_branches branches = options.solver == solver::optimal
                                     ? dp_branches::tape_and_checkpoint
                                     : dp_branches::checkpoint_only;
    const model md = make_model(c, 1);
    if (!md.exact_sums || !need_in_doubles(md))
      return probe_frontier(md, branches, options, probe_seconds);
    solve_estimate out;
    out.seconds = need_dp_seconds(c, 1);
    out.bytes = need_dp_bytes(md.L);
    if (out.seconds > options.max_estimated_seconds) {  // refused before the least-memory DP
      out.exact_within_limits = false;
      return out;
    }
    const fastest_schedule fastest = fastest_schedule_of(c, branches);
    if (budget >= fastest.bytes.peak_memory) return out;
    const size_type least = persistent_min_budget(md, branches);
    const size_type min_feasible =
        fastest.lower(least == unreachable ? solve_result::no_budget : least);
    if (budget < min_feasible) return out;
    const solve_estimate f = probe_frontier(md, branches, options, probe_seconds, budget - md.x[0]);
    out.seconds += f.seconds;
    out.bytes = std::max(out.bytes, f.bytes);
    out.measured = f.measured;
    out.runs_frontier = true;
    out.exact_within_limits = f.exact_within_limits;
    return out;
  }
};
}  // namespace detail

/// `remat::estimate_solve(chain, options, probe_seconds = 0.05)`: the exact solve of every budget
/// at once (the whole trade-off curve). See `solve_estimate`.
inline constexpr detail::estimate_solve_fn estimate_solve{};

/// `remat::estimate_solve_at(chain, budget, options, probe_seconds = 0.05)`: what
/// `solve(chain, budget, options)` will run (no more than `estimate_solve`'s frontier DP). A name
/// of its own, not an overload: `estimate_solve(chain, {})` would take `{}` for a budget of 0.
inline constexpr detail::estimate_solve_at_fn estimate_solve_at{};

}  // namespace remat
