// What a DP solve will cost, before running it: for tools and for automatic coarsening, which
// decide from it whether a chain is solved as given or coarsened.
//
//   const remat::solve_estimate e = remat::estimate_solve_at(chain, budget);
//   if (!e.within_limits) ...;  // solve(chain, budget) would refuse: coarsen, or use slots
//
// `estimate_solve_at(chain, budget)` runs the solve's own dispatch (detail/dp/dispatch.hpp: the
// same choice, the same probe of the frontier DP and the same order of engines) under a policy
// that costs each step where the solve would run it (`detail::cost_policy`, cost_policy.hpp), as
// CUB answers a size query through the dispatch that runs; `estimate_solve(chain)` costs the whole
// trade-off curve (every budget at once: sweeps, the curve).
#pragma once

#include <remat/chain.hpp>
#include <remat/concepts.hpp>
#include <remat/detail/dp/cost.hpp>
#include <remat/detail/dp/cost_policy.hpp>
#include <remat/detail/dp/frontier_solve.hpp>
#include <remat/detail/dp/model.hpp>
#include <remat/detail/dp/tuning.hpp>
#include <remat/detail/solver_rows.hpp>
#include <remat/solver_options.hpp>

#include <cstdint>

namespace remat {

namespace detail {

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
      const dp_cost least_peak = least_peak_cost(L);
      out.seconds = least_peak.seconds;
      out.bytes = least_peak.bytes;
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
    return row_of(options.solver).estimate(remat::to_chain(chain_in), budget, options);
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
