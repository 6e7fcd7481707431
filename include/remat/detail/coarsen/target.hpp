// How many stages automatic coarsening (solve_options::coarsen = auto_coarsening) leaves: the
// one place that decides, from what the DP solvers estimate before they run (dp/cost.hpp).
//
// The DP solvers refuse a chain whose estimated time passes `max_estimated_seconds` or whose
// table passes `max_table_bytes`. Their own estimate of the main DP needs the least-memory DP of
// the chain (O(L^3)), too slow to evaluate for many candidate lengths, so this one bounds it in
// closed form: every interval stores at most M + 1 values of m and each split point is visited
// once per value, (M + 1) x the least-memory DP's pairs, against their own sum over each
// interval's stored range. The least-memory part is theirs, with the largest merged size bounded
// by the chain's total. The estimate grows with the length, so the longest coarse chain within
// the limits is found by bisection; a chain the bound accepts at full length is not coarsened.
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/dp/cost.hpp>
#include <remat/detail/dp/discretize.hpp>
#include <remat/detail/dp/optimal_fast.hpp>
#include <remat/detail/dp/persistent_dp.hpp>
#include <remat/simulate.hpp>
#include <remat/solver_options.hpp>
#include <remat/solvers/store_all.hpp>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <thread>

namespace remat::detail {

// The solvers that refuse chains too long for them: the DP solvers.
constexpr bool refuses_long_chains(solver s) noexcept {
  return s == solver::optimal || s == solver::checkpoint_only || s == solver::min_memory;
}

struct dp_cost_bound {
  double seconds = 0;
  double bytes = 0;
};

// An upper bound of what `options.solver` estimates for a chain of `K` stages coarsened from
// `c` (K = L: `c` itself) at `budget`. Zero for the solvers that do not refuse long chains.
inline dp_cost_bound dp_cost_for_length(const chain& c, std::int32_t K, size_type budget,
                                        const solve_options& options) {
  const auto L = static_cast<std::int32_t>(c.length());
  dp_cost_bound out;
  if (options.solver == solver::min_memory) {
    out.seconds = need_dp_pairs(K) / exact_need_pairs_per_second;
    out.bytes = need_dp_bytes(K);
    return out;
  }
  if (!refuses_long_chains(options.solver)) return out;
  const dp_branches branches = options.solver == solver::optimal ? dp_branches::tape_and_checkpoint
                                                                 : dp_branches::checkpoint_only;
  double total = 0;
  for (const stage& s : c.stages)
    total += static_cast<double>(s.output_size) + static_cast<double>(s.tape_size) +
             static_cast<double>(s.forward_overhead) + static_cast<double>(s.backward_overhead);
  total += static_cast<double>(c.input_size) + static_cast<double>(c.loss_overhead);
  if (K == L) {
    out.seconds = need_dp_seconds(c, need_dp_runs(c, options.slots));
  } else {
    // A merged size is at most the chain's total (validated below 2^63).
    const double runs =
        options.slots == exact_units
            ? 1
            : 5 + static_cast<double>(std::bit_width(static_cast<std::uint64_t>(total)));
    const double rate =
        2 * total < 4503599627370496.0 ? need_pairs_per_second : exact_need_pairs_per_second;
    out.seconds = runs * need_dp_pairs(K) / rate;
  }
  out.bytes = need_dp_bytes(K);
  // Where storing everything fits, `optimal` returns it without running the main DP.
  if (options.solver == solver::optimal && K == L &&
      replay(c, store_all_ops(L)).peak_memory <= budget)
    return out;
  const discretization d = discretize(budget, options.slots);
  const double values = static_cast<double>(d.budget) + 1;
  const unsigned cores = std::max(1U, std::thread::hardware_concurrency());
  const unsigned threads = std::min(dp_threads(options.threads), cores);
  out.seconds += values * need_dp_pairs(K) / (main_triples_per_second(K, branches) * threads);
  out.bytes = std::max(out.bytes, 8 * values * static_cast<double>(interval_count(K)));
  return out;
}

inline bool within_limits(const dp_cost_bound& cost, const solve_options& options) {
  const auto limit = static_cast<double>(options.max_table_bytes.value_or(default_table_limit()));
  return !(cost.seconds > options.max_estimated_seconds) && !(cost.bytes > limit);
}

// The number of stages to solve `c` on at `budget` with `options.coarsen` = auto_coarsening:
// c.length() when the solver accepts the chain as given, else the most (at least 1) within its
// limits.
inline std::size_t auto_coarse_length(const chain& c, size_type budget,
                                      const solve_options& options) {
  const auto L = static_cast<std::int32_t>(c.length());
  if (within_limits(dp_cost_for_length(c, L, budget, options), options)) return c.length();
  std::int32_t lo = 1, hi = L;  // the answer is in [lo, hi): lo fits (or is 1), hi does not
  while (hi - lo > 1) {
    const std::int32_t mid = lo + (hi - lo) / 2;
    (within_limits(dp_cost_for_length(c, mid, budget, options), options) ? lo : hi) = mid;
  }
  return static_cast<std::size_t>(lo);
}

}  // namespace remat::detail
