// Checkpoint-only: MODEL.md's dynamic program without the tape branch, the best classical-AD
// checkpointing schedule for heterogeneous stages (Rotor papers; on a homogeneous chain it is
// Revolve's binomial schedule, see MODEL.md).
//
// A schedule only stores activations (F_ck, F_none); a stage records its tape only right before
// its backward, as the base case F_all(i), B(i), and the loss reads a_L. So every stage is
// forwarded at least twice. It shares the DP of `optimal` (`detail::solve_persistent` with
// `dp_branches::checkpoint_only`): the same tie-breaks, discretization (`options.slots`), table
// limit and exact feasibility checks; `min_feasible_budget` is the DP's least feasible budget for
// the same slots. The table is capped at the peak of the checkpoint-all schedule (every
// activation kept, each stage recomputed once), above which the time no longer decreases.
#pragma once

#include <remat/chain.hpp>
#include <remat/concepts.hpp>
#include <remat/solver_options.hpp>
#include <remat/solvers/optimal.hpp>

namespace remat {

/// The fastest checkpoint-only persistent schedule for `budget`; see `solve_optimal` for
/// `options.slots`.
template <chain_like C>
constexpr solve_result solve_checkpoint_only(const C& chain_in, size_type budget,
                                             const solve_options& options = {}) {
  const chain c = to_chain(chain_in);
  return detail::solve_persistent(c, budget, options, solver::checkpoint_only,
                                  detail::dp_branches::checkpoint_only);
}

}  // namespace remat
