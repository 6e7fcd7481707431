// The dense DP of docs/model.md at run time: a table over every interval and every memory unit up
// to M, with the same values and the same schedules as the reference (engines/reference.hpp,
// bit for bit), in a fraction of its time and memory. Rotor's DP with slots, and the lower
// bounds of the search (engines/search_bounds.hpp), run on it.
//
// * Exact sums. The model's times are whole multiples of a power of two small enough that every
//   sum the DP forms is exact in a double (`quantize_times`, `model::exact_sums`), so the DP may
//   group additions as it likes and still match the reference bit for bit.
// * Compact table. Interval (i, l) stores OPT only for m in [need, min(store - 1, M)]: below need
//   it is infinite, from store on it is S (the rules of `reference_cell`). Values are doubles:
//   exact integers of the time quantum up to 2^53 of them. No choices are stored: the schedule's
//   cells recompute theirs with the reference's expressions and tie-breaking
//   (`dense_table::choice_at`).
// * The window (`dp::window_from`). Each column l keeps, for every m, the least over the split
//   points j > i of H(j, m) = P(j) + OPT(j, l, m - x_j) (P: prefix sums of 2 fw + bw), one O(M)
//   update per cell. Minus P(i) it bounds every checkpoint branch of (i, l) from below, and it is
//   their exact least where the j reaching it has its left part at S. That holds from some m up
//   in most cells: split points run only below it.
// * Vectorized over m. The checkpoint branch at j is, over a run of m, (acc + R[m - x_j]) + Lf[m]
//   with R and Lf contiguous (or constant where they reach S): a loop the compiler vectorizes.
// * Exact pruning. Every value is >= S and non-increasing in m. m is cut into blocks of 32
//   (`dense::block`), and every interval keeps a sample per block: its value at the block's last
//   m, the least in the block. For branch j and a block of the cell, (acc + sample of R) +
//   (sample of Lf) is a lower bound of the branch over the block; where it is not below the best
//   so far at the block's first m (the largest in the block), the block is skipped. Branches of
//   small forward cost run first, and the others then mostly fall under the bar. The best so
//   far is kept non-increasing in m (`settle`), which makes the block's first m its largest.
//   The block tests run 4 blocks to an instruction (AVX2) or one by one, as bit masks.
// * Tiles. Cells go by square tiles of T x T (`dense::tile_side`). The split points a tile's
//   cells share (between its rows and its columns) run first, j outermost: per j, T rows and T
//   columns of the table serve T^2 cells while they are in cache. Then each cell takes its
//   tape branch and its other split points.
// * Threads take tiles from a counter, by diagonals, each waiting for the two tiles it reads
//   last. Every cell computes the same function of the same inputs whatever the order, so the
//   result depends neither on the thread count nor on T.
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/dp/engines/dense_kernel.hpp>
#include <remat/detail/dp/engines/dense_table.hpp>
#include <remat/detail/dp/engines/dense_tile.hpp>
#include <remat/detail/dp/intervals.hpp>
#include <remat/detail/dp/model.hpp>
#include <remat/detail/dp/platform.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

namespace remat::detail {

// Every byte `dense_dp` allocates beyond the bounds and the layout: values, samples, the
// intervals' summary, and per thread its scratch.
inline double dense_table_bytes(const dense_layout& layout, std::int32_t L, size_type M,
                                unsigned threads) {
  const double per_thread = dense::scratch_size(L, M, dense::tile_side(L, M)).bytes;
  return static_cast<double>(layout.entries + layout.samples) * sizeof(double) +
         static_cast<double>(layout.offset.size()) * sizeof(dense::interval_info) +
         dense::columns::bytes(L, layout.last_m) + static_cast<double>(threads) * per_thread;
}

// The dense DP over m in [0, M] for every interval, with `threads` threads (>= 1), in tiles of
// side `side`. `bounds` must be
// `make_interval_bounds(md, persistent_need(md, branches), branches)` and `layout` its
// `make_dense_layout`.
//
// The cells go by square tiles (`dense::tile_side`), tile (p, q) holding rows [pT, pT + T - 1]
// and columns [qT, qT + T - 1]; tile (p, q) reads the tiles (p', q) for p < p' <= q and (p, q')
// for p <= q' < q, so tiles go by diagonals q - p. Threads take tiles in that order from a
// counter, each waiting for the two tiles it reads last ((p + 1, q) and (p, q - 1), which waited
// for theirs). Every cell computes the same function of the same inputs whatever the order, so
// the result does not depend on the thread count.
inline dense_table dense_dp_tiled(const model& md, interval_bounds bounds, dense_layout layout,
                                  size_type M, dp_branches branches, unsigned threads,
                                  std::int32_t side) {
  dense_table t;
  t.L = md.L;
  t.M = M;
  t.branches = branches;
  t.bounds = std::move(bounds);
  t.offset = std::move(layout.offset);
  t.last_m = layout.last_m;
  t.value.resize(layout.entries);
  t.sample_offset = std::move(layout.sample_offset);
  t.sample.resize(layout.samples);
  const std::int32_t L = md.L;
  const std::int32_t n = L / side + 1;  // tiles per side, over the indices 0 .. L
  std::vector<std::pair<std::int32_t, std::int32_t>> order;
  order.reserve(static_cast<std::size_t>(n) * static_cast<std::size_t>(n + 1) / 2);
  for (std::int32_t d = 0; d < n; ++d)
    for (std::int32_t p = 0; p + d < n; ++p) order.emplace_back(p, p + d);
  dense::columns cols = md.exact_sums ? dense::columns(L, t.last_m) : dense::columns();
  const dense::dp dp(md, t, &cols);
  auto compute = [&](std::pair<std::int32_t, std::int32_t> pq, dense::scratch& s) {
    const auto [p, q] = pq;
    dp.tile(p * side, std::min(L, p * side + side - 1), q * side, std::min(L, q * side + side - 1),
            s);
  };
  const unsigned workers = std::clamp(threads, 1U, static_cast<unsigned>(n));
  if (workers == 1) {
    dense::scratch s = dense::make_scratch(L, M, side);
    for (const auto& pq : order) compute(pq, s);
    return t;
  }
  // done[p * n + q]: tile (p, q) is written.
  std::vector<std::atomic<bool>> done(static_cast<std::size_t>(n) * static_cast<std::size_t>(n));
  for (auto& d : done) d.store(false, std::memory_order_relaxed);
  auto done_at = [&](std::int32_t p, std::int32_t q) -> std::atomic<bool>& {
    return done[static_cast<std::size_t>(p) * static_cast<std::size_t>(n) +
                static_cast<std::size_t>(q)];
  };
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    dense::scratch s = dense::make_scratch(L, M, side);
    for (std::size_t k = next.fetch_add(1); k < order.size(); k = next.fetch_add(1)) {
      const auto [p, q] = order[k];
      auto wait = [&](std::int32_t wp, std::int32_t wq) {
        while (!done_at(wp, wq).load(std::memory_order_acquire)) std::this_thread::yield();
      };
      if (p + 1 <= q) wait(p + 1, q);
      if (q - 1 >= p) wait(p, q - 1);
      compute(order[k], s);
      done_at(p, q).store(true, std::memory_order_release);
    }
  };
  {
    std::vector<std::jthread> pool;
    for (unsigned w = 1; w < workers; ++w) pool.emplace_back(work);
    work();
  }
  return t;
}

// The same in the tiles `dense::tile_side` gives (the result does not depend on them).
inline dense_table dense_dp(const model& md, interval_bounds bounds, dense_layout layout,
                            size_type M, dp_branches branches, unsigned threads) {
  const std::int32_t side = dense::tile_side(md.L, M);
  return dense_dp_tiled(md, std::move(bounds), std::move(layout), M, branches, threads, side);
}

}  // namespace remat::detail
