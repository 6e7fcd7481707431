// What the dense DP's kernel works on, per tile of intervals: the tiles' side, a cell's state and
// working arrays, a split point's summary, the columns' windows, and a thread's scratch.
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/dp/branches.hpp>
#include <remat/detail/dp/engines/dense_table.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace remat::detail::dense {

// The side of the square tiles of cells the DP computes together (see `dp::tile`). A tile of side
// T reads each row and column of the table it needs once for T cells; its working arrays take
// T^2 (M + 1) doubles. 24 to 32 is best on long chains (the tables leave the caches); short
// chains want at least 13 tiles a side, or the last diagonals (one or two tiles, the costliest)
// leave a thread idle (bench_engines, `dense_threads/*`). No larger than
// the chain, and small enough that the working arrays stay within 64 MiB a thread.
inline std::int32_t tile_side(std::int32_t L, size_type M) noexcept {
  std::int32_t side = std::min({M < 768 ? 24 : 32, (L + 13) / 13, L + 1});
  side = std::max(side, std::min(8, L + 1));
  const double per_cell = (static_cast<double>(M) + 1) * sizeof(double);
  while (side > 2 && static_cast<double>(side) * side * per_cell > 67108864.0) --side;
  return side;
}

// What a cell needs to know of its checkpoint branch at j.
struct branch {
  size_type from = 0;  // the least m where it is finite (`unreachable`: nowhere up to M)
  size_type r_lo = 0;  // OPT(j, l, m - x_j) is stored from m = r_lo on ...
  size_type r_st = 0;  // ... and is S(j, l) from m = r_st on
  size_type l_lo = 0;  // the same for OPT(i, j-1, m)
  size_type l_st = 0;
  std::size_t first_block = 0;  // the cell's first block (index from its own first) it reaches
  const double* r = nullptr;
  const double* lf = nullptr;
  // Samples bounding the branch from below in each block from first_block on: OPT(j, l, .) at
  // the end of the block holding m1 - x_j, and OPT(i, j-1, .) at the end of the block itself.
  std::ptrdiff_t r_sample = 0;  // indices into dense_table::sample, for block 0 of the cell
  std::ptrdiff_t l_sample = 0;
  double r_const = 0;  // S(j, l)
  double l_const = 0;  // S(i, j-1)
  double acc = 0;      // fw[i] + ... + fw[j-1], summed left to right
};

// A cell of the tile being computed, and its working arrays.
struct cell_state {
  std::int32_t i = 0;
  std::int32_t l = 0;
  std::size_t c = 0;  // interval index
  size_type a = 0;    // values are stored for m in [a, b] (none when b < a)
  size_type b = 0;
  bool active = false;  // some value to compute (not a base case, b >= a)
  // Split points run only below these m (the window has the rest, `dp::window_from`): `end_low`
  // for those in the tile's rows, `end_high` for the shared ones and those past the tile's rows.
  size_type end_low = 0;
  size_type end_high = 0;
  std::size_t blocks = 0;        // blocks of m from a / block to b / block
  double* best = nullptr;        // [m - a]: the least branch value so far
  double* block_best = nullptr;  // [block]: best at the block's first m
};

// Per column l, the window of its split points (see `dp::window_from`): for every m in [0, last_m],
// the least H(j, m) = P(j) + OPT(j, l, m - x_j) over the split points j added so far (the j > i
// of the row i being computed), and the least j that reaches it.
struct columns {
  std::size_t stride = 0;  // last_m + 1
  std::vector<double> least;
  std::vector<std::int64_t> arg;

  columns() = default;
  columns(std::int32_t L, size_type last_m)
      : stride(static_cast<std::size_t>(last_m + 1)),
        least((static_cast<std::size_t>(L) + 1) * stride, infinite_time),
        arg((static_cast<std::size_t>(L) + 1) * stride) {}
  static double bytes(std::int32_t L, size_type last_m) noexcept {
    return (static_cast<double>(L) + 1) * (static_cast<double>(last_m) + 1) *
           (sizeof(double) + sizeof(std::int64_t));
  }
};

struct scratch {
  std::vector<double> best;        // the tile's cells' `best`, one after the other
  std::vector<double> block_best;  // and their `block_best`
  std::vector<cell_state> cells;
  std::vector<double> acc;  // [row][j - ext_lo]: fw[i] + ... + fw[j-1]
};

// best[k] = min(best[k], checkpoint_value(acc, r[k], lf[k])) for k in [0, n); r (lf) is the
// constant rc (lc) when RightConst (LeftConst) and is not read then.
template <bool RightConst, bool LeftConst>
[[gnu::always_inline]] inline void relax(double* __restrict best, const double* __restrict r,
                                         double rc, const double* __restrict lf, double lc,
                                         double acc, std::size_t n) noexcept {
  for (std::size_t k = 0; k < n; ++k) {
    const double rv = RightConst ? rc : r[k];
    const double lv = LeftConst ? lc : lf[k];
    const double v = checkpoint_value(acc, rv, lv);
    best[k] = v < best[k] ? v : best[k];
  }
}

// What a branch reads of an interval, in one place (one cache line instead of five).
struct interval_info {
  size_type need = 0;
  size_type store = 0;
  double S = 0;
  std::size_t offset = 0;
  std::size_t sample_offset = 0;
};

// The working arrays of one thread.
// A thread's working arrays for tiles of side `tile`: best and block_best for a full tile at the
// largest range of m, the shared phase's sums, the cells. `bytes` is computed in doubles (the
// memory guard reads it before anything is allocated, whatever M); the counts are read only once
// the guard has passed.
struct scratch_size {
  std::size_t cells = 0;
  std::size_t best = 0;
  std::size_t block_best = 0;
  std::size_t acc = 0;
  double bytes = 0;

  scratch_size(std::int32_t L, size_type M, std::int32_t tile) noexcept {
    const auto side = static_cast<std::size_t>(tile);
    cells = side * side;
    best = cells * (static_cast<std::size_t>(M) + 1);
    block_best = cells * (static_cast<std::size_t>(M / block) + 1);
    acc = side * (static_cast<std::size_t>(L) + 1);
    const auto n = static_cast<double>(cells);
    bytes = (n * (static_cast<double>(M) + 1) + n * (static_cast<double>(M / block) + 1) +
             static_cast<double>(side) * (static_cast<double>(L) + 1)) *
                sizeof(double) +
            n * sizeof(cell_state);
  }
};

// `best` and `block_best` are reserved for the worst case (what the memory guard counts) and used
// as far as the tiles need: pages never touched cost nothing.
inline scratch make_scratch(std::int32_t L, size_type M, std::int32_t tile) {
  const scratch_size size(L, M, tile);
  scratch s;
  s.best.reserve(size.best);
  s.block_best.reserve(size.block_best);
  s.cells.reserve(size.cells);
  s.acc.resize(size.acc);
  return s;
}

}  // namespace remat::detail::dense
