// The whole trade-off curve of the optimal solver, from one solve: every budget at which the
// fastest persistent schedule changes, with its makespan.
//
//   for (const remat::trade_off_point& p : remat::trade_off(chain).points)
//     plot(p.budget, p.makespan);  // from the least feasible budget to the store-all peak
#pragma once

#include <remat/chain.hpp>
#include <remat/concepts.hpp>
#include <remat/detail/dp/dispatch.hpp>
#include <remat/solver_options.hpp>

#include <string>
#include <vector>

namespace remat {

/// A point of the curve: from `budget` up to the next point's budget, the fastest schedule takes
/// `makespan`.
struct trade_off_point {
  size_type budget = 0;
  double makespan = 0;
  friend constexpr bool operator==(const trade_off_point&, const trade_off_point&) = default;
};

struct trade_off_result {
  /// Increasing budgets, strictly decreasing makespans; the first is the least feasible budget
  /// (empty when none is), the last the fastest schedule's (store-all's, or checkpoint-all's
  /// without the tape branch). `solve` at any budget returns the makespan of the last point at
  /// or below it.
  std::vector<trade_off_point> points;
};

namespace detail {
struct trade_off_fn {
  /// The exact curve of `options.solver`, `optimal` or `checkpoint-only`, on the chain's own
  /// sizes (`options.slots` is not looked at): a `solver_error` where its frontier DP would pass
  /// the limits (`max_estimated_seconds`, `max_table_bytes`; coarsening shortens the chain).
  template <chain_like C>
  constexpr trade_off_result operator()(const C& chain_in,
                                        const solve_options& options = {}) const {
    const chain c = to_chain(chain_in);
    if (!info(options.solver).has_curve())
      throw_solver_error("trade_off: only optimal and checkpoint-only have a curve, not " +
                         std::string(name(options.solver)));
    const whole_frontier f = make_whole_frontier(c, options, options.solver);
    trade_off_result out;
    for (const frontier_step& p : f.table.root()) out.points.push_back({f.md.x[0] + p.m, p.t});
    return out;
  }
};
}  // namespace detail

/// `remat::trade_off(chain, options)`: see `trade_off_result`.
inline constexpr detail::trade_off_fn trade_off{};

}  // namespace remat
