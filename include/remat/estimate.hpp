// What a DP solve will cost, before running it: for tools and for automatic coarsening, which
// decide from it whether a chain is solved as given or coarsened.
//
//   const remat::solve_estimate e = remat::estimate_solve_at(chain, budget);
//   if (!e.within_limits) ...;  // solve(chain, budget) would refuse: coarsen, or use slots
//
// `estimate_solve_at(chain, budget)` costs the plan the solve at that budget makes
// (detail/dp/dispatch.hpp: the same least-memory DP and choice of engines, with probes and
// estimates in place of the engines' runs); `estimate_solve(chain)` the whole trade-off curve
// (every budget at once: sweeps, the curve).
#pragma once

#include <remat/chain.hpp>
#include <remat/concepts.hpp>
#include <remat/detail/dp/cost.hpp>
#include <remat/detail/dp/dispatch.hpp>
#include <remat/detail/dp/engines/frontier.hpp>
#include <remat/detail/dp/model.hpp>
#include <remat/detail/dp/platform.hpp>
#include <remat/solver_options.hpp>

#include <algorithm>
#include <cstddef>
#include <optional>
#include <vector>

namespace remat {

struct solve_estimate {
  /// The solve's time (seconds, with `options.threads` threads; an upper bound at the estimates'
  /// rates, so on a loaded machine low in proportion to the load) and the most memory of its
  /// tables (bytes).
  double seconds = 0;
  double bytes = 0;
  /// Measured rather than projected: the probe finished the frontier DP.
  bool measured = false;
  /// Whether a DP over memory runs at all (not below the least budget, nor from the fastest
  /// schedule's peak up, nor for the solvers without one).
  bool runs_dp = false;
  /// The result will be the exact optimum (predicted from the probe and the estimates: a search
  /// the estimate does not count on can still make it exact).
  bool exact = true;
  /// The solve runs within `options.max_estimated_seconds` and `max_table_bytes`: it will not
  /// refuse the chain.
  bool within_limits = true;
};

namespace detail {

inline bool fits_limits(double seconds, double bytes, const solve_options& options) {
  const auto limit = static_cast<double>(options.max_table_bytes.value_or(default_table_limit()));
  return !(seconds > options.max_estimated_seconds) && !(bytes > limit);
}

// The whole frontier DP, run for at most `probe_seconds` and the rest projected (frontiers grow
// with the interval; `frontier::plan::within` fits that growth), with the classes' fixed cost.
inline solve_estimate probe_whole_frontier(const model& md, dp_branches branches,
                                           const solve_options& options, double probe_seconds) {
  solve_estimate out;
  out.runs_dp = true;
  interval_bounds bounds;
  if (!md.exact_sums) bounds = make_interval_bounds(md, {}, branches);
  const frontier_limits limits = frontier_limits_of(md.L, options);
  const frontier_table t = frontier_dp(md, bounds,
                                       {.branches = branches,
                                        .threads = limits.threads,
                                        .max_work = probe_seconds * limits.rate,
                                        .stop_on_projection = false});
  out.measured = t.complete;
  const double work = t.complete ? t.work : std::max(t.projected_work, t.peak_projected_work);
  const double points =
      t.complete ? t.points_done : std::max(t.projected_points, t.peak_projected_points);
  out.seconds = limits.fixed.seconds + work / limits.rate;
  out.bytes = limits.fixed.bytes + points * frontier_point_bytes;
  out.within_limits = fits_limits(out.seconds, out.bytes, options);
  out.exact = out.within_limits;
  return out;
}

// The cost of a plan of `choose`.
// The frontier DP's probes are those of the solve (`tuning.frontier_probe_seconds`, in work
// units: the same each time), so the estimate weighs the engines as the solve will; the whole
// frontier, where the plan has one, is probed for `whole_probe_seconds`.
inline solve_estimate estimate_plan(const chain& c, const dp_plan& p, const solve_options& options,
                                    double whole_probe_seconds = 0.05) {
  solve_estimate out;
  if (p.mode == dp_mode::slots) {
    out.seconds = p.slots_need_seconds + p.dense_seconds;
    out.bytes = std::max(need_dp_bytes(p.rounded.L), p.dense_bytes);
    out.runs_dp = p.budget < p.fastest.bytes.peak_memory;
    out.exact = p.unit.unit == 1 || !out.runs_dp;
    out.within_limits = fits_limits(out.seconds, out.bytes, options);
    return out;
  }
  if (p.whole) {
    out = probe_whole_frontier(p.md, p.branches, options, whole_probe_seconds);
    if (!out.within_limits && p.mode == dp_mode::automatic) {  // Rotor's DP, with its own least
      dp_plan slots = p;
      plan_slots(c, slots, options, rotor_slots);
      out.seconds += slots.slots_need_seconds + slots.dense_seconds;
      out.bytes = std::max(out.bytes, slots.dense_bytes);
      out.within_limits =
          fits_limits(slots.slots_need_seconds + slots.dense_seconds, slots.dense_bytes, options);
      out.exact = false;
    }
    return out;
  }
  out.seconds = p.need_seconds;
  out.bytes = need_dp_bytes(p.md.L);
  if (p.settled) return out;
  out.runs_dp = true;
  frontier_table probe;
  std::optional<lower_bound_plan> bounds;
  const auto byte_limit =
      static_cast<double>(options.max_table_bytes.value_or(default_table_limit()));
  // As `run_exact` goes: the probe, then the first engine that fits what it left.
  const std::vector<exact_candidate> candidates =
      exact_candidates(p, options, probe_seconds_of(p), probe, bounds);
  const double probe_spent = probe.work / frontier_limits_of(p.md.L, options, p.threads).rate;
  if (probe.complete) {
    out.seconds += probe_spent;
    for (const exact_candidate& e : candidates)
      if (e.engine == exact_engine::frontier) out.bytes = std::max(out.bytes, e.bytes);
    out.measured = true;
    return out;
  }
  for (const exact_candidate& e : candidates) {
    if (e.seconds > p.allowance - probe_spent || e.bytes > byte_limit) continue;
    out.seconds += probe_spent + e.seconds;
    out.bytes = std::max(out.bytes, e.bytes);
    return out;
  }
  out.exact = false;
  if (!p.fallback) {
    out.within_limits = false;
    return out;
  }
  // The exact attempts (at most the allowance), then the 500-slot DP and its bound's DP, which
  // rounds to fewer memories.
  const double bound_share = static_cast<double>(tuning.auto_bound_slots) / rotor_slots;
  out.seconds += p.allowance + (1 + bound_share) * p.dense_seconds;
  out.bytes = std::max(out.bytes, p.dense_bytes);
  return out;
}

struct estimate_solve_fn {
  /// The cost of the exact solve (`slots = exact_units`) of `options.solver` on `chain`, every
  /// budget at once: for `optimal` and `checkpoint-only`, the frontier DP run for at most
  /// `probe_seconds` and the rest projected from the diagonals done, at a fixed rate per work
  /// unit; for `min-memory`, its least-memory DP; 0 for the solvers that never refuse a chain.
  template <chain_like C>
  solve_estimate operator()(const C& chain_in, const solve_options& options = {},
                            double probe_seconds = 0.05) const {
    const chain c = to_chain(chain_in);
    solve_estimate out;
    const auto L = static_cast<std::int32_t>(c.length());
    const solver_info& about = info(options.solver);
    if (about.dp == solver_dp::least_memory) {
      out.seconds = need_dp_pairs(L) / tuning.exact_need_pairs_per_second;
      out.bytes = need_dp_bytes(L);
      out.runs_dp = true;
      out.within_limits = fits_limits(out.seconds, out.bytes, options);
    } else if (about.has_curve()) {
      out = probe_whole_frontier(make_model(c, 1), branches_of(options.solver), options,
                                 probe_seconds);
    }
    return out;
  }
};

struct estimate_solve_at_fn {
  /// The cost of `solve(chain, budget, options)`: the plan it makes (its least-memory DP runs
  /// here, O(L^3)), with the frontier DP probed as the solve probes it. The solvers without a
  /// DP: as `estimate_solve`.
  template <chain_like C>
  solve_estimate operator()(const C& chain_in, size_type budget,
                            const solve_options& options = {}) const {
    if (budget < 0) throw_solver_error("the budget must be >= 0");
    const chain c = to_chain(chain_in);
    if (!info(options.solver).has_curve()) return estimate_solve_fn{}(c, options);
    try {
      return estimate_plan(c, choose(c, budget, options, options.solver), options);
    } catch (const solver_error&) {
      // Refused before any engine: the least-memory DP alone passes the limits.
      solve_estimate out;
      out.seconds = need_dp_seconds(c, need_dp_runs(c, options.slots));
      out.bytes = need_dp_bytes(static_cast<std::int32_t>(c.length()));
      out.exact = false;
      out.within_limits = false;
      return out;
    }
  }
};
}  // namespace detail

/// `remat::estimate_solve(chain, options, probe_seconds = 0.05)`: the exact solve of every budget
/// at once (the whole trade-off curve). See `solve_estimate`.
inline constexpr detail::estimate_solve_fn estimate_solve{};

/// `remat::estimate_solve_at(chain, budget, options)`: what
/// `solve(chain, budget, options)` will run. A name of its own, not an overload:
/// `estimate_solve(chain, {})` would take `{}` for a budget of 0.
inline constexpr detail::estimate_solve_at_fn estimate_solve_at{};

}  // namespace remat
