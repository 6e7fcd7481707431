// How many blocks automatic coarsening (solve_options::coarsen = auto_coarsening) solves on: the
// one place that decides.
//
// Whether to coarsen at all is the solver's own answer: `solve_coarsened` solves the chain as
// given first, and coarsens only when the solver refuses it (a solver_error: the DP solvers
// estimate their time and table before they run, and refuse past `max_estimated_seconds` or
// `max_table_bytes`). How far is decided here, without running anything: their estimates need
// the least-memory DP of each candidate chain (O(L^3)), so this one bounds them in closed form,
// from the length alone: the least-memory DPs as the solvers count them, with the largest merged
// size bounded by the chain's total; and with slots, the main DP's (interval, m, split) triples
// bounded by (M + 1) x the least-memory DP's pairs (every interval stores at most M + 1 values).
// On exact sizes the main DP's work does not follow from the length alone; the least-memory part
// bounds it from below, and a coarse chain the solver still refuses is coarsened further by
// `solve_coarsened`. The bound grows with the length: the most blocks within the limits are
// found by bisection.
#pragma once

#include <remat/chain.hpp>
#include <remat/coarsen.hpp>
#include <remat/detail/dp/cost.hpp>
#include <remat/detail/dp/discretize.hpp>
#include <remat/detail/dp/frontier_solve.hpp>
#include <remat/detail/dp/intervals.hpp>
#include <remat/detail/dp/platform.hpp>
#include <remat/detail/dp/tuning.hpp>
#include <remat/estimate.hpp>
#include <remat/solver_options.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace remat::detail {

// A bound of what `options.solver` estimates for a chain of `K` stages coarsened from `c` at
// `budget` (see the file comment). Zero for the solvers that do not refuse long chains.
inline dp_cost dp_cost_for_length(const chain& c, std::int32_t K, size_type budget,
                                  const solve_options& options) {
  dp_cost out;
  const solver_info& about = info(options.solver);
  if (about.dp == solver_dp::least_memory) return least_peak_cost(K);
  if (!about.refuses_long_chains()) return out;
  const dp_branches branches = branches_of(options.solver);
  double total = 0;
  for (const stage& s : c.stages)
    total += static_cast<double>(s.output_size) + static_cast<double>(s.tape_size) +
             static_cast<double>(s.forward_overhead) + static_cast<double>(s.backward_overhead);
  total += static_cast<double>(c.input_size) + static_cast<double>(c.loss_overhead);
  // A merged size is at most the chain's total (validated below 2^63). The default runs one
  // least-memory DP on the exact sizes and one on 500 slots, and no search for a least budget
  // with slots.
  const bool by_default = options.slots == auto_slots;
  const double runs = options.slots == exact_units ? 1
                      : by_default                 ? 2
                                   : slots_need_dp_runs(static_cast<std::uint64_t>(total));
  out.seconds = runs * need_dp_pairs(K) / need_pairs_rate(2 * total);
  out.bytes = need_dp_bytes(K);
  if (options.slots == exact_units) return out;
  // The default's fallback, where no exact engine finishes: the 500-slot DP.
  const discretization d = discretize(budget, by_default ? rotor_slots : options.slots);
  const double values = static_cast<double>(d.budget) + 1;
  // The default runs its bound's DP (`auto_bound_slots` memories) after the 500-slot one, and
  // gives its exact attempts no more than the limit leaves.
  const double dense =
      dense_dp_seconds(values * need_dp_pairs(K), K, branches, dp_threads(options.threads));
  out.seconds += by_default ? dense * fallback_dense_factor : dense;
  out.bytes = std::max(out.bytes, 8 * values * static_cast<double>(interval_count(K)));
  return out;
}

// The number of blocks to solve `c` on at `budget` once the solver has refused it as given: the
// most, below its length and at least 1, whose bound passes the limits.
// Forced exact (`exact_units`), `optimal` and `checkpoint-only` run engines whose cost does not
// follow from the length: there each candidate is asked of `remat::estimate_solve_at` at the
// budget (the solve's own plan and a short probe of its frontier DP capped at the budget, on the
// chain cut evenly into that many blocks), not of the whole curve's estimate, which would coarsen
// further than this solve needs. The default solve never refuses where its 500-slot fallback
// fits, which the closed form bounds.
inline std::size_t auto_coarse_length(const chain& c, size_type budget,
                                      const solve_options& options) {
  const bool frontier = options.slots == exact_units && info(options.solver).has_curve();
  const auto L = static_cast<std::int32_t>(c.length());
  auto fits = [&](std::int32_t K) {
    if (!frontier) {
      const dp_cost cost = dp_cost_for_length(c, K, budget, options);
      return fits_limits(cost.seconds, cost.bytes, options);
    }
    return estimate_solve_at(merge_blocks(c, even_starts(L, K)).chain, budget, options)
        .within_limits;
  };
  std::int32_t lo = 1, hi = L;  // lo fits (or is 1), hi does not
  while (hi - lo > 1) {
    const std::int32_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return static_cast<std::size_t>(lo);
}

}  // namespace remat::detail
