// The run-time DP of MODEL.md: the same values and the same schedules as the reference
// (`optimal_dp_reference`, bit for bit), in a fraction of its time and memory.
//
// * Exact sums. The model's times are whole multiples of a power of two small enough that every
//   sum the DP forms is exact in a double (`quantize_times`, `model::exact_sums`), so the fast DP
//   may group additions as it likes and still match the reference bit for bit.
// * Compact table. Interval (i, l) stores OPT only for m in [need, min(store - 1, M)]: below need
//   it is infinite, from store on it is S (the rules of `optimal_cell`). Values are doubles, as in
//   the reference: exact integers of the time quantum up to 2^53 of them (a float's 2^24 would
//   not hold a 1000-stage chain's times). No choices are stored: the schedule's cells recompute
//   theirs with the reference's expressions and tie-breaking (`fast_table::choice_at`), L cells
//   of O(L) each.
// * The window (`dp::window_from`). Each column l keeps, for every m, the least over the split
//   points j > i of H(j, m) = P(j) + OPT(j, l, m - x_j) (P: prefix sums of 2 fw + bw), one O(M)
//   update per cell. Minus P(i) it bounds every checkpoint branch of (i, l) from below, and it is
//   their exact least where the j reaching it has its left part at S. That holds from some m up
//   in most cells (74% of the (cell, m) pairs at 200 stages): split points run only below it.
// * Vectorized over m. The checkpoint branch at j is, over a run of m, (acc + R[m - x_j]) + Lf[m]
//   with R and Lf contiguous (or constant where they reach S): a loop the compiler vectorizes.
// * Exact pruning. Every value is >= S and non-increasing in m. m is cut into blocks of 32
//   (`fast::block`), and every interval keeps a sample per block: its value at the block's last
//   m, the least in the block. For branch j and a block of the cell, (acc + sample of R) +
//   (sample of Lf) is a lower bound of the branch over the block; where it is not below the best
//   so far at the block's first m (the largest in the block), the block is skipped. Branches of
//   small forward cost run first, and the others then mostly fall under the bar. The best so
//   far is kept non-increasing in m (`dp::settle`), which makes the block's first m its largest.
//   The tests run 4 blocks to an instruction (AVX2) or one by one, as bit masks. Below the
//   window, 14% of all (branch, m) pairs are relaxed at 200 stages, about what the final OPT as
//   the bar would leave (13%); finer blocks (16) or coarser (64) were no faster.
// * Tiles. Cells go by square tiles of T x T (`fast::tile_side`). The split points a tile's
//   cells share (between its rows and its columns) run first, j outermost: per j, T rows and T
//   columns of the table serve T^2 cells while they are in cache. Then each cell takes its
//   tape branch and its other split points. At 1000 stages and 1000 slots (a 3 GB table, read
//   from DRAM) this order took one thread from 57 s to 38 s, and it still pays with the window
//   (500 stages: 1.48 s against 2.33 s cell by cell).
// * Threads take tiles from a counter, by diagonals, each waiting for the two tiles it reads
//   last. Every cell computes the same function of the same inputs whatever the order, so the
//   result depends neither on the thread count nor on T.
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/dp/cost.hpp>
#include <remat/detail/dp/model.hpp>
#include <remat/detail/dp/persistent_dp.hpp>
#include <remat/detail/dp/reference_dp.hpp>
#include <remat/schedule.hpp>
#include <remat/solver_options.hpp>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <new>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif
#if defined(__linux__)
#include <sys/mman.h>
#endif

// On x86 with g++ or clang++, when the build does not already target AVX2, the DP's inner loop
// also gets an AVX2 version, chosen at run time.
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(__AVX2__)
#define REMAT_DETAIL_AVX2_CLONE 1
#else
#define REMAT_DETAIL_AVX2_CLONE 0
#endif
// And the block tests use AVX2 intrinsics there, or where the build targets AVX2.
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__)) && \
    (REMAT_DETAIL_AVX2_CLONE || defined(__AVX2__))
#define REMAT_DETAIL_AVX2_MASK 1
#include <immintrin.h>
#if REMAT_DETAIL_AVX2_CLONE
#define REMAT_DETAIL_AVX2_TARGET [[gnu::target("avx2")]]
#else
#define REMAT_DETAIL_AVX2_TARGET
#endif
#else
#define REMAT_DETAIL_AVX2_MASK 0
#endif

namespace remat::detail {

// The machine's physical memory in bytes, 0 where it cannot be read.
inline std::size_t physical_memory_bytes() noexcept {
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGE_SIZE)
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0)
    return static_cast<std::size_t>(pages) * static_cast<std::size_t>(page);
#endif
  return 0;
}

// The table limit when `solve_options::max_table_bytes` is unset: half the physical memory, which
// leaves room for the rest of the process and the system; 4 GiB where it cannot be read.
inline std::size_t default_table_limit() noexcept {
  const std::size_t physical = physical_memory_bytes();
  return physical == 0 ? std::size_t{4} << 30 : physical / 2;
}

// The allocator of the DP's large arrays. Their elements are left uninitialized (every one is
// written before it is read: a zero fill would be a pass over gigabytes for nothing), and on
// Linux, blocks of 32 MiB to 1 GiB are aligned to 2 MiB with transparent huge pages requested
// (a hint, ignored where unavailable): the DP reads them at scattered places, where 4 KiB pages
// cost a TLB miss at most reads (200 stages at 500 slots, a 59 MB table: 155 ms instead of
// 181 ms). Above 1 GiB the kernel's compaction at fault time can cost more than it saves
// (measured: 1000 stages at 1000 slots, 3 GB, two threads: 7 to 9 s of system time against 2 s).
template <class T>
struct table_allocator {
  using value_type = T;
  static constexpr std::size_t huge_page = std::size_t{2} << 20;
  static constexpr std::size_t huge_from = std::size_t{32} << 20;
  static constexpr std::size_t huge_to = std::size_t{1} << 30;

  static bool huge(std::size_t bytes) noexcept {
#if defined(__linux__)
    return bytes >= huge_from && bytes <= huge_to;
#else
    (void)bytes;
    return false;
#endif
  }

  table_allocator() = default;
  template <class U>
  explicit table_allocator(const table_allocator<U>&) noexcept {}

  static std::size_t alignment(std::size_t bytes) noexcept {
    return huge(bytes) ? huge_page : std::max(alignof(T), alignof(std::max_align_t));
  }
  T* allocate(std::size_t n) {
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_array_new_length();
    const std::size_t bytes = n * sizeof(T);
    void* p = ::operator new (bytes, std::align_val_t{alignment(bytes)});
#if defined(__linux__)
    if (huge(bytes)) (void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    ::operator delete (p, std::align_val_t{alignment(n * sizeof(T))});
  }
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  friend bool operator==(const table_allocator&, const table_allocator&) noexcept {
    return true;
  }
};

using table_vector = std::vector<double, table_allocator<double>>;

namespace fast {
// Values are summarized by blocks of m: block s is [s * block, s * block + block - 1].
inline constexpr size_type block = 32;
// How many shared split points a cell takes in a row (see `dp::shared_splits`).
inline constexpr std::int32_t split_group = 4;
}  // namespace fast

// OPT over the stored ranges; `get` reads any (i, l, m) with m <= M.
struct fast_table {
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

  // The choice `optimal_cell` records for (i, l, m): the same expressions, in the same order,
  // over the same values; the first branch that reaches the least value.
  std::int32_t choice_at(const model& md, std::int32_t i, std::int32_t l, size_type m) const {
    auto at = [](std::int32_t k) { return static_cast<std::size_t>(k); };
    const std::size_t c = interval_index(L, i, l);
    if (m < bounds.need[c]) return -1;
    if (i == l || m >= bounds.store[c]) return 0;
    double best = infinite_time;
    std::int32_t choice = -1;
    const size_type tape_ops = tape_ops_memory(md, i, l);
    if (branches == dp_branches::tape_and_checkpoint && m >= tape_ops && m >= md.xb[at(i + 1)]) {
      const double rest = get(i + 1, l, m - md.xb[at(i + 1)]);
      if (rest < infinite_time) {
        best = md.fw[at(i)] + md.bw[at(i)] + rest;
        choice = 0;
      }
    }
    double forward = 0;
    size_type forwards = 0;  // checkpoint_forward_table's forwards(i, j)
    for (std::int32_t j = i + 1; j <= l; ++j) {
      forward += md.fw[at(j - 1)];
      forwards = j == i + 1 ? md.x[at(i + 1)] + md.ft[at(i)]
                            : std::max(forwards, md.x[at(j - 1)] + md.x[at(j)] + md.ft[at(j - 1)]);
      if (m < md.x[at(l + 1)] + forwards) break;
      if (m < md.x[at(j)]) continue;
      const double v = forward + get(j, l, m - md.x[at(j)]) + get(i, j - 1, m);
      if (v < best) {
        best = v;
        choice = j;
      }
    }
    return choice;
  }
};

// Where each interval's values and samples start, and how many there are in all.
struct fast_layout {
  std::vector<std::size_t> offset;
  std::size_t entries = 0;
  size_type last_m = -1;  // fast_table::last_m
  std::vector<std::size_t> sample_offset;
  std::size_t samples = 0;
};

inline fast_layout make_fast_layout(const interval_bounds& b, std::int32_t L, size_type M) {
  fast_layout out;
  out.offset.assign(interval_count(L), 0);
  out.sample_offset.assign(interval_count(L), 0);
  auto top = [&](std::size_t c) { return stored_top(b, c, M); };
  for (std::size_t c = 0; c < out.offset.size(); ++c)
    if (top(c) >= b.need[c]) out.last_m = std::max(out.last_m, top(c));
  for (std::size_t c = 0; c < out.offset.size(); ++c) {
    out.offset[c] = out.entries;
    out.sample_offset[c] = out.samples;
    // Base cases store no value: their need is their store.
    if (top(c) >= b.need[c]) out.entries += static_cast<std::size_t>(top(c) - b.need[c]) + 1;
    if (b.need[c] <= out.last_m)
      out.samples +=
          static_cast<std::size_t>(out.last_m / fast::block - b.need[c] / fast::block + 1);
  }
  return out;
}

namespace fast {

// The side of the square tiles of cells the DP computes together (see `dp::tile`). A tile of side
// T reads each row and column of the table it needs once for T cells; its working arrays take
// T^2 (M + 1) doubles. Measured on the development machine (1 MiB of L2 per core, 32 MiB of L3
// shared), two threads: 24 to 32 is best at 500 stages (500 slots: 750 ms with 24 or 32, 785
// with 16, 849 with 12), 32 at 1000 stages and 1000 slots (7.26 s; 7.48 with 24, 7.60 with 48,
// 8.11 with 16). Short chains want at least 13 tiles a side, or the last diagonals (one or two
// tiles, the costliest) leave a thread idle: 200 stages at 500 slots took 60 ms with 16, 66 with
// 24, 73 with 32. No larger than the chain, and small enough that the working arrays stay
// within 64 MiB a thread (beyond about 8000 slots).
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
  std::ptrdiff_t r_sample = 0;  // indices into fast_table::sample, for block 0 of the cell
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

// best[k] = min(best[k], (acc + r[k]) + lf[k]) for k in [0, n); r (lf) is the constant rc (lc)
// when RightConst (LeftConst) and is not read then.
template <bool RightConst, bool LeftConst>
[[gnu::always_inline]] inline void relax(double* __restrict best, const double* __restrict r,
                                         double rc, const double* __restrict lf, double lc,
                                         double acc, std::size_t n) noexcept {
  for (std::size_t k = 0; k < n; ++k) {
    const double rv = RightConst ? rc : r[k];
    const double lv = LeftConst ? lc : lf[k];
    const double v = (acc + rv) + lv;
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

class dp {
 public:
  // `cols` (may be null: no window) must be `columns(L, t.last_m)`, fresh, and used by this DP
  // only.
  dp(const model& md, fast_table& t, columns* cols)
      : md_(md),
        t_(t),
        info_(t.offset.size()),
        forwards_(checkpoint_forward_table(md)),
        cols_(md.exact_sums ? cols : nullptr) {
    for (std::size_t c = 0; c < info_.size(); ++c)
      info_[c] = {t.bounds.need[c], t.bounds.store[c], t.bounds.S[c], t.offset[c],
                  t.sample_offset[c]};
    if (cols_ != nullptr) {
      reach_ = t.bounds.store;
      for (std::int32_t i = 0; i <= md.L; ++i)
        for (std::int32_t k = i + 1; k <= md.L; ++k)
          reach_[interval_index(md.L, i, k)] =
              std::max(reach_[interval_index(md.L, i, k)], reach_[interval_index(md.L, i, k - 1)]);
    }
    prefix_.assign(static_cast<std::size_t>(md.L) + 2, 0);
    for (std::size_t k = 0; k + 1 < prefix_.size(); ++k)
      prefix_[k + 1] = prefix_[k] + (md.fw[k] + md.fw[k] + md.bw[k]);
  }

  // Fills the cells (i, l) with i in [i0, i1], l in [l0, l1], i <= l, and their samples. Every
  // cell they read outside the tile is done: those of the tiles below (same columns, rows above
  // i1) and to the left (same rows, columns below l0).
  //
  // In an off-diagonal tile (i1 < l0) every cell has the split points j in [i1 + 1, l0]
  // ("shared"): OPT(j, l, .) and OPT(i, j-1, .) lie outside the tile. Those go first, j
  // outermost and the cells inside, so that the column (j, l) serves the tile's rows and the row
  // (i, j-1) its columns while they are in cache: per j, 2T vectors read for T^2 cell updates.
  // Then each cell, in dependency order, takes its tape branch and its other split points, whose
  // intervals lie in the tile, and is written.
  void tile(std::int32_t i0, std::int32_t i1, std::int32_t l0, std::int32_t l1, scratch& s) const {
#if REMAT_DETAIL_AVX2_CLONE
    if (avx2_) return tile_avx2(i0, i1, l0, l1, s);
    tile_on<false>(i0, i1, l0, l1, s);
#else
    tile_on<REMAT_DETAIL_AVX2_MASK != 0>(i0, i1, l0, l1, s);
#endif
  }

 private:
#if REMAT_DETAIL_AVX2_CLONE
  // The whole tile compiled for AVX2 (the relaxations 4 doubles wide, the block tests 4 at a
  // time; the same additions, minima and comparisons, so the same bits), chosen once per tile in
  // builds that do not target AVX2 themselves; everything below is inlined into it.
  [[gnu::target("avx2")]] void tile_avx2(std::int32_t i0, std::int32_t i1, std::int32_t l0,
                                         std::int32_t l1, scratch& s) const {
    tile_on<true>(i0, i1, l0, l1, s);
  }
#endif

  template <bool Avx2>
  [[gnu::always_inline]] inline void tile_on(std::int32_t i0, std::int32_t i1, std::int32_t l0,
                                             std::int32_t l1, scratch& s) const {
    // The cells' working arrays, packed by their own ranges of m (at most side^2 (M + 1)).
    s.cells.clear();
    std::size_t values = 0;
    std::size_t blocks = 0;
    for (std::int32_t i = i1; i >= i0; --i)
      for (std::int32_t l = std::max(i, l0); l <= l1; ++l) {
        cell_state cs;
        cs.i = i;
        cs.l = l;
        cs.c = interval_index(md_.L, i, l);
        cs.a = t_.bounds.need[cs.c];
        cs.b = t_.top(cs.c);
        cs.active = i != l && cs.b >= cs.a;
        if (cs.active) {
          cs.blocks = static_cast<std::size_t>(cs.b / block - cs.a / block + 1);
          values += static_cast<std::size_t>(cs.b - cs.a + 1);
          blocks += cs.blocks;
        }
        s.cells.push_back(cs);
      }
    if (s.best.size() < values) s.best.resize(values);
    if (s.block_best.size() < blocks) s.block_best.resize(blocks);
    values = 0;
    blocks = 0;
    for (cell_state& cs : s.cells) {
      if (!cs.active) continue;
      const auto n = static_cast<std::size_t>(cs.b - cs.a + 1);
      cs.best = s.best.data() + values;
      cs.block_best = s.block_best.data() + blocks;
      std::fill(cs.best, cs.best + n, infinite_time);
      values += n;
      blocks += cs.blocks;
    }
    const bool shared = i1 < l0;
    for (cell_state& cs : s.cells) cs.end_low = cs.end_high = cs.b + 1;
    if (cols_ != nullptr && shared) {
      // The window over the split points j >= i1 + 1 (the shared ones and those past the tile's
      // rows), for every cell.
      for (std::int32_t l = l0; l <= l1; ++l) add_split(l, i1 + 1);
      for (cell_state& cs : s.cells)
        if (cs.active) cs.end_high = window_from<Avx2>(cs);
    }
    if (shared) shared_splits<Avx2>(i0, i1, l0, s);
    for (cell_state& cs : s.cells) {
      if (cols_ != nullptr) {
        // The window over every split point of the cell: (i + 1, l) is done. In the bottom row
        // of an off-diagonal tile it is the one above (no split point below the shared ones).
        if (shared && cs.i == i1) {
          cs.end_low = cs.end_high;
        } else {
          if (cs.i < cs.l) add_split(cs.l, cs.i + 1);
          if (cs.active) {
            cs.end_low = window_from<Avx2>(cs);
            cs.end_high = std::min(cs.end_high, cs.end_low);
          }
        }
      }
      if (cs.active) {
        if (shared)
          own_splits<Avx2>(cs, i1, l0, s.acc[shared_acc(i1, l0, cs.i, l0)]);
        else
          own_splits<Avx2>(cs, cs.l, cs.l, 0);
      }
      finish(cs);
    }
  }

  static std::size_t at(std::int32_t k) noexcept {
    return static_cast<std::size_t>(k);
  }

  static size_type block_lo(const cell_state& cs, std::size_t q) noexcept {
    return std::max(cs.a, (cs.a / block + static_cast<size_type>(q)) * block);
  }
  static size_type block_hi(const cell_state& cs, std::size_t q) noexcept {
    return std::min(cs.b, (cs.a / block + static_cast<size_type>(q)) * block + block - 1);
  }

  // Where `shared_splits` keeps fw[i] + ... + fw[j-1] (summed left to right, as every cell
  // does) for row i and split point j in [i1 + 1, l0] of an off-diagonal tile.
  static std::size_t shared_acc(std::int32_t i1, std::int32_t l0, std::int32_t i,
                                std::int32_t j) noexcept {
    return at(i1 - i) * at(l0 - i1) + at(j - i1 - 1);
  }

  // The split points j in [i1 + 1, l0] of every cell of an off-diagonal tile.
  template <bool Avx2>
  [[gnu::always_inline]] inline void shared_splits(std::int32_t i0, std::int32_t i1,
                                                   std::int32_t l0, scratch& s) const {
    const std::int32_t lo = i1 + 1;
    const auto width = static_cast<std::size_t>(l0 - i1);
    for (std::int32_t i = i0; i <= i1; ++i) {
      double* acc = s.acc.data() + shared_acc(i1, l0, i, lo);
      double forward = 0;
      for (std::int32_t k = i; k < lo; ++k) forward += md_.fw[at(k)];
      acc[0] = forward;
      for (std::size_t e = 1; e < width; ++e) acc[e] = forward += md_.fw[at(lo) + e - 1];
    }
    for (cell_state& cs : s.cells)
      if (cs.active) std::fill(cs.block_best, cs.block_best + cs.blocks, infinite_time);
    branch br;
    // Every (branch, block) whose bound is below the block's best, j ascending: the branches of
    // least forward cost first. (Running first, in each block, the branch of least bound there
    // cost more than it saved: 20% more time at 200 and 500 stages.) The split points go by
    // groups of `split_group`, each cell taking the whole group in turn, so that its best stays
    // in L1 for that many branches (5 to 10% faster than one split point at a time at 200 and
    // 500 stages; the order of each cell's branches, hence every bit, is unchanged).
    for (std::int32_t j0 = lo; j0 <= l0; j0 += split_group)
      for (cell_state& cs : s.cells) {
        if (!cs.active || cs.end_high <= cs.a) continue;
        for (std::int32_t j = j0; j <= std::min(l0, j0 + split_group - 1); ++j) {
          prepare(cs, j, s.acc[shared_acc(i1, l0, cs.i, j)], br);
          if (br.from == unreachable) continue;
          prune_and_run<Avx2>(cs, br, cs.end_high);
        }
      }
  }

  // The branch over the blocks of the cell below m = end where its lower bound is below the best
  // at the block's first m (the largest in the block); consecutive blocks run as one.
  template <bool Avx2>
  [[gnu::always_inline]] inline void prune_and_run(cell_state& cs, const branch& br,
                                                   size_type end) const {
    if (end <= std::max(br.from, cs.a)) return;
    const auto blocks = static_cast<std::size_t>((end - 1) / block - cs.a / block + 1);
    const double* sample = t_.sample.data();
    const double* bb = cs.block_best;
    auto wanted = [&](std::size_t q) {
      const auto sq = static_cast<std::ptrdiff_t>(q);
      return (br.acc + sample[br.r_sample + sq]) + sample[br.l_sample + sq] < bb[q];
    };
    // 64 blocks at a time: their tests as bits, without branches; then the runs of set bits.
    // A run lowers best, so a later bit may be stale: it only costs a run that could have
    // been skipped, and the first block of each run is tested again.
    for (std::size_t q0 = br.first_block; q0 < blocks; q0 += 64) {
      const std::size_t n = std::min<std::size_t>(64, blocks - q0);
      const auto sq0 = static_cast<std::ptrdiff_t>(q0);
      std::uint64_t bits = below_mask<Avx2>(sample + br.r_sample + sq0, sample + br.l_sample + sq0,
                                            bb + q0, br.acc, n);
      while (bits != 0) {
        const int lo = std::countr_zero(bits);
        const std::size_t q = q0 + static_cast<std::size_t>(lo);
        if (!wanted(q)) {
          bits &= bits - 1;
          continue;
        }
        const int len = std::countr_one(bits >> lo);
        bits = lo + len >= 64 ? 0 : bits & (~std::uint64_t{0} << (lo + len));
        const size_type hi = std::min(block_hi(cs, q + static_cast<std::size_t>(len) - 1), end - 1);
        run_parts(br, cs.a, std::max(block_lo(cs, q), br.from), hi, cs.best);
        settle(cs, q, hi);
      }
    }
  }

  // Bit k (k < n <= 64) set when (acc + r[k]) + lf[k] < bar[k]: with AVX2, 4 at a time up to
  // the last whole 4, the rest one by one.
  template <bool Avx2>
  [[gnu::always_inline]] static inline std::uint64_t below_mask(const double* r, const double* lf,
                                                                const double* bar, double acc,
                                                                std::size_t n) noexcept {
    std::uint64_t bits = 0;
    std::size_t k = 0;
#if REMAT_DETAIL_AVX2_MASK
    if constexpr (Avx2) {
      k = n & ~std::size_t{3};
      bits = below_mask_avx2(r, lf, bar, acc, k);
    }
#endif
    for (; k < n; ++k) bits |= static_cast<std::uint64_t>((acc + r[k]) + lf[k] < bar[k]) << k;
    return bits;
  }

#if REMAT_DETAIL_AVX2_MASK
  // The bits of k < n, n a multiple of 4.
  REMAT_DETAIL_AVX2_TARGET static std::uint64_t below_mask_avx2(const double* r, const double* lf,
                                                                const double* bar, double acc,
                                                                std::size_t n) noexcept {
    std::uint64_t bits = 0;
    const __m256d a = _mm256_set1_pd(acc);
    for (std::size_t k = 0; k < n; k += 4) {
      const __m256d v =
          _mm256_add_pd(_mm256_add_pd(a, _mm256_loadu_pd(r + k)), _mm256_loadu_pd(lf + k));
      const __m256d lt = _mm256_cmp_pd(v, _mm256_loadu_pd(bar + k), _CMP_LT_OQ);
      bits |= static_cast<std::uint64_t>(static_cast<unsigned>(_mm256_movemask_pd(lt))) << k;
    }
    return bits;
  }
#endif

  // Keeps best non-increasing in m after a run that ended at m = hi, and the block maxima up to
  // date from block q on (the run's first block). Past hi, best falls to
  // best(hi) until it is lower. Exact: a value lowered so is the value of a branch at a smaller m,
  // never below the least branch value at m (each branch is non-increasing); where the least
  // branch is pruned its bound was at or above best there, so it is never lost.
  [[gnu::always_inline]] static inline void settle(cell_state& cs, std::size_t q,
                                                   size_type hi) noexcept {
    double* best = cs.best;
    const size_type a = cs.a;
    const double v = best[hi - a];
    size_type m = hi + 1;
    while (m <= cs.b && best[m - a] > v) best[m++ - a] = v;
    const auto end = static_cast<std::size_t>((m - 1) / block - a / block) + 1;
    for (; q < end; ++q) cs.block_best[q] = best[block_lo(cs, q) - a];
  }

  // The block maxima, from best. No settling is needed here: best starts infinite or at the
  // window's values (a least of branches, each non-increasing), and every change since took the
  // least of it and a non-increasing branch (the runs, each settled past its end, and the tape
  // branch), which keeps a non-increasing sequence non-increasing.
  [[gnu::always_inline]] static inline void block_maxima(cell_state& cs) noexcept {
    for (std::size_t q = 0; q < cs.blocks; ++q) cs.block_best[q] = cs.best[block_lo(cs, q) - cs.a];
  }

  // The cell's tape branch, then its split points outside [i1 + 1, l0] (the shared ones, done;
  // `forward_l0` is fw[i] + ... + fw[l0 - 1] as they summed it); diagonal tiles pass
  // i1 = l0 = l: every split point.
  // (No lambda here: its body would not inherit the AVX2 target of `tile_avx2`.)
  template <bool Avx2>
  [[gnu::always_inline]] inline void own_splits(cell_state& cs, std::int32_t i1, std::int32_t l0,
                                                double forward_l0) const {
    const std::int32_t i = cs.i;
    const std::int32_t l = cs.l;
    if (t_.branches == dp_branches::tape_and_checkpoint) tape(i, l, cs.a, cs.b, cs.best);
    if (std::max(cs.end_low, cs.end_high) <= cs.a) return;  // the window has every m
    block_maxima(cs);
    branch br;
    double forward = 0;
    const std::int32_t low_end = std::min(i1, l);
    const std::int32_t high_start = std::max(i1, l0) + 1;
    for (std::int32_t j = i + 1; j <= l; ++j) {
      if (j > low_end && j < high_start) {
        j = high_start - 1;  // the shared split points, done
        if (l0 > i1) forward = forward_l0;
        continue;
      }
      forward += md_.fw[at(j - 1)];
      prepare(cs, j, forward, br);
      if (br.from != unreachable)
        prune_and_run<Avx2>(cs, br, j <= low_end ? cs.end_low : cs.end_high);
    }
  }

  // Writes the cell's values (clamped to S, as `optimal_cell` does) and its samples.
  [[gnu::always_inline]] inline void finish(const cell_state& cs) const {
    if (cs.active) {
      const double S = t_.bounds.S[cs.c];
      double* out = t_.value.data() + t_.offset[cs.c];
      const auto n = static_cast<std::size_t>(cs.b - cs.a + 1);
      for (std::size_t k = 0; k < n; ++k) out[k] = std::max(S, cs.best[k]);
    }
    const size_type need = t_.bounds.need[cs.c];
    if (need > t_.last_m) return;
    double* out = t_.sample.data() + t_.sample_offset[cs.c];
    for (size_type blk = need / block; blk <= t_.last_m / block; ++blk)
      *out++ = t_.get(cs.c, std::min(t_.M, blk * block + block - 1));
  }

  // Adds split point j to column l's window: H(j, m) = P(j) + OPT(j, l, m - x_j) for every m
  // where it is finite; on a tie the new (smaller) j.
  [[gnu::always_inline]] inline void add_split(std::int32_t l, std::int32_t j) const {
    const interval_info& r = info_[interval_index(md_.L, j, l)];
    const size_type top = t_.last_m;
    const size_type shift = md_.x[at(j)];
    if (r.need == unreachable || r.need > top || shift > top - r.need) return;
    const size_type lo = r.need + shift;
    const size_type st = std::min(add_or_unreachable(r.store, shift), top + 1);
    double* least = cols_->least.data() + at(l) * cols_->stride;
    std::int64_t* arg = cols_->arg.data() + at(l) * cols_->stride;
    const double pj = prefix_[at(j)];
    const double* v = t_.value.data() + r.offset;
    const std::int64_t jj = j;
    for (size_type m = lo; m < st; ++m) {
      const double h = pj + v[m - lo];
      const bool take = h <= least[m];
      least[m] = take ? h : least[m];
      arg[m] = take ? jj : arg[m];
    }
    const double hs = pj + r.S;
    for (size_type m = std::max(lo, st); m <= top; ++m) {
      const bool take = hs <= least[m];
      least[m] = take ? hs : least[m];
      arg[m] = take ? jj : arg[m];
    }
  }

  // The window. Every checkpoint branch is at least its value with OPT(i, j-1, m) at its least,
  // S(i, j-1): F(i, j) + OPT(j, l, m - x_j) + S(i, j-1) = H(j, m) - P(i), where P(j) = sum over
  // k < j of 2 fw[k] + bw[k] (in the exact sums of `model::exact_sums`, F(i, j) + S(i, j-1) is
  // P(j) - P(i)). So min_j H(j, m) - P(i), over the split points in column l's window, bounds all
  // of them from below, and where the least j reaching it has m >= store(i, j-1) (its left part
  // is S there), that branch reaches the bound: it is their exact least value. This holds at
  // almost every m from some point up (74% of the (cell, m) pairs at 200 stages), where it takes
  // O(1) per m instead of a pass over the split points. Writes it into best from that point on
  // and returns the point (b + 1: none).
  //
  // The test uses reach(i, j-1) = max over k in [i, j-1] of store(i, k) (>= store(i, j-1), so
  // passing it suffices; stores usually grow with k, and then it is the same test): going down
  // from m = b, the j that pass are those up to a bound that only falls, with no gather.
  template <bool Avx2>
  [[gnu::always_inline]] inline size_type window_from(cell_state& cs) const {
    const double* least = cols_->least.data() + at(cs.l) * cols_->stride;
    const std::int64_t* arg = cols_->arg.data() + at(cs.l) * cols_->stride;
    // reach[k] = reach(i, i + k)
    const size_type* reach = reach_.data() + interval_index(md_.L, cs.i, cs.i);
    // forwards[k] = forwards(i, i + 1 + k): split point j = i + 1 + k exists at m only from
    // x[l+1] + forwards[k] on (docs/recording-overhead.md), and non-decreasing in k like reach.
    const size_type* forwards = forwards_.data() + interval_index(md_.L, cs.i, cs.i);
    const size_type held = md_.x[at(cs.l + 1)];
    const std::int64_t i = cs.i;
    std::int64_t k = cs.l - 1 - i;  // the split points j <= i + 1 + k pass at m
    size_type from = cs.b + 1;
    auto pass_below = [&](size_type m) {  // lowers k to the bound at m
      while (k >= 0 && (reach[k] > m || held + forwards[k] > m)) --k;
      return i + 1 + k;
    };
    for (; from >= cs.a + 4; from -= 4) {
      const std::int64_t top = pass_below(from - 4);  // the bound at the 4's least m
      if (!all_below<Avx2>(least + (from - 4), arg + (from - 4), top)) break;
    }
    for (; from > cs.a; --from)
      if (!(least[from - 1] < infinite_time) || arg[from - 1] > pass_below(from - 1)) break;
    const double pi = prefix_[at(cs.i)];
    double* best = cs.best;
    for (size_type m = from; m <= cs.b; ++m) {
      const double v = least[m] - pi;
      double& slot = best[m - cs.a];
      slot = v < slot ? v : slot;
    }
    return from;
  }

  // Whether least[0..3] are finite and arg[0..3] <= top.
  template <bool Avx2>
  [[gnu::always_inline]] static inline bool all_below(const double* least, const std::int64_t* arg,
                                                      std::int64_t top) noexcept {
#if REMAT_DETAIL_AVX2_MASK
    if constexpr (Avx2) return all_below_avx2(least, arg, top);
#endif
    bool pass = true;
    for (int u = 0; u < 4; ++u) pass &= least[u] < infinite_time && arg[u] <= top;
    return pass;
  }

#if REMAT_DETAIL_AVX2_MASK
  REMAT_DETAIL_AVX2_TARGET static bool all_below_avx2(const double* least, const std::int64_t* arg,
                                                      std::int64_t top) noexcept {
    const __m256d finite =
        _mm256_cmp_pd(_mm256_loadu_pd(least), _mm256_set1_pd(infinite_time), _CMP_LT_OQ);
    const __m256i above = _mm256_cmpgt_epi64(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(arg)), _mm256_set1_epi64x(top));
    return _mm256_movemask_pd(finite) == 15 && _mm256_testz_si256(above, above) != 0;
  }
#endif

  // The tape branch: fw[i] + bw[i] + OPT(i+1, l, m - xb[i+1]).
  [[gnu::always_inline]] inline void tape(std::int32_t i, std::int32_t l, size_type a, size_type b,
                                          double* best) const {
    const size_type tape_ops = tape_ops_memory(md_, i, l);
    const double fb = md_.fw[at(i)] + md_.bw[at(i)];
    const std::size_t cr = interval_index(md_.L, i + 1, l);
    const size_type shift = md_.xb[at(i + 1)];
    const size_type lo = t_.bounds.need[cr] + shift;
    const size_type st = add_or_unreachable(t_.bounds.store[cr], shift);
    const double* rest = t_.value.data() + t_.offset[cr];
    for (size_type m = std::max({a, tape_ops, lo}); m <= b; ++m) {
      const double v = fb + (m >= st ? t_.bounds.S[cr] : rest[m - lo]);
      double& slot = best[m - a];
      slot = v < slot ? v : slot;
    }
  }

  [[gnu::always_inline]] inline void prepare(const cell_state& cs, std::int32_t j, double acc,
                                             branch& br) const {
    const std::int32_t i = cs.i;
    const std::int32_t l = cs.l;
    const interval_info& right = info_[interval_index(md_.L, j, l)];
    const interval_info& left = info_[interval_index(md_.L, i, j - 1)];
    if (j < l) prefetch_next(cs, j + 1);
    br.acc = acc;
    const size_type shift = md_.x[at(j)];
    // The branch's own forwards (docs/recording-overhead.md): below, it does not exist.
    const size_type forwards = md_.x[at(l + 1)] + forwards_[interval_index(md_.L, i, j - 1)];
    if (right.need == unreachable || left.need == unreachable ||
        std::max({right.need + shift, left.need, forwards}) > cs.b) {
      br.from = unreachable;
      return;
    }
    br.r_lo = right.need + shift;
    br.r_st = add_or_unreachable(right.store, shift);
    br.l_lo = left.need;
    br.l_st = left.store;
    br.from = std::max({br.r_lo, br.l_lo, forwards});
    br.r = t_.value.data() + right.offset;
    br.lf = t_.value.data() + left.offset;
    br.r_const = right.S;
    br.l_const = left.S;
    // Block q of the cell is block a / block + q; its last m, m1, has m1 - x_j in block
    // (a / block + q) - x_j / block of OPT(j, l, .) (when m1 is a block's last m; at M or b,
    // m1 is smaller and that block's sample still bounds it). The samples of an interval start
    // at its need's block.
    const size_type b0 = cs.a / block;
    const size_type q0 = std::max(b0, br.from / block) - b0;
    br.first_block = static_cast<std::size_t>(q0);
    const size_type shift_blocks = shift / block;
    // Relative to block 0 of the cell they may be negative (never read there).
    br.r_sample =
        static_cast<std::ptrdiff_t>(right.sample_offset) + (b0 - shift_blocks - right.need / block);
    br.l_sample = static_cast<std::ptrdiff_t>(left.sample_offset) + (b0 - left.need / block);
  }

  // Asks the cache for what `prepare` and the block tests read of split point j (its intervals'
  // summaries and first samples, and the first values the cell reads) and for the summary of
  // the right interval of j + 1: a column's intervals lie far apart in the table, so these are
  // misses otherwise (5 to 7% of the time at 200 stages).
  [[gnu::always_inline]] inline void prefetch_next(const cell_state& cs, std::int32_t j) const {
#if defined(__GNUC__) || defined(__clang__)
    if (j < cs.l) __builtin_prefetch(&info_[interval_index(md_.L, j + 1, cs.l)]);
    const interval_info& right = info_[interval_index(md_.L, j, cs.l)];
    const interval_info& left = info_[interval_index(md_.L, cs.i, j - 1)];
    auto first_value = [&](const interval_info& in, size_type shift) {
      if (in.need == unreachable || cs.a - shift <= in.need) return in.offset;
      return in.offset + static_cast<std::size_t>(cs.a - shift - in.need);
    };
    for (const std::size_t k : {right.sample_offset, left.sample_offset})
      if (k < t_.sample.size()) __builtin_prefetch(t_.sample.data() + k);
    for (const std::size_t k : {first_value(right, md_.x[at(j)]), first_value(left, 0)})
      if (k < t_.value.size()) __builtin_prefetch(t_.value.data() + k);
#else
    (void)cs;
    (void)j;
#endif
  }

  // Branch `br` over m in [p, q], a <= p: split where either side becomes its constant.
  [[gnu::always_inline]] static inline void run_parts(const branch& br, size_type a, size_type p,
                                                      size_type q, double* best) noexcept {
    size_type cuts[4] = {p, std::clamp(br.r_st, p, q + 1), std::clamp(br.l_st, p, q + 1), q + 1};
    if (cuts[1] > cuts[2]) std::swap(cuts[1], cuts[2]);
    for (int part = 0; part < 3; ++part) {
      const size_type s0 = cuts[part];
      const size_type s1 = cuts[part + 1];
      if (s0 >= s1) continue;
      const auto n = static_cast<std::size_t>(s1 - s0);
      double* bp = best + (s0 - a);
      const bool rc = s0 >= br.r_st;
      const bool lc = s0 >= br.l_st;
      const double* rp = rc ? br.r : br.r + (s0 - br.r_lo);
      const double* lp = lc ? br.lf : br.lf + (s0 - br.l_lo);
      if (rc && lc)
        relax<true, true>(bp, rp, br.r_const, lp, br.l_const, br.acc, n);
      else if (rc)
        relax<true, false>(bp, rp, br.r_const, lp, br.l_const, br.acc, n);
      else if (lc)
        relax<false, true>(bp, rp, br.r_const, lp, br.l_const, br.acc, n);
      else
        relax<false, false>(bp, rp, br.r_const, lp, br.l_const, br.acc, n);
    }
  }

  const model& md_;
  fast_table& t_;
  std::vector<interval_info> info_;
  std::vector<double> prefix_;    // P(j) = sum over k < j of 2 fw[k] + bw[k]
  std::vector<size_type> reach_;  // [interval (i, k)]: max over k' in [i, k] of store(i, k')
  // [interval (i, j - 1)]: forwards(i, j), the peak above g_{l+1} of the forwards of the
  // checkpoint branch at j (`checkpoint_forward_table`)
  std::vector<size_type> forwards_;
  columns* cols_;
#if REMAT_DETAIL_AVX2_CLONE
  bool avx2_ = __builtin_cpu_supports("avx2");
#endif
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

}  // namespace fast

// Every byte `optimal_dp_fast` allocates beyond the bounds and the layout: values, samples, the
// intervals' summary, and per thread its scratch.
inline double fast_table_bytes(const fast_layout& layout, std::int32_t L, size_type M,
                               unsigned threads) {
  const double per_thread = fast::scratch_size(L, M, fast::tile_side(L, M)).bytes;
  return static_cast<double>(layout.entries + layout.samples) * sizeof(double) +
         static_cast<double>(layout.offset.size()) * sizeof(fast::interval_info) +
         fast::columns::bytes(L, layout.last_m) + static_cast<double>(threads) * per_thread;
}

// The number of threads `threads` asks for: 0 is the hardware's concurrency.
inline unsigned dp_threads(unsigned threads) noexcept {
  if (threads != 0) return threads;
  return std::max(1U, std::thread::hardware_concurrency());
}

// The fast DP over m in [0, M] for every interval, with `threads` threads (>= 1). `bounds` must be
// `make_interval_bounds(md, persistent_need(md, branches), branches)` and `layout` its
// `make_fast_layout`. `side` sets the tiles' side (0: `fast::tile_side(L, M)`; the tests vary it:
// the result does not depend on it either).
//
// The cells go by square tiles (`fast::tile_side`), tile (p, q) holding rows [pT, pT + T - 1]
// and columns [qT, qT + T - 1]; tile (p, q) reads the tiles (p', q) for p < p' <= q and (p, q')
// for p <= q' < q, so tiles go by diagonals q - p. Threads take tiles in that order from a
// counter, each waiting for the two tiles it reads last ((p + 1, q) and (p, q - 1), which waited
// for theirs). Every cell computes the same function of the same inputs whatever the order, so
// the result does not depend on the thread count.
inline fast_table optimal_dp_fast(const model& md, interval_bounds bounds, fast_layout layout,
                                  size_type M, dp_branches branches, unsigned threads,
                                  std::int32_t side = 0) {
  fast_table t;
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
  if (side <= 0) side = fast::tile_side(L, M);
  const std::int32_t n = L / side + 1;  // tiles per side, over the indices 0 .. L
  std::vector<std::pair<std::int32_t, std::int32_t>> order;
  order.reserve(static_cast<std::size_t>(n) * static_cast<std::size_t>(n + 1) / 2);
  for (std::int32_t d = 0; d < n; ++d)
    for (std::int32_t p = 0; p + d < n; ++p) order.emplace_back(p, p + d);
  fast::columns cols = md.exact_sums ? fast::columns(L, t.last_m) : fast::columns();
  const fast::dp dp(md, t, &cols);
  auto compute = [&](std::pair<std::int32_t, std::int32_t> pq, fast::scratch& s) {
    const auto [p, q] = pq;
    dp.tile(p * side, std::min(L, p * side + side - 1), q * side, std::min(L, q * side + side - 1),
            s);
  };
  const unsigned workers = std::clamp(threads, 1U, static_cast<unsigned>(n));
  if (workers == 1) {
    fast::scratch s = fast::make_scratch(L, M, side);
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
    fast::scratch s = fast::make_scratch(L, M, side);
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

// The dense DP's step of a solve with slots: its makespan and schedule for (0, L, M), after the
// limits on the table's memory (max_table_bytes) and on the time estimated for it and for the
// least-memory DPs before it (`need_seconds`), which throw. The makespan is infinite (and no
// schedule) where the budget is infeasible, or where every time is finite but their sum is not.
struct dense_run {
  double makespan = infinite_time;
  std::vector<op> ops;
};

constexpr dense_run run_dense(const chain& c, const model& md, std::vector<size_type> need,
                              size_type M, dp_branches branches, const solve_options& options,
                              std::string_view solver_name, double need_seconds) {
  dense_run run;
  if (std::is_constant_evaluated()) {
    const optimal_table t = optimal_dp_reference(md, M, branches);
    run.makespan = t.value[t.at(0, md.L, M)];
    if (run.makespan < infinite_time) run.ops = optimal_ops(md, t, 0, md.L, M);
    return run;
  }
  interval_bounds bounds = make_interval_bounds(md, std::move(need), branches);
  fast_layout layout = make_fast_layout(bounds, md.L, M);
  const unsigned threads = dp_threads(options.threads);
  const double bytes = fast_table_bytes(layout, md.L, M, threads);
  const std::size_t limit = options.max_table_bytes.value_or(default_table_limit());
  if (bytes > static_cast<double>(limit))
    throw_table_too_large(md.L, M, bytes, limit, solver_name);
  check_dp_seconds(solver_name, c, options.slots,
                   need_seconds + main_dp_seconds(bounds, md.L, M, branches, threads), bytes,
                   options, "the DP");
  const fast_table t =
      optimal_dp_fast(md, std::move(bounds), std::move(layout), M, branches, threads);
  run.makespan = t.get(0, md.L, M);
  if (run.makespan < infinite_time)
    run.ops = persistent_ops(md, 0, md.L, M, [&](std::int32_t i, std::int32_t l, size_type m) {
      return t.choice_at(md, i, l, m);
    });
  return run;
}

}  // namespace remat::detail
