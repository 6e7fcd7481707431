// The intervals of docs/model.md's DP and what bounds them whatever the memory: indexing, the
// memory every schedule of an interval needs at least, its checkpoint branches' forwards by split
// point (the branches themselves are dp/branches.hpp), and the no-recomputation bounds (`store`,
// `S`) that every engine uses as rules.
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/dp/branches.hpp>
#include <remat/detail/dp/model.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace remat::detail {

// A memory requirement no chain reaches (validated chains total at most 2^63 - 1 units).
inline constexpr size_type unreachable = std::numeric_limits<size_type>::max();

// Index of interval (i, l), 0 <= i <= l <= L, in a triangular array of (L+1)(L+2)/2 cells.
constexpr std::size_t interval_index(std::int32_t L, std::int32_t i, std::int32_t l) noexcept {
  const auto n = static_cast<std::size_t>(L) + 1;
  const auto ui = static_cast<std::size_t>(i);
  return ui * (2 * n - ui + 1) / 2 + static_cast<std::size_t>(l - i);
}

constexpr std::size_t interval_count(std::int32_t L) noexcept {
  const auto n = static_cast<std::size_t>(L) + 1;
  return n * (n + 1) / 2;
}

// With recording overheads (docs/recording-overhead.md) a forward of stage k peaks at
// x[k+1] + ft[k] above what it holds when it is F_none or F_ck, at xb[k+1] + fa[k] when it is
// F_all. `least_forward(md, k)` is the smaller: what any forward of stage k adds at its peak.
// With options, F_all(k, o) adds xb_o[k+1] + fa_o[k]; the least is over all of them.
constexpr size_type least_forward(const model& md, std::int32_t k) noexcept {
  const auto at = static_cast<std::size_t>(k);
  size_type least = md.x[at + 1] + md.ft[at];
  for (const tape_option& o : md.options(k)) least = std::min(least, o.xb + o.fa);
  return least;
}

// A lower bound of the memory of every persistent schedule of (i, l), i < l (docs/model.md's mmin,
// with recording overheads): each stage k in i .. l-1 runs forward at least once while g_{l+1}
// is held, its input held too (counted for k > i), so
//   mmin = x[l+1] + max(least_forward(i), max_{i<k<l} x[k] + least_forward(k)).
// With fa = ft, least_forward(k) = x[k+1] + ft[k] (xb >= x) and this is docs/model.md's mmin. It is
// a pruning bound only: the checkpoint branch checks its own forwards (`checkpoint_branch::own`),
// the tape branch its F_all, so OPT below mmin is infinite by the branches' own conditions.
constexpr size_type necessary_memory(const model& md, std::int32_t i, std::int32_t l) {
  auto at = [](std::int32_t k) { return static_cast<std::size_t>(k); };
  size_type inner = least_forward(md, i);
  for (std::int32_t k = i + 1; k < l; ++k)
    inner = std::max(inner, md.x[at(k)] + least_forward(md, k));
  return md.x[at(l + 1)] + inner;
}

// `necessary_memory(md, i, l)` for every interval, at [interval_index(L, i, l)] (0 for i = l), in
// O(L^2): a row's inner max grows with l.
constexpr std::vector<size_type> necessary_memory_table(const model& md) {
  auto at = [](std::int32_t k) { return static_cast<std::size_t>(k); };
  std::vector<size_type> t(interval_count(md.L), 0);
  for (std::int32_t i = 0; i < md.L; ++i) {
    size_type inner = least_forward(md, i);
    for (std::int32_t l = i + 1; l <= md.L; ++l) {
      t[interval_index(md.L, i, l)] = md.x[at(l + 1)] + inner;
      inner = std::max(inner, md.x[at(l)] + least_forward(md, l));
    }
  }
  return t;
}

// `checkpoint_branch::forwards` of every split point j of every row i, at
// [interval_index(L, i, j - 1)] for 0 <= i < j <= L (a row's values are contiguous in j): they do
// not depend on l, so engines that visit split points out of order read them here.
constexpr std::vector<size_type> checkpoint_forward_table(const model& md) {
  std::vector<size_type> t(interval_count(md.L), 0);
  for (std::int32_t i = 0; i < md.L; ++i)
    for (checkpoint_walk w(md, i, md.L); !w.done(); w.next())
      t[interval_index(md.L, i, w->j - 1)] = w->forwards;
  return t;
}

// The checkpoint branch of (i, l) at j in O(1) from `checkpoint_forward_table(md)` and its forward
// time (fw[i] + ... + fw[j-1], summed left to right from 0), for engines that visit split points
// out of order.
constexpr checkpoint_branch checkpoint_branch_at(const model& md,
                                                 const std::vector<size_type>& forwards,
                                                 std::int32_t i, std::int32_t l, std::int32_t j,
                                                 double forward) noexcept {
  return checkpoint_branch_of(md, i, l, j, forward, forwards[interval_index(md.L, i, j - 1)]);
}

// Adds sizes that may be `unreachable`, saturating there.
constexpr size_type add_or_unreachable(size_type a, size_type b) noexcept {
  return a == unreachable || b == unreachable ? unreachable : a + b;
}

// What bounds OPT(i, l, .) for every interval, whatever the budget:
// * need: the least m at which OPT(i, l, m) is finite (`persistent_need`);
// * store: the least m at which the sub-schedule without recomputation (F_all(i .. l-1), each
//   stage with its fastest option `model::fastest`, then the backwards) fits with g_{l+1} held:
//   store(L, L) = x[L] + bt[L], store(i, i) = the tape ops of stage i, store(i, l) = max(tape ops
//   of stage i with g_{l+1}, xb[i+1] + store(i+1, l)); `unreachable` for i < l without the tape
//   branch, where no schedule avoids recomputation;
// * S: that sub-schedule's time, fb[i] + S(i+1, l) (fb = fw + bw with one option), summed in the
//   order of the tape branch. Every schedule of the interval runs each stage's F_all(k, o) and
//   B(k) at least once, so in exact arithmetic S <= OPT(i, l, m) for every m, with equality from
//   store on. The DPs use both facts as rules (see `reference_cell`).
struct interval_bounds {
  std::vector<size_type> need;  // [interval]
  std::vector<size_type> store;
  std::vector<double> S;
};

// The last m at which the DPs store OPT(i, l, m) for interval c in a table up to M: from store on
// it is S (never, without the tape branch, where store is `unreachable`). Below `b.need[c]` when
// nothing is stored.
constexpr size_type stored_top(const interval_bounds& b, std::size_t c, size_type M) noexcept {
  return b.store[c] == unreachable ? M : std::min(b.store[c] - 1, M);
}

constexpr interval_bounds make_interval_bounds(const model& md, std::vector<size_type> need,
                                               dp_branches branches) {
  const std::int32_t L = md.L;
  auto at = [](std::int32_t k) { return static_cast<std::size_t>(k); };
  interval_bounds b;
  b.need = std::move(need);
  b.store.assign(interval_count(L), 0);
  b.S.assign(interval_count(L), 0);
  for (std::int32_t l = 0; l <= L; ++l) {
    for (std::int32_t i = l; i >= 0; --i) {
      const std::size_t c = interval_index(L, i, l);
      if (i == L) {
        b.store[c] = loss_need(md);
        b.S[c] = md.loss_time;
        continue;
      }
      // The tape branch (the base case for i = l) with the fastest option: its time is fb[i].
      const tape_branch tape = tape_branch_of(md, i, l, md.options(i)[md.fastest[at(i)]]);
      if (i == l) {
        b.store[c] = tape.own;
        b.S[c] = tape.time;
      } else {
        const std::size_t rest = interval_index(L, i + 1, l);
        b.store[c] =
            branches == dp_branches::tape_and_checkpoint ? tape.need(b.store[rest]) : unreachable;
        b.S[c] = tape.value(b.S[rest]);
      }
    }
  }
  return b;
}

}  // namespace remat::detail
