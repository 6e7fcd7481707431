// Chen-sqrt: the sqrt(n) strategy of Chen, Xu, Zhang and Guestrin, "Training Deep Nets with
// Sublinear Memory Cost" (arXiv 1604.06174, 2016).
//
// With s = floor(sqrt(L)), the inputs of stages 0, s, 2s, ... are stored, which cuts the chain
// into runs of s stages (the last run is what remains after the last multiple of s below L, so it
// has between 1 and s stages). In docs/model.md's ops it is the segmented schedule of
// `detail::segmented_ops`: every run but the last runs forward with F_ck at its first stage and
// F_none at the others; the last run records its tapes (F_all), so, as the paper counts, only the
// stages before the last run are computed twice; in backward each earlier run is recomputed once
// from its stored input with F_all and backpropagated. Chen's analysis places the extra forward
// over the first L - sqrt(L) stages; for L not a perfect square we keep the boundaries at the
// multiples of s and let the last run be the remainder (the judgement call: it is what "store
// every s-th stage input" says).
//
// The strategy has no knob: the schedule is fixed, feasible when its peak on the chain's byte
// sizes fits the budget, and that peak is `min_feasible_budget`. `options.slots` does not apply.
#pragma once

#include <remat/chain.hpp>
#include <remat/concepts.hpp>
#include <remat/detail/solvers/segmented.hpp>
#include <remat/schedule.hpp>
#include <remat/solver_options.hpp>

#include <cstdint>
#include <utility>
#include <vector>

namespace remat {
namespace detail {

constexpr std::int32_t floor_sqrt(std::int32_t n) noexcept {
  std::int64_t r = 0;
  while ((r + 1) * (r + 1) <= n) ++r;
  return static_cast<std::int32_t>(r);
}

// The first stage of each run: 0, s, 2s, ... below `length`, s = floor(sqrt(length)).
constexpr std::vector<std::int32_t> chen_sqrt_starts(std::int32_t length) {
  const std::int32_t s = floor_sqrt(length);
  std::vector<std::int32_t> starts;
  for (std::int32_t k = 0; k < length; k += s) starts.push_back(k);
  return starts;
}

constexpr std::vector<op> chen_sqrt_ops(std::int32_t length) {
  return segmented_ops(length, chen_sqrt_starts(length));
}

}  // namespace detail

/// Chen's sqrt(n) schedule, when its peak fits `budget`.
template <chain_like C>
constexpr solve_result solve_chen_sqrt(const C& chain_in, size_type budget,
                                       const solve_options& options = {}) {
  const chain c = to_chain(chain_in);
  detail::knob_search search(c, budget, solver::chen_sqrt, detail::keep_rule::fastest);
  search.offer(detail::chen_sqrt_ops(static_cast<std::int32_t>(c.length())));
  return detail::keep_in_flight(std::move(search).result(), budget, options);
}

namespace detail {
// `solver::chen_sqrt`'s row: its solve (no DP over memory: nothing to estimate).
template <>
struct solver_entry<solver::chen_sqrt> : entry<&solve_chen_sqrt<chain>> {};
}  // namespace detail

}  // namespace remat
