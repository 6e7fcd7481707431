// The dense DP's kernel: the cells of one tile of intervals over every m, with the window of
// split points and the order of the branches (engines/dense.hpp says what each does and why it is
// exact). What a branch does to a cell's blocks of m, the block tests and their AVX2 forms
// included, is engines/dense_blocks.hpp.
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/dp/branches.hpp>
#include <remat/detail/dp/engines/dense_blocks.hpp>
#include <remat/detail/dp/engines/dense_table.hpp>
#include <remat/detail/dp/engines/dense_tile.hpp>
#include <remat/detail/dp/intervals.hpp>
#include <remat/detail/dp/model.hpp>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace remat::detail::dense {

class dp {
 public:
  // `cols` (may be null: no window) must be `columns(L, t.last_m)`, fresh, and used by this DP
  // only.
  dp(const model& md, dense_table& t, columns* cols)
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
      prefix_[k + 1] = prefix_[k] + (md.fw[k] + md.fb[k]);
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
        cs.active = cs.b >= cs.a;  // a base case only where its options trade memory for time
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
          if (cs.active && cs.i < cs.l) {
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
    // least forward cost first (running first, in each block, the branch of least bound there
    // costs more than it saves). The split points go by groups of `split_group`, each cell
    // taking the whole group in turn, so that its best stays in L1 for that many branches (the
    // order of each cell's branches, hence every bit, is unchanged; bench_engines, `dense/*`).
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
      return checkpoint_value(br.acc, sample[br.r_sample + sq], sample[br.l_sample + sq]) < bb[q];
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

  // The cell's tape branch, then its split points outside [i1 + 1, l0] (the shared ones, done;
  // `forward_l0` is fw[i] + ... + fw[l0 - 1] as they summed it); diagonal tiles pass
  // i1 = l0 = l: every split point.
  // (No lambda here: its body would not inherit the AVX2 target of `tile_avx2`.)
  template <bool Avx2>
  [[gnu::always_inline]] inline void own_splits(cell_state& cs, std::int32_t i1, std::int32_t l0,
                                                double forward_l0) const {
    const std::int32_t i = cs.i;
    const std::int32_t l = cs.l;
    if (i == l) return base(i, cs.a, cs.b, cs.best);
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

  // Writes the cell's values (clamped to S, as `reference_cell` does) and its samples.
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
  // k < j of fw[k] + fb[k] (in the exact sums of `model::exact_sums`, F(i, j) + S(i, j-1) is
  // P(j) - P(i)). So min_j H(j, m) - P(i), over the split points in column l's window, bounds all
  // of them from below, and where the least j reaching it has m >= store(i, j-1) (its left part
  // is S there), that branch reaches the bound: it is their exact least value. This holds at
  // almost every m from some point up (most (cell, m) pairs of long chains), where it takes
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
    // forwards[k] = forwards(i, i + 1 + k): split point j = i + 1 + k exists at m only from its
    // `checkpoint_branch::own`, x[l+1] + forwards[k], on; non-decreasing in k like reach.
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

  // The tape branch: fw_o[i] + bw_o[i] + OPT(i+1, l, m - xb_o[i+1]), for each option o.
  [[gnu::always_inline]] inline void tape(std::int32_t i, std::int32_t l, size_type a, size_type b,
                                          double* best) const {
    const std::size_t cr = interval_index(md_.L, i + 1, l);  // every option's rest
    const double* rest = t_.value.data() + t_.offset[cr];
    for (const tape_option& o : md_.options(i)) {
      const tape_branch br = tape_branch_of(md_, i, l, o);
      const size_type lo = t_.bounds.need[cr] + br.held;
      const size_type st = add_or_unreachable(t_.bounds.store[cr], br.held);
      for (size_type m = std::max({a, br.own, lo}); m <= b; ++m) {
        const double v = br.value(m >= st ? t_.bounds.S[cr] : rest[m - lo]);
        double& slot = best[m - a];
        slot = v < slot ? v : slot;
      }
    }
  }

  // The base case (i, i) where its options trade memory for time: fw_o[i] + bw_o[i] from the
  // option's tape ops on.
  [[gnu::always_inline]] inline void base(std::int32_t i, size_type a, size_type b,
                                          double* best) const {
    for (const tape_option& o : md_.options(i)) {
      const tape_branch base = tape_branch_of(md_, i, i, o);
      for (size_type m = std::max(a, base.own); m <= b; ++m) {
        const double v = base.time;
        double& slot = best[m - a];
        slot = v < slot ? v : slot;
      }
    }
  }

  [[gnu::always_inline]] inline void prepare(const cell_state& cs, std::int32_t j, double acc,
                                             branch& br) const {
    const checkpoint_branch cb = checkpoint_branch_at(md_, forwards_, cs.i, cs.l, j, acc);
    const branch_part rp = cb.right();
    const branch_part lp = cb.left();
    const interval_info& right = info_[interval_index(md_.L, rp.i, rp.l)];
    const interval_info& left = info_[interval_index(md_.L, lp.i, lp.l)];
    if (j < cs.l) prefetch_next(cs, j + 1);
    br.acc = cb.forward;
    const size_type shift = rp.held;
    // Below its need (its own forwards' memory included) the branch does not exist.
    br.from = right.need == unreachable || left.need == unreachable
                  ? unreachable
                  : cb.need(right.need, left.need);
    if (br.from > cs.b) {
      br.from = unreachable;
      return;
    }
    br.r_lo = right.need + shift;
    br.r_st = add_or_unreachable(right.store, shift);
    br.l_lo = left.need;
    br.l_st = left.store;
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
  // misses otherwise.
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

  const model& md_;
  dense_table& t_;
  std::vector<interval_info> info_;
  std::vector<double> prefix_;    // P(j) = sum over k < j of fw[k] + fb[k] (2 fw + bw, one option)
  std::vector<size_type> reach_;  // [interval (i, k)]: max over k' in [i, k] of store(i, k')
  // [interval (i, j - 1)]: forwards(i, j), the peak above g_{l+1} of the forwards of the
  // checkpoint branch at j (`checkpoint_forward_table`)
  std::vector<size_type> forwards_;
  columns* cols_;
#if REMAT_DETAIL_AVX2_CLONE
  bool avx2_ = __builtin_cpu_supports("avx2");
#endif
};

}  // namespace remat::detail::dense
