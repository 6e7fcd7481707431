// Checkpoint-only: docs/model.md's dynamic program without the tape branch, the best classical-AD
// checkpointing schedule for heterogeneous stages (on a homogeneous chain it is Revolve's binomial
// schedule).
//
// A schedule only stores activations (F_ck, F_none); a stage records its tape only right before
// its backward, as the base case F_all(i), B(i), and the loss reads a_L. So every stage is
// forwarded at least twice. It runs `optimal`'s dispatch (detail/dp/dispatch.hpp) on the other
// branch set: the same tie-breaks, `slots`, limits and exact checks; the table stops at the peak
// of the checkpoint-all schedule (every activation kept, each stage recomputed once), above which
// the time no longer decreases.
#pragma once

#include <remat/chain.hpp>
#include <remat/concepts.hpp>
#include <remat/detail/dp/cost_policy.hpp>
#include <remat/detail/dp/dispatch.hpp>
#include <remat/detail/dp/in_flight.hpp>
#include <remat/solver_options.hpp>

namespace remat {

/// The fastest checkpoint-only persistent schedule for `budget`; see `solve_optimal` for
/// `options.slots`.
template <chain_like C>
constexpr solve_result solve_checkpoint_only(const C& chain_in, size_type budget,
                                             const solve_options& options = {}) {
  detail::check_in_flight(options);
  if (options.in_flight > 1)
    return detail::solve_in_flight(to_chain(chain_in), budget, options, solver::checkpoint_only);
  return detail::solve_dp(to_chain(chain_in), budget, options, solver::checkpoint_only);
}

namespace detail {
// `solver::checkpoint_only`'s row: its solve and its estimate.
template <>
struct solver_entry<solver::checkpoint_only>
    : entry<&solve_checkpoint_only<chain>, &estimate_dp<solver::checkpoint_only>> {};
}  // namespace detail

}  // namespace remat
