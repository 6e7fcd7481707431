// The optimal persistent schedule: the dynamic program of docs/model.md, with the exact check.
//
// OPT(i, l, m) is the least time to produce g_i from the input of stage i (held, not counted in
// m) and the gradient g_{l+1} (held, counted). A cell is either a base case, the tape branch
// (F_all(i), solve (i+1, l), B(i)), or the checkpoint branch at some j (F_ck(i), F_none(i+1 ..
// j-1), solve (j, l) holding a_j, then solve (i, j-1)). Ties go to the tape branch, then to the
// smallest j.
//
// `solve_options::slots` says how exact: by default (`auto_slots`) the exact optimum on the
// chain's own sizes, a schedule being planned once per training run, unless the exact engines'
// estimates pass about 10 s or 2 GiB (detail/dp/tuning.hpp `default_exact_seconds`,
// `default_exact_bytes`); only there the 500-slot schedule with a bound of its distance from the
// exact optimum (on a chain with options, no slower than the same chain's without them);
// `exact_units`, the exact optimum within the limits or a refusal; N, Rotor's DP on N slots
// (sizes rounded up to budget / N: the schedule fits, but can be slower than the exact one).
// detail/dp/dispatch.hpp chooses and runs the engines.
#pragma once

#include <remat/chain.hpp>
#include <remat/concepts.hpp>
#include <remat/detail/dp/cost_policy.hpp>
#include <remat/detail/dp/dispatch.hpp>
#include <remat/detail/dp/in_flight.hpp>
#include <remat/solver_options.hpp>

namespace remat {

/// The fastest persistent schedule for `budget`; see the file comment for `options.slots`.
template <chain_like C>
constexpr solve_result solve_optimal(const C& chain_in, size_type budget,
                                     const solve_options& options = {}) {
  detail::check_in_flight(options);
  if (options.in_flight > 1)
    return detail::solve_in_flight(to_chain(chain_in), budget, options, solver::optimal);
  return detail::solve_dp(to_chain(chain_in), budget, options, solver::optimal);
}

namespace detail {
// `solver::optimal`'s row: its solve and its estimate.
template <>
struct solver_entry<solver::optimal> : entry<&solve_optimal<chain>, &estimate_dp<solver::optimal>> {
};
}  // namespace detail

}  // namespace remat
