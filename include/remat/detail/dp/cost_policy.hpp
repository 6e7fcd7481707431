// `dispatch`'s policy that costs the step it visits (run_policy.hpp runs it): each leaf's
// estimate where the solve would run it, so that `remat::estimate_solve_at` takes the solve's own
// path (the same choice, the same probe of the frontier DP, the same order of engines), as CUB
// answers a size query through the dispatch that runs. Each solver's estimate for its row starts
// here (`estimate_persistent`; min-memory's and offload's in their headers).
#pragma once

#include <remat/chain.hpp>
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
#include <vector>

namespace remat::detail {

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
    out.seconds += a.spent + fallback_dense_factor * d.slotted->dense_seconds;
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

// `optimal`'s and `checkpoint-only`'s estimate (their rows' `estimate`).
template <solver S>
solve_estimate estimate_dp(const chain& c, size_type budget, const solve_options& options) {
  return estimate_persistent(c, budget, options, S);
}

}  // namespace remat::detail
