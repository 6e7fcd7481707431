// The run-time DP of MODEL.md: the same values and the same schedules as the reference
// (`optimal_dp_reference`, bit for bit), in a fraction of its time and memory.
//
// * Compact table. Interval (i, l) stores OPT only for m in [need, min(store - 1, M)]: below need
//   it is infinite, from store on it is S (the rules of `optimal_cell`). Values are doubles, as in
//   the reference (a narrower type would round differently, and schedules would differ). No
//   choices are stored: the schedule's cells recompute theirs with the reference's expressions
//   and tie-breaking (`fast_table::choice_at`), L cells of O(L) each.
// * Vectorized over m. The checkpoint branch at j is, over a run of m, (acc + R[m - x_j]) + Lf[m]
//   with R and Lf contiguous (or constant where they reach S): a loop the compiler vectorizes.
// * Exact pruning. Every value is >= S and non-increasing in m, bit for bit (float addition is
//   monotone, and the rules of `optimal_cell` clamp), and so is the least value found so far. m
//   is cut into blocks of 32 (`fast::block`), and every interval keeps a sample per block: its
//   value at the block's last m, the least in the block. For branch j and a block of the cell,
//   (acc + sample of R) + (sample of Lf) is a lower bound of the branch over the block; where it
//   is not below the best so far at the block's first m (the largest in the block), the block is
//   skipped. The minimum does not depend on the order of the branches, so in each block the branch
//   of least bound runs first, and the others then mostly fall under the bar.
// * Column groups. Row i (every (i, k)) is read by every cell (i, .): columns go by groups of 8,
//   each group row by row, so that a row serves 8 cells while it is in cache. With T threads,
//   thread t takes groups t, t + T, ...; row i of a group waits for row i of the group before.
//   Every cell computes the same function of the same inputs, so the result does not depend on T.
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/model.hpp>
#include <remat/detail/persistent_dp.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <thread>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
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

namespace fast {
// Values are summarized by blocks of m: block s is [s * block, s * block + block - 1].
inline constexpr size_type block = 32;
}  // namespace fast

// OPT over the stored ranges; `get` reads any (i, l, m) with m <= M.
struct fast_table {
  std::int32_t L = 0;
  size_type M = 0;
  dp_branches branches = dp_branches::tape_and_checkpoint;
  interval_bounds bounds;
  std::vector<std::size_t> offset;  // [interval]: where its values start
  std::vector<double> value;
  // Per interval, for every block s from need / block to M / block: OPT at the block's last m
  // (or at M): the least value of the block, for the pruning bounds.
  std::vector<std::size_t> sample_offset;  // [interval]
  std::vector<double> sample;

  // The last stored m of interval c (below `bounds.need[c]` when none is stored).
  size_type top(std::size_t c) const noexcept {
    return bounds.store[c] == unreachable ? M : std::min(bounds.store[c] - 1, M);
  }

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
    const size_type tape_ops =
        std::max(md.x[at(l + 1)] + md.xb[at(i + 1)] + md.ft[at(i)],
                 md.x[at(i)] + md.x[at(i + 1)] + md.xb[at(i + 1)] + md.bt[at(i)]);
    if (branches == dp_branches::tape_and_checkpoint && m >= tape_ops && m >= md.xb[at(i + 1)]) {
      const double rest = get(i + 1, l, m - md.xb[at(i + 1)]);
      if (rest < infinite_time) {
        best = md.fw[at(i)] + md.bw[at(i)] + rest;
        choice = 0;
      }
    }
    double forward = 0;
    for (std::int32_t j = i + 1; j <= l; ++j) {
      forward += md.fw[at(j - 1)];
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
  std::vector<std::size_t> sample_offset;
  std::size_t samples = 0;
};

inline fast_layout make_fast_layout(const interval_bounds& b, std::int32_t L, size_type M) {
  fast_layout out;
  out.offset.assign(interval_count(L), 0);
  out.sample_offset.assign(interval_count(L), 0);
  for (std::size_t c = 0; c < out.offset.size(); ++c) {
    out.offset[c] = out.entries;
    out.sample_offset[c] = out.samples;
    const size_type top = b.store[c] == unreachable ? M : std::min(b.store[c] - 1, M);
    // Base cases store no value: their need is their store.
    if (top >= b.need[c]) out.entries += static_cast<std::size_t>(top - b.need[c]) + 1;
    if (b.need[c] <= M)
      out.samples += static_cast<std::size_t>(M / fast::block - b.need[c] / fast::block + 1);
  }
  return out;
}

namespace fast {

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
  double r_const = 0;
  double l_const = 0;
  double acc = 0;  // fw[i] + ... + fw[j-1], summed left to right
};

struct scratch {
  std::vector<double> best;          // [m - need] of the cell being computed
  std::vector<branch> branches;      // [j - i - 1]
  std::vector<double> floor;         // [j - i - 1][block]: the branches' lower bounds
  std::vector<double> least;         // [block]: the least bound of any branch
  std::vector<std::uint32_t> first;  // [block]: the branch with that bound
  std::vector<double> block_best;    // [block]: best at the block's first m
};

// best[k] = min(best[k], (acc + r[k]) + lf[k]) for k in [0, n); r (lf) is the constant rc (lc)
// when RightConst (LeftConst) and is not read then.
template <bool RightConst, bool LeftConst>
inline void relax(double* __restrict best, const double* __restrict r, double rc,
                  const double* __restrict lf, double lc, double acc, std::size_t n) noexcept {
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
  dp(const model& md, fast_table& t) : md_(md), t_(t), info_(t.offset.size()) {
    for (std::size_t c = 0; c < info_.size(); ++c)
      info_[c] = {t.bounds.need[c], t.bounds.store[c], t.bounds.S[c], t.offset[c],
                  t.sample_offset[c]};
  }

  // Fills interval (i, l) and its samples; every interval it reads is done.
  void cell(std::int32_t i, std::int32_t l, scratch& s) const {
    const std::size_t c = interval_index(md_.L, i, l);
    if (i != l && t_.top(c) >= t_.bounds.need[c]) values(i, l, c, s);
    samples(c);
  }

 private:
  static std::size_t at(std::int32_t k) noexcept { return static_cast<std::size_t>(k); }

  void values(std::int32_t i, std::int32_t l, std::size_t c, scratch& s) const {
    const size_type a = t_.bounds.need[c];
    const size_type b = t_.top(c);
    const auto n = static_cast<std::size_t>(b - a + 1);
    double* best = s.best.data();
    std::fill(best, best + n, infinite_time);
    if (t_.branches == dp_branches::tape_and_checkpoint) tape(i, l, a, b, best);

    const size_type b0 = a / block;
    const auto blocks = static_cast<std::size_t>(b / block - b0 + 1);
    const auto width = static_cast<std::size_t>(l - i);
    double forward = 0;
    for (std::size_t k = 0; k < width; ++k) {
      forward += md_.fw[at(i) + k];
      prepare(i, l, i + 1 + static_cast<std::int32_t>(k), forward, a, b, s.branches[k]);
    }
    // The first m of block q and the last.
    auto block_lo = [&](std::size_t q) {
      return std::max(a, (b0 + static_cast<size_type>(q)) * block);
    };
    auto block_hi = [&](std::size_t q) {
      return std::min(b, (b0 + static_cast<size_type>(q)) * block + block - 1);
    };
    double* least = s.least.data();
    std::uint32_t* first = s.first.data();
    double* block_best = s.block_best.data();
    constexpr std::uint32_t none = std::numeric_limits<std::uint32_t>::max();
    std::fill(least, least + blocks, infinite_time);
    std::fill(first, first + blocks, none);

    // 1. In each block, the branch of least bound runs first: it brings best near its final
    // value, under most other branches' bounds.
    for (std::size_t k = 0; k < width; ++k) {
      const branch& br = s.branches[k];
      if (br.from == unreachable) continue;
      double* floor = s.floor.data() + k * blocks;
      bounds_of(br, blocks, floor);
      for (std::size_t q = br.first_block; q < blocks; ++q) {
        const bool lower = floor[q] < least[q];
        least[q] = lower ? floor[q] : least[q];
        first[q] = lower ? static_cast<std::uint32_t>(k) : first[q];
      }
    }
    for (std::size_t q = 0; q < blocks; ++q) {
      if (first[q] != none) {
        const branch& br = s.branches[first[q]];
        run(br, a, std::max(block_lo(q), br.from), block_hi(q), best);
      }
      block_best[q] = best[block_lo(q) - a];
    }
    // 2. Every other branch, only in the blocks where its bound is below the best at the
    // block's first m (the largest in the block); consecutive blocks run as one.
    for (std::size_t k = 0; k < width; ++k) {
      const branch& br = s.branches[k];
      if (br.from == unreachable) continue;
      const double* floor = s.floor.data() + k * blocks;
      std::size_t q = br.first_block;
      while (q < blocks) {
        if (!(floor[q] < block_best[q]) || first[q] == k) {
          ++q;
          continue;
        }
        std::size_t end = q + 1;
        while (end < blocks && floor[end] < block_best[end] && first[end] != k) ++end;
        run(br, a, std::max(block_lo(q), br.from), block_hi(end - 1), best);
        for (; q < end; ++q) block_best[q] = best[block_lo(q) - a];
      }
    }

    const double S = t_.bounds.S[c];
    double* out = t_.value.data() + t_.offset[c];
    for (std::size_t k = 0; k < n; ++k) out[k] = std::max(S, best[k]);
  }

  // floor[q] for q >= br.first_block: a lower bound of the branch over block q of the cell.
  void bounds_of(const branch& br, std::size_t blocks, double* floor) const noexcept {
    const double* sample = t_.sample.data();
    const double acc = br.acc;
    for (auto q = static_cast<std::ptrdiff_t>(br.first_block);
         q < static_cast<std::ptrdiff_t>(blocks); ++q)
      floor[q] = (acc + sample[br.r_sample + q]) + sample[br.l_sample + q];
  }

  void samples(std::size_t c) const {
    const size_type need = t_.bounds.need[c];
    if (need > t_.M) return;
    double* out = t_.sample.data() + t_.sample_offset[c];
    for (size_type blk = need / block; blk <= t_.M / block; ++blk)
      *out++ = t_.get(c, std::min(t_.M, blk * block + block - 1));
  }

  // The tape branch: fw[i] + bw[i] + OPT(i+1, l, m - xb[i+1]).
  void tape(std::int32_t i, std::int32_t l, size_type a, size_type b, double* best) const {
    const size_type tape_ops =
        std::max(md_.x[at(l + 1)] + md_.xb[at(i + 1)] + md_.ft[at(i)],
                 md_.x[at(i)] + md_.x[at(i + 1)] + md_.xb[at(i + 1)] + md_.bt[at(i)]);
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

  void prepare(std::int32_t i, std::int32_t l, std::int32_t j, double acc, size_type a, size_type b,
               branch& br) const {
    const interval_info& right = info_[interval_index(md_.L, j, l)];
    const interval_info& left = info_[interval_index(md_.L, i, j - 1)];
    br.acc = acc;
    const size_type shift = md_.x[at(j)];
    if (right.need == unreachable || left.need == unreachable ||
        std::max(right.need + shift, left.need) > b) {
      br.from = unreachable;
      return;
    }
    br.r_lo = right.need + shift;
    br.r_st = add_or_unreachable(right.store, shift);
    br.l_lo = left.need;
    br.l_st = left.store;
    br.from = std::max(br.r_lo, br.l_lo);
    br.r = t_.value.data() + right.offset;
    br.lf = t_.value.data() + left.offset;
    br.r_const = right.S;
    br.l_const = left.S;
    // Block q of the cell is block a / block + q; its last m, m1, has m1 - x_j in block
    // (a / block + q) - x_j / block of OPT(j, l, .) (when m1 is a block's last m; at M or b,
    // m1 is smaller and that block's sample still bounds it). The samples of an interval start
    // at its need's block.
    const size_type b0 = a / block;
    const size_type q0 = std::max(b0, br.from / block) - b0;
    br.first_block = static_cast<std::size_t>(q0);
    const size_type shift_blocks = shift / block;
    // Relative to block 0 of the cell they may be negative (never read there).
    br.r_sample =
        static_cast<std::ptrdiff_t>(right.sample_offset) + (b0 - shift_blocks - right.need / block);
    br.l_sample = static_cast<std::ptrdiff_t>(left.sample_offset) + (b0 - left.need / block);
  }

  // Branch `br` over m in [p, q], a <= p: split where either side becomes its constant.
  static void run(const branch& br, size_type a, size_type p, size_type q, double* best) noexcept {
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
};

}  // namespace fast

// Every byte `optimal_dp_fast` allocates beyond the bounds and the layout: values, samples, the
// intervals' summary, and per thread its scratch.
inline double fast_table_bytes(const fast_layout& layout, std::int32_t L, size_type M,
                               unsigned threads) {
  const double per_thread =
      (static_cast<double>(M) + 1) * sizeof(double) +
      (static_cast<double>(L) + 1) * sizeof(fast::branch) +
      (static_cast<double>(M / fast::block) + 1) *
          ((static_cast<double>(L) + 3) * sizeof(double) + sizeof(std::uint32_t));
  return static_cast<double>(layout.entries + layout.samples) * sizeof(double) +
         static_cast<double>(layout.offset.size()) * sizeof(fast::interval_info) +
         static_cast<double>(threads) * per_thread;
}

// The number of threads `threads` asks for: 0 is the hardware's concurrency.
inline unsigned dp_threads(unsigned threads) noexcept {
  if (threads != 0) return threads;
  return std::max(1U, std::thread::hardware_concurrency());
}

// The fast DP over m in [0, M] for every interval, with `threads` threads (>= 1). `bounds` must be
// `make_interval_bounds(md, persistent_need(md, branches), branches)` and `layout` its
// `make_fast_layout`.
inline fast_table optimal_dp_fast(const model& md, interval_bounds bounds, fast_layout layout,
                                  size_type M, dp_branches branches, unsigned threads) {
  fast_table t;
  t.L = md.L;
  t.M = M;
  t.branches = branches;
  t.bounds = std::move(bounds);
  t.offset = std::move(layout.offset);
  t.value.resize(layout.entries);
  t.sample_offset = std::move(layout.sample_offset);
  t.sample.resize(layout.samples);
  const std::int32_t L = md.L;
  // Columns go by groups of `group_width`: row i of the table (read by every cell (i, .)) is
  // then used by that many cells in a row while it is in cache.
  constexpr std::int32_t group_width = 8;
  const std::int32_t groups = L / group_width + 1;
  const unsigned workers = std::clamp(threads, 1U, static_cast<unsigned>(groups));
  const fast::dp dp(md, t);
  const auto blocks = static_cast<std::size_t>(M / fast::block + 1);
  auto new_scratch = [&] {
    fast::scratch s;
    s.best.resize(static_cast<std::size_t>(M) + 1);
    s.branches.resize(static_cast<std::size_t>(L) + 1);
    s.floor.resize(blocks * (static_cast<std::size_t>(L) + 1));
    s.least.resize(blocks);
    s.first.resize(blocks);
    s.block_best.resize(blocks);
    return s;
  };
  // Group g: columns [g * group_width, min(L, (g + 1) * group_width - 1)], rows from the last
  // down, each row from its first column to its last. Cell (i, l) reads (i, l - 1) and the
  // cells of column l below row i: in a group, (i, l0) of its first column l0 only needs row i
  // of the previous group done.
  auto group = [&](std::int32_t g, fast::scratch& s, auto&& wait, auto&& done) {
    const std::int32_t l0 = g * group_width;
    const std::int32_t l1 = std::min(L, l0 + group_width - 1);
    for (std::int32_t i = l1; i >= 0; --i) {
      if (i < l0) wait(g, i);
      for (std::int32_t l = std::max(l0, i); l <= l1; ++l) dp.cell(i, l, s);
      done(g, i);
    }
  };
  if (workers == 1) {
    fast::scratch s = new_scratch();
    for (std::int32_t g = 0; g < groups; ++g)
      group(
          g, s, [](std::int32_t, std::int32_t) {}, [](std::int32_t, std::int32_t) {});
    return t;
  }
  // progress[g]: the least row i whose cells in group g are done (past the group before any).
  std::vector<std::atomic<std::int32_t>> progress(static_cast<std::size_t>(groups));
  for (auto& p : progress) p.store(L + 1);
  std::vector<fast::scratch> scratches;
  for (unsigned w = 0; w < workers; ++w) scratches.push_back(new_scratch());
  auto wait = [&](std::int32_t g, std::int32_t i) {
    const std::atomic<std::int32_t>& before = progress[static_cast<std::size_t>(g - 1)];
    while (before.load(std::memory_order_acquire) > i) std::this_thread::yield();
  };
  auto done = [&](std::int32_t g, std::int32_t i) {
    progress[static_cast<std::size_t>(g)].store(i, std::memory_order_release);
  };
  auto work = [&](unsigned w) {
    for (auto g = static_cast<std::int32_t>(w); g < groups; g += static_cast<std::int32_t>(workers))
      group(g, scratches[w], wait, done);
  };
  {
    std::vector<std::jthread> pool;
    for (unsigned w = 1; w < workers; ++w) pool.emplace_back(work, w);
    work(0);
  }
  return t;
}

}  // namespace remat::detail
