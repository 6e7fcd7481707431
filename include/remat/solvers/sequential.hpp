// Sequential: PyTorch's `torch.utils.checkpoint.checkpoint_sequential(functions, segments)`,
// with the segment count tuned to the budget.
//
// With k segments the L stages are cut into runs of floor(L / k) stages, the last run taking
// the rest (k = 1 .. L; PyTorch refuses more segments than stages). In docs/model.md's ops:
//   forward   every run but the last: F_ck at its first stage (its input is kept, as
//             `checkpoint` keeps its argument), F_none at the others (run without grad);
//             the last run: F_all at every stage (run normally, recording its tapes); the loss;
//   backward  B over the last run, last stage first; then for each earlier run, latest first:
//             F_all over the run from its kept input (the recomputation with grad enabled), then B
//             over the run, last stage first.
// Makespan: sum fw + sum bw + loss + sum of fw over the stages of runs 1 .. k-1.
// The solver replays the schedule of every k on the chain's byte sizes and keeps the fastest
// that fits (ties to the lower peak, then to fewer segments); `min_feasible_budget` is the least
// peak over all k. Sizes are used as given (`options.slots` does not apply).
#pragma once

#include <remat/chain.hpp>
#include <remat/concepts.hpp>
#include <remat/detail/solvers/segmented.hpp>
#include <remat/schedule.hpp>
#include <remat/solver_options.hpp>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace remat {
namespace detail {

// The first stage of each run of checkpoint_sequential with `segments` segments.
constexpr std::vector<std::int32_t> sequential_starts(std::int32_t length, std::int32_t segments) {
  const std::int32_t size = length / segments;
  std::vector<std::int32_t> starts;
  starts.reserve(static_cast<std::size_t>(segments));
  for (std::int32_t r = 0; r < segments; ++r) starts.push_back(r * size);
  return starts;
}

constexpr std::vector<op> sequential_ops(std::int32_t length, std::int32_t segments) {
  return segmented_ops(length, sequential_starts(length, segments));
}

}  // namespace detail

/// PyTorch's `checkpoint_sequential` with the segment count that fits `budget` fastest.
template <chain_like C>
constexpr solve_result solve_sequential(const C& chain_in, size_type budget,
                                        const solve_options& options = {}) {
  const chain c = to_chain(chain_in);
  const auto length = static_cast<std::int32_t>(c.length());
  detail::knob_search search(c, budget, solver::sequential, detail::keep_rule::fastest);
  for (std::int32_t segments = 1; segments <= length; ++segments)
    search.offer(detail::sequential_ops(length, segments));
  return detail::keep_in_flight(std::move(search).result(), budget, options);
}

namespace detail {
// `solver::sequential`'s row: its solve (no DP over memory: nothing to estimate).
template <>
struct solver_entry<solver::sequential> : entry<&solve_sequential<chain>> {};
}  // namespace detail

}  // namespace remat
