// What a DP solve will cost, before running it: for tools and for automatic coarsening, which
// decide from it whether a chain is solved as given or coarsened.
//
//   const remat::solve_estimate e = remat::estimate_solve_at(chain, budget);
//   if (!e.within_limits) ...;  // solve(chain, budget) would refuse: coarsen, or use slots
//
// `estimate_solve_at(chain, budget)` runs the solve's own dispatch (detail/dp/dispatch.hpp: the
// same choice, the same probe of the frontier DP and the same order of engines) under a policy
// that costs each step where the solve would run it (`detail::cost_policy`, below), as CUB answers
// a size query through the dispatch that runs; `estimate_solve(chain)` costs the whole trade-off
// curve (every budget at once: sweeps, the curve).
#pragma once

#include <remat/chain.hpp>
#include <remat/concepts.hpp>
#include <remat/detail/dp/choose.hpp>
#include <remat/detail/dp/cost.hpp>
#include <remat/detail/dp/dispatch.hpp>
#include <remat/detail/dp/engines/frontier.hpp>
#include <remat/detail/dp/exact_engines.hpp>
#include <remat/detail/dp/frontier_solve.hpp>
#include <remat/detail/dp/model.hpp>
#include <remat/detail/dp/platform.hpp>
#include <remat/detail/dp/tuning.hpp>
#include <remat/solver_options.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>

namespace remat {

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

// `dispatch`'s policy that costs the step it visits where run_policy.hpp runs it: each engine's
// estimate where the solve would run it. `so_far`: the whole frontier's probe, where that step
// falls back on slots.
struct cost_policy {
  using result = solve_estimate;
  const chain& c;
  const solve_options& options;
  double whole_probe_seconds = 0.05;  // the probe of the whole frontier, where the step has one
  solve_estimate so_far{};

  // The least-memory DP on the chain's own sizes: what every step but slots and the whole
  // frontier starts with.
  solve_estimate least_memory(const dp_choice& d) const {
    solve_estimate out;
    out.seconds = d.least.seconds;
    out.bytes = need_dp_bytes(d.md.L);
    return out;
  }

  solve_estimate settled(const dp_choice& d) const { return least_memory(d); }

  // Rotor's DP on slots, after what was spent so far.
  solve_estimate slots(const dp_choice& d, const slotted_dp& s, size_type) const {
    solve_estimate out = so_far;
    const double seconds = s.need_seconds + s.dense_seconds;
    const double bytes = std::max(need_dp_bytes(s.rounded.L), s.dense_bytes);
    out.seconds += seconds;
    out.bytes = std::max(out.bytes, bytes);
    out.runs_dp = out.runs_dp || d.request.budget < d.fastest.bytes.peak_memory;
    out.exact = s.unit.unit == 1 || d.request.budget >= d.fastest.bytes.peak_memory;
    out.within_limits = fits_limits(seconds, bytes, options);
    return out;
  }

  solve_estimate constant(const dp_choice&) const { return {}; }  // (never costed)

  // The whole frontier, probed and projected; nullopt where it passes the limits and the step
  // falls back (the probe's cost is kept in `so_far`).
  std::optional<solve_estimate> whole(const dp_choice& d, const whole_step& w) {
    const solve_estimate e = probe_whole_frontier(
        d.md, d.request.branches, w.fallback ? default_exact_limits(options) : options,
        whole_probe_seconds);
    if (e.within_limits || !w.fallback) return e;
    so_far = e;
    return std::nullopt;
  }

  solve_estimate probed(const dp_choice& d, const engines_step&, const exact_attempt& a) const {
    solve_estimate out = least_memory(d);
    out.runs_dp = true;
    out.seconds += a.spent;
    for (const exact_candidate& x : a.candidates)
      if (x.engine == exact_engine::frontier) out.bytes = std::max(out.bytes, x.bytes);
    out.measured = true;
    return out;
  }

  // The first engine that fits is counted on to finish.
  std::optional<solve_estimate> engine(const dp_choice& d, const engines_step&,
                                       const exact_candidate& x, double, exact_attempt& a) const {
    solve_estimate out = least_memory(d);
    out.runs_dp = true;
    out.seconds += a.spent + x.seconds;
    out.bytes = std::max(out.bytes, x.bytes);
    return out;
  }

  solve_estimate refuse(const dp_choice& d, const engines_step&, const exact_attempt&) const {
    solve_estimate out = least_memory(d);
    out.runs_dp = true;
    out.exact = false;
    out.within_limits = false;
    return out;
  }

  // The default's solve of the chain without its options, where it falls back on one with them.
  solve_estimate faster(const dp_choice&, solve_estimate own,
                        const std::optional<solve_estimate>& plain) const {
    if (plain) {
      own.seconds += plain->seconds;
      own.bytes = std::max(own.bytes, plain->bytes);
    }
    return own;
  }

  // The probe (no engine fitted what it left: none is tried), then the 500-slot DP and its bound's
  // DP, which rounds to fewer memories, and the chain's solve without its options.
  solve_estimate fallback(const dp_choice& d, const engines_step&, const exact_attempt& a,
                          const std::optional<solve_estimate>& plain) const {
    solve_estimate out = least_memory(d);
    out.runs_dp = true;
    out.exact = false;
    const double bound_share = static_cast<double>(tuning.auto_bound_slots) / rotor_slots;
    out.seconds += a.spent + (1 + bound_share) * d.slotted->dense_seconds;
    out.bytes = std::max(out.bytes, d.slotted->dense_bytes);
    return faster(d, out, plain);
  }
};

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
  /// The cost of `solve(chain, budget, options)`: its dispatch, costed (its least-memory DP runs
  /// here, O(L^3), and its frontier DP is probed as the solve probes it). The solvers without a
  /// curve: as `estimate_solve`.
  template <chain_like C>
  solve_estimate operator()(const C& chain_in, size_type budget,
                            const solve_options& options = {}) const {
    if (budget < 0) throw_solver_error("the budget must be >= 0");
    const chain c = to_chain(chain_in);
    if (!info(options.solver).has_curve()) return estimate_solve_fn{}(c, options);
    try {
      cost_policy policy{c, options};
      return dispatch(policy, choose(c, budget, options, options.solver));
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
