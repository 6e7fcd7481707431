// Min-memory: the persistent schedule of least peak memory, and with it the smallest budget at
// which any persistent schedule exists, without bisection.
//
// The least-memory DP (detail/dp/least_memory.hpp) gives the least budget, and `optimal`'s exact
// solve at that budget the fastest persistent schedule of that least peak. Min-memory runs it
// where it stays within the limits (`max_estimated_seconds`, `max_table_bytes`).
//
// Elsewhere it falls back on the least-memory DP's own schedule (`detail::least_peak_dp`, also
// the reference of the tests): for every interval (i, l), the least m at which
// OPT(i, l, m) is finite, over the same branches and with the same exact conditions, in O(L^3).
// Every condition of the DP is the peak of an op the schedule runs, so the peak of the schedule it
// builds, replayed, is exactly that least budget (`x[0]` plus the need of (0, L)), which is
// `persistent_min_budget`, the frontier's first point, and what bisection on `optimal`'s
// feasibility finds on exact sizes. Among the choices of least peak at an interval it keeps the
// fastest (ties to the tape branch, then the smallest j); that is a tie-break, not the fastest
// schedule at this peak, so the fallback's schedule can be slower than the frontier's.
//
// The schedule does not depend on the budget: it is returned whenever its peak fits. Both DPs
// work on the sizes as given (`options.slots` does not apply, `unit` is 1): its
// `min_feasible_budget` can be below `optimal`'s with slots, which rounds sizes up.
#pragma once

#include <remat/chain.hpp>
#include <remat/concepts.hpp>
#include <remat/detail/dp/choose.hpp>
#include <remat/detail/dp/cost.hpp>
#include <remat/detail/dp/cost_policy.hpp>
#include <remat/detail/dp/dispatch.hpp>
#include <remat/detail/dp/in_flight.hpp>
#include <remat/detail/dp/least_memory.hpp>
#include <remat/detail/dp/model.hpp>
#include <remat/detail/verify/finish.hpp>
#include <remat/schedule.hpp>
#include <remat/solver_options.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <variant>
#include <vector>

namespace remat {

namespace detail {

// The least-peak DP's schedule: the fallback, and the reference of the tests.
constexpr solve_result min_memory_least_peak(const chain& c, size_type budget,
                                             const solve_options& options) {
  if (budget < 0) throw_solver_error("the budget must be >= 0");
  const model md = make_model(c, 1);
  if (!std::is_constant_evaluated()) {
    const dp_cost cost = least_peak_cost(md.L);
    check_dp_seconds(name(solver::min_memory), c, exact_units, cost.seconds, cost.bytes, options,
                     "the least-memory DP");
  }
  const least_peak_table t = least_peak_dp(md);
  const std::size_t top = interval_index(md.L, 0, md.L);

  solve_result out;
  out.budget = budget;
  out.min_feasible_budget =
      t.need[top] == unreachable ? solve_result::no_budget : md.x[0] + t.need[top];
  if (out.min_feasible_budget == solve_result::no_budget || budget < out.min_feasible_budget)
    return out;
  std::vector<op> ops =
      persistent_ops(md, 0, md.L, 0, [&](std::int32_t i, std::int32_t l, size_type) {
        return t.choice[interval_index(md.L, i, l)];
      });
  solve_result r = finish(c, solver::min_memory, budget, std::move(ops), t.time[top]);
  r.min_feasible_budget = out.min_feasible_budget;
  return r;
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
  const dp_cost least_peak = least_peak_cost(L);
  out.seconds = spent + least_peak.seconds;
  out.bytes = least_peak.bytes;
  out.exact = false;
  out.within_limits = !(least_peak.seconds > options.max_estimated_seconds);
  return out;
}

}  // namespace detail

/// The persistent schedule of least peak memory (the fastest one at that peak, where the exact
/// solve there is within the limits), when that peak fits `budget`.
template <chain_like C>
constexpr solve_result solve_min_memory(const C& chain_in, size_type budget,
                                        const solve_options& options = {}) {
  const chain c = to_chain(chain_in);
  if (budget < 0) detail::throw_solver_error("the budget must be >= 0");
  detail::check_in_flight(options);
  if (options.in_flight > 1) return detail::solve_min_memory_in_flight(c, budget, options);
  solve_options exact = options;
  exact.slots = exact_units;
  solve_result r;
  try {
    // The least budget first (no DP over memory below it), then the exact optimum there.
    const size_type least = detail::solve_dp(c, 0, exact, solver::min_memory).min_feasible_budget;
    if (least == solve_result::no_budget || budget < least) {
      r.budget = budget;
      r.min_feasible_budget = least;
      return r;
    }
    r = detail::solve_dp(c, least, exact, solver::min_memory);
  } catch (const solver_error&) {
    return detail::min_memory_least_peak(c, budget, options);  // past the limits
  }
  r.budget = budget;
  return r;
}

namespace detail {
// `solver::min_memory`'s row: its solve and its estimate.
template <>
struct solver_entry<solver::min_memory> : entry<&solve_min_memory<chain>, &estimate_min_memory> {};
}  // namespace detail

}  // namespace remat
