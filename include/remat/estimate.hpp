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
#include <remat/solvers/offload.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

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

// `which` (`optimal`, `checkpoint-only`, `min-memory`'s exact solves) at `budget`: its dispatch,
// costed. Refused before any engine (the least-memory DP alone past the limits): outside them.
inline solve_estimate estimate_persistent(const chain& c, size_type budget,
                                          const solve_options& options, solver which) {
  try {
    cost_policy policy{c, options};
    return dispatch(policy, choose(c, budget, options, which));
  } catch (const solver_error&) {
    solve_estimate out;
    out.seconds = need_dp_seconds(c, need_dp_runs(c, options.slots));
    out.bytes = need_dp_bytes(static_cast<std::int32_t>(c.length()));
    out.exact = false;
    out.within_limits = false;
    return out;
  }
}

// `min-memory` at `budget` (solvers/min_memory.hpp): its exact solve at budget 0 (the least-memory
// DP, which gives the least budget), then its exact solve at that least budget, each costed as
// its dispatch; where either passes the limits, the least-peak DP it falls back on, refused only
// past `max_estimated_seconds`.
inline solve_estimate estimate_min_memory(const chain& c, size_type budget,
                                          const solve_options& options) {
  solve_options exact = options;
  exact.slots = exact_units;
  const auto L = static_cast<std::int32_t>(c.length());
  double spent = 0;
  try {
    const dp_choice first = choose(c, 0, exact, solver::min_memory);
    cost_policy policy{c, exact};
    solve_estimate out = dispatch(policy, first);
    spent = out.seconds;
    if (out.within_limits) {
      // (Where the sums round, the whole frontier gives the least budget as it runs, and the
      // second solve runs it again.)
      const bool whole = std::holds_alternative<whole_step>(first.step);
      const size_type least = first.min_feasible_budget;
      if (!whole && (least == solve_result::no_budget || budget < least)) {
        out.exact = false;  // nothing fits: no second solve
        return out;
      }
      solve_estimate second =
          whole ? out : estimate_persistent(c, least, exact, solver::min_memory);
      if (second.within_limits) {
        second.seconds += out.seconds;
        second.bytes = std::max(second.bytes, out.bytes);
        return second;
      }
      spent += need_dp_seconds(c, 1);  // the second solve's least-memory DP, before it refuses
    }
  } catch (const solver_error&) {
  }
  solve_estimate out;
  const double least_peak = need_dp_pairs(L) / tuning.exact_need_pairs_per_second;
  out.seconds = spent + least_peak;
  out.bytes = need_dp_bytes(L);
  out.exact = false;
  out.within_limits = !(least_peak > options.max_estimated_seconds);
  return out;
}

// `offload` at `budget` (solvers/offload.hpp): `optimal`'s solve (the recompute-only schedule it
// starts from); with a link, the spine's least budget (a least-memory DP) and the baselines, and
// where `offload_runs_spine`, the spine DP in each unit `for_spine_units` tries, as `spine_plan`
// costs it: until the budget reaches the spine's least budget in one, or one passes the limits,
// which the solve refuses.
inline solve_estimate estimate_offload(const chain& c, size_type budget,
                                       const solve_options& options) {
  solve_options recompute = options;
  recompute.solver = solver::optimal;
  solve_estimate out = estimate_persistent(c, budget, recompute, solver::optimal);
  if (!c.transfer.available() || !out.within_limits) return out;
  out.exact = false;
  out.seconds += need_dp_seconds(c, 1);
  size_type floor = spine_least_budget(c);
  for (const solve_result& r : offload_baselines_at(c, budget))
    floor = lesser_budget(floor, r.min_feasible_budget);
  if (!offload_runs_spine(c, budget, floor)) return out;
  const auto byte_limit =
      static_cast<double>(options.max_table_bytes.value_or(default_table_limit()));
  for_spine_units(c, budget, options, [&](const spine_plan& p) {
    if (!p.runs) return false;
    out.runs_dp = true;
    out.seconds += p.seconds;
    out.bytes = std::max(out.bytes, p.bytes);
    if (p.bytes > byte_limit || p.seconds > options.max_estimated_seconds) {
      out.within_limits = false;  // refused there
      return true;
    }
    out.exact = p.feasible && p.unit == 1;
    return p.feasible;
  });
  return out;
}

struct estimate_solve_fn {
  /// The cost of the exact solve (`slots = exact_units`) of `options.solver` on `chain`, every
  /// budget at once: for `optimal` and `checkpoint-only`, the frontier DP run for at most
  /// `probe_seconds` and the rest projected from the diagonals done, at a fixed rate per work
  /// unit; for `min-memory`, its least-memory DP; 0 for the solvers without a DP over memory, and
  /// for `offload`, whose DP is over one budget's units (`estimate_solve_at`).
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
  /// The cost of `solve(chain, budget, options)` as given (not coarsened): its dispatch, costed
  /// (its least-memory DPs run here, O(L^3), and its frontier DP is probed as the solve probes
  /// it); `min-memory`'s two exact solves or its fallback; `offload`'s recompute-only solve and
  /// its spine DP in the units it would run in. The solvers without a DP over memory: nothing.
  /// `options.in_flight` is not looked at: with K > 1 the solve also builds the frontier table up
  /// to the budget and walks its spine once per candidate retained memory, which this does not
  /// cost (docs/pipelines.md, "Speed").
  template <chain_like C>
  solve_estimate operator()(const C& chain_in, size_type budget,
                            const solve_options& options = {}) const {
    if (budget < 0) throw_solver_error("the budget must be >= 0");
    const chain c = to_chain(chain_in);
    switch (info(options.solver).dp) {
      case solver_dp::persistent: return estimate_persistent(c, budget, options, options.solver);
      case solver_dp::least_memory: return estimate_min_memory(c, budget, options);
      case solver_dp::offload: return estimate_offload(c, budget, options);
      case solver_dp::none: break;
    }
    return {};
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
