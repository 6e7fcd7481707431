// The dense DP's table: OPT(i, l, m) for every interval over its stored range of m (from its
// need to its store; below it is infinite, from store on it is S), with a sample per block of m
// for the pruning bounds, and the choice of any cell recomputed on demand.
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/dp/branches.hpp>
#include <remat/detail/dp/intervals.hpp>
#include <remat/detail/dp/model.hpp>
#include <remat/detail/dp/platform.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace remat::detail {

namespace dense {
// Values are summarized by blocks of m: block s is [s * block, s * block + block - 1].
inline constexpr size_type block = 32;
// How many shared split points a cell takes in a row (see `dp::shared_splits`).
inline constexpr std::int32_t split_group = 4;
}  // namespace dense

// OPT over the stored ranges; `get` reads any (i, l, m) with m <= M.
struct dense_table {
  std::int32_t L = 0;
  size_type M = 0;
  dp_branches branches = dp_branches::tape_and_checkpoint;
  interval_bounds bounds;
  std::vector<std::size_t> offset;  // [interval]: where its values start
  table_vector value;
  // The largest m any interval stores (-1: none). No cell computes a value above it, so the
  // samples and the windows stop there (with a few stages and very many slots it is far below M).
  size_type last_m = -1;
  // Per interval, for every block s from need / block to last_m / block: OPT at the block's last
  // m (or at M): the least value of the block, for the pruning bounds.
  std::vector<std::size_t> sample_offset;  // [interval]
  table_vector sample;

  // The last stored m of interval c (below `bounds.need[c]` when none is stored).
  size_type top(std::size_t c) const noexcept { return stored_top(bounds, c, M); }

  double get(std::size_t c, size_type m) const noexcept {
    if (m < bounds.need[c]) return infinite_time;
    if (m >= bounds.store[c]) return bounds.S[c];
    return value[offset[c] + static_cast<std::size_t>(m - bounds.need[c])];
  }

  double get(std::int32_t i, std::int32_t l, size_type m) const noexcept {
    return get(interval_index(L, i, l), m);
  }

  // The choice `reference_cell` records for (i, l, m): the same expressions, in the same order,
  // over the same values; the first branch that reaches the least value.
  std::int32_t choice_at(const model& md, std::int32_t i, std::int32_t l, size_type m) const {
    const std::size_t c = interval_index(L, i, l);
    if (m < bounds.need[c]) return -1;
    if (i == md.L) return 0;
    if (m >= bounds.store[c]) return tape_choice(md.fastest[static_cast<std::size_t>(i)]);
    return least_branch_within(
               md, branches, i, l, m,
               [&](std::int32_t a, std::int32_t b, size_type k) { return get(a, b, k); })
        .choice;
  }
};

// Where each interval's values and samples start, and how many there are in all.
struct dense_layout {
  std::vector<std::size_t> offset;
  std::size_t entries = 0;
  size_type last_m = -1;  // dense_table::last_m
  std::vector<std::size_t> sample_offset;
  std::size_t samples = 0;
};

inline dense_layout make_dense_layout(const interval_bounds& b, std::int32_t L, size_type M) {
  dense_layout out;
  out.offset.assign(interval_count(L), 0);
  out.sample_offset.assign(interval_count(L), 0);
  auto top = [&](std::size_t c) { return stored_top(b, c, M); };
  for (std::size_t c = 0; c < out.offset.size(); ++c)
    if (top(c) >= b.need[c]) out.last_m = std::max(out.last_m, top(c));
  for (std::size_t c = 0; c < out.offset.size(); ++c) {
    out.offset[c] = out.entries;
    out.sample_offset[c] = out.samples;
    // Base cases store values only where a stage's options trade memory for time (else their
    // need is their store).
    if (top(c) >= b.need[c]) out.entries += static_cast<std::size_t>(top(c) - b.need[c]) + 1;
    if (b.need[c] <= out.last_m)
      out.samples +=
          static_cast<std::size_t>(out.last_m / dense::block - b.need[c] / dense::block + 1);
  }
  return out;
}

}  // namespace remat::detail
