// What a DP solve will cost, before running it: for tools and for automatic coarsening, which
// decide from it whether a chain is solved exactly, thinned or coarsened.
//
//   const remat::solve_estimate e = remat::estimate_solve(chain);
//   if (!e.exact_within_limits) ...;  // the solve would thin its frontiers, or refuse
#pragma once

#include <remat/chain.hpp>
#include <remat/concepts.hpp>
#include <remat/detail/dp/cost.hpp>
#include <remat/detail/dp/frontier_dp.hpp>
#include <remat/detail/dp/model.hpp>
#include <remat/detail/dp/optimal_fast.hpp>
#include <remat/detail/dp/persistent_dp.hpp>
#include <remat/solver_options.hpp>

#include <algorithm>
#include <cstddef>
#include <thread>

namespace remat {

struct solve_estimate {
  /// The exact solve's time (seconds, with `options.threads` threads) and the memory of its
  /// frontiers (bytes), every budget at once.
  double seconds = 0;
  double bytes = 0;
  /// Measured rather than projected: the probe finished the whole DP.
  bool measured = false;
  /// Both within `options.max_estimated_seconds` and `max_table_bytes`: `solve` with these
  /// options will be exact (no thinning, no refusal).
  bool exact_within_limits = true;
};

namespace detail {
struct estimate_solve_fn {
  /// The cost of the exact solve (`slots = exact_units`) of `options.solver` on `chain`: for
  /// `optimal` and `checkpoint-only`, the frontier DP run for at most `probe_seconds` and the
  /// rest projected from the diagonals done (frontiers grow with the interval; the projection
  /// fits that growth: from 5% of the work done it came within 0.9 to 1.3 times the work on the
  /// zoo and random chains, up to 2 times high from 1%), at a fixed rate per work unit
  /// (`detail::frontier_work_per_second`), so on a loaded machine the time is low in proportion
  /// to the load; for `min-memory`, its O(L^3)
  /// least-memory DP; 0 for the solvers that never refuse a chain.
  template <chain_like C>
  solve_estimate operator()(const C& chain_in, const solve_options& options = {},
                            double probe_seconds = 0.05) const {
    const chain c = to_chain(chain_in);
    solve_estimate out;
    const auto L = static_cast<std::int32_t>(c.length());
    const double limit = static_cast<double>(options.max_table_bytes.value_or(default_table_limit()));
    if (options.solver == solver::min_memory) {
      out.seconds = need_dp_pairs(L) / exact_need_pairs_per_second;
      out.bytes = need_dp_bytes(L);
    } else if (options.solver == solver::optimal || options.solver == solver::checkpoint_only) {
      const dp_branches branches = options.solver == solver::optimal
                                       ? dp_branches::tape_and_checkpoint
                                       : dp_branches::checkpoint_only;
      const model md = make_model(c, 1);
      interval_bounds bounds;
      if (!md.exact_sums) bounds = make_interval_bounds(md, {}, branches);
      const unsigned threads = std::min(dp_threads(options.threads),
                                        std::max(1U, std::thread::hardware_concurrency()));
      const double rate = frontier_work_per_second * threads;
      const double fixed_bytes = 16 * static_cast<double>(interval_count(L));
      const frontier_table t = frontier_dp(
          md, bounds,
          {.branches = branches,
           .threads = threads,
           .max_work = probe_seconds * rate,
           .stop_on_projection = false});
      out.measured = t.complete;
      out.seconds = 20 * static_cast<double>(interval_count(L)) / frontier_work_per_second +
                    (t.complete ? t.work : t.projected_work) / rate;
      out.bytes =
          fixed_bytes + (t.complete ? t.points_done : t.projected_points) * frontier_point_bytes;
    } else {
      return out;
    }
    out.exact_within_limits = !(out.seconds > options.max_estimated_seconds) && !(out.bytes > limit);
    return out;
  }
};
}  // namespace detail

/// `remat::estimate_solve(chain, options, probe_seconds = 0.05)`: see `solve_estimate`.
inline constexpr detail::estimate_solve_fn estimate_solve{};

}  // namespace remat
