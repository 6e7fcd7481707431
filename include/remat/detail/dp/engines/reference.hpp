// The dense DP of docs/model.md, written straight: a table over every interval and every memory
// unit, each cell a scan over its branches. O(L^3 M) time, O(L^2 M) table. The constant-evaluation
// path of `optimal` with slots, and the oracle of the dense DP (engines/dense.hpp) and the frontier
// DP (engines/frontier.hpp) in the tests.
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/dp/branches.hpp>
#include <remat/detail/dp/intervals.hpp>
#include <remat/detail/dp/least_memory.hpp>
#include <remat/detail/dp/model.hpp>
#include <remat/detail/dp/read_back.hpp>
#include <remat/schedule.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace remat::detail {

// The DP table: OPT and the choice that achieves it for every interval and every m in 0..M.
struct reference_table {
  std::int32_t L = 0;
  size_type M = 0;
  std::vector<double> value;         // [interval][m]
  std::vector<std::int32_t> choice;  // `tape_choice(p)`: tape branch or base case with option p,
                                     // j > 0: checkpoint at j, -1: none

  constexpr std::size_t at(std::int32_t i, std::int32_t l, size_type m) const noexcept {
    return interval_index(L, i, l) * static_cast<std::size_t>(M + 1) + static_cast<std::size_t>(m);
  }
};

// One cell of the DP. Reads only cells of strictly shorter intervals (any m) and so is correct
// for any loop order that finishes shorter intervals first, whatever the sizes (zeros included).
//
// Two rules on top of docs/model.md, with the interval's `store` and `S` (`interval_bounds`):
// * store: from m = store on, the cell takes the tape branch and its value is S;
// * clamp: below it, the value is max(S, least branch) (the choice stays the least branch).
// In exact arithmetic both change nothing: S is a lower bound of every schedule of the interval,
// and the tape branch reaches it from store on (ties go to the tape branch). The model's sums are
// exact (`model::exact_sums`) except for times near the largest double; there a sum of the same
// times in another order may round below S, and the rules keep every value >= S and
// non-increasing in m bit for bit, which the dense DP (engines/dense_kernel.hpp) needs to prune
// exactly, and which it reproduces.
constexpr void reference_cell(const model& md, reference_table& t, const interval_bounds& bounds,
                              std::int32_t i, std::int32_t l, size_type m, size_type mmin,
                              dp_branches branches = dp_branches::tape_and_checkpoint) {
  const std::size_t c = interval_index(md.L, i, l);
  double best = infinite_time;
  std::int32_t choice = -1;
  if (m >= bounds.store[c]) {
    best = bounds.S[c];
    choice = i == md.L ? 0 : tape_choice(md.fastest[static_cast<std::size_t>(i)]);
  } else if (i == md.L) {
    if (m >= loss_need(md)) {
      best = md.loss_time;
      choice = 0;
    }
  } else if (i == l || m >= mmin) {
    const least_branch least = least_branch_within(
        md, branches, i, l, m,
        [&](std::int32_t a, std::int32_t b, size_type k) { return t.value[t.at(a, b, k)]; });
    best = least.value;
    choice = least.choice;
    if (best < infinite_time) best = std::max(bounds.S[c], best);
  }
  t.value[t.at(i, l, m)] = best;
  t.choice[t.at(i, l, m)] = choice;
}

// The straightforward DP: m outermost, then intervals by increasing length, each cell a scan over
// its branches. O(L^3 M) time, O(L^2 M) table. Kept for constant evaluation and as the oracle of
// the dense DP.
constexpr reference_table reference_dp(const model& md, size_type M,
                                       dp_branches branches = dp_branches::tape_and_checkpoint) {
  reference_table t;
  t.L = md.L;
  t.M = M;
  const std::size_t cells = interval_count(md.L) * static_cast<std::size_t>(M + 1);
  t.value.assign(cells, infinite_time);
  t.choice.assign(cells, -1);
  const interval_bounds bounds = make_interval_bounds(md, persistent_need(md, branches), branches);
  std::vector<size_type> mmin(interval_count(md.L), 0);
  for (std::int32_t i = 0; i < md.L; ++i)
    for (std::int32_t l = i + 1; l <= md.L; ++l)
      mmin[interval_index(md.L, i, l)] = necessary_memory(md, i, l);
  for (size_type m = 0; m <= M; ++m)
    for (std::int32_t d = 0; d <= md.L; ++d)
      for (std::int32_t i = 0; i + d <= md.L; ++i)
        reference_cell(md, t, bounds, i, i + d, m, mmin[interval_index(md.L, i, i + d)], branches);
  return t;
}

// The schedule of cell (i, l, m) of a table.
constexpr std::vector<op> reference_ops(const model& md, const reference_table& t, std::int32_t i,
                                        std::int32_t l, size_type m) {
  return persistent_ops(md, i, l, m, [&](std::int32_t ci, std::int32_t cl, size_type cm) {
    return t.choice[t.at(ci, cl, cm)];
  });
}

}  // namespace remat::detail
