// Where to cut a chain into K blocks (remat::coarsen's boundary rules).
//
// `least_loss`: a coarse chain loses against the fine one in two ways. Its checkpoints can sit
// only at block boundaries, and its merged overheads (block.hpp) are worst cases over the block's
// stages. Both hurt least when the blocks are balanced and cut where activations are small. So
// the cuts minimise, over every partition into K blocks of at most twice the average length:
//
//   1. the largest block `need` (the least memory in which the block runs as one coarse stage:
//      input, output gradient, whole tape and merged overhead). It bounds the coarse chain's
//      least feasible budget from below, so this keeps the budgets the fine chain could meet
//      within reach;
//   2. among the partitions reaching that, the sum of the activations at the cuts: the coarse
//      chain's checkpoints can only be those, so small ones leave it the most room. (The
//      alternatives, the sum of the needs, or the cut activations without step 1, lose makespan
//      on some networks: benchmarks/coarsen_quality.cpp, benchmarks/README.md.)
//
// Two exact dynamic programs over cut points (min-max, then min-sum under the bound), each
// O(K * L * W) with W = 2 ceil(L / K) the longest block allowed, that is O(L^2) whatever K,
// each step a lookup in a table of the blocks' needs (timed by benchmarks/coarsen_quality.cpp).
// The length bound keeps blocks balanced in stage count too
// (the coarse solver's freedom comes from the number of boundaries, not from where the mass is).
//
// `even`: block b holds stages floor(b L / K) .. floor((b + 1) L / K) - 1.
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/coarsen/block.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace remat::detail {

// The first fine stage of each of K blocks, then L.
constexpr std::vector<std::int32_t> even_starts(std::int32_t L, std::int32_t K) {
  std::vector<std::int32_t> starts(static_cast<std::size_t>(K) + 1);
  for (std::int32_t b = 0; b <= K; ++b)
    starts[static_cast<std::size_t>(b)] =
        static_cast<std::int32_t>(static_cast<std::int64_t>(b) * L / K);
  return starts;
}

// The most entries of least_loss_starts' table of block needs: 8M, 64 MB.
inline constexpr std::int64_t max_need_table = std::int64_t{1} << 23;

// The two programs of `least_loss` over the partitions of a validated chain into K blocks of
// 1 .. W stages: block k (1-based) ends at e in [lo(k), hi(k)] (k blocks before it, K - k after).
class least_loss_partition {
 public:
  static constexpr size_type none = std::numeric_limits<size_type>::max();

  constexpr least_loss_partition(const chain& c, std::int32_t K, std::int64_t max_table)
      : c_(c),
        L_(static_cast<std::int32_t>(c.length())),
        K_(K),
        W_(2 * ((L_ + K - 1) / K)),
        tabled_(static_cast<std::int64_t>(L_) * W_ <= max_table) {
    if (!tabled_) return;
    table_.resize(static_cast<std::size_t>(L_) * static_cast<std::size_t>(W_));
    for (std::int32_t e = 1; e <= L_; ++e) {
      block_builder b(c_, e);
      while (b.start() > std::max(0, e - W_)) {
        b.prepend();
        table_[cell(b.start(), e)] = b.need();
      }
    }
  }

  // 1. min over partitions of the largest need.
  [[nodiscard]] constexpr size_type least_largest_need() const {
    std::vector<size_type> prev(at(L_) + 1, none), cur(at(L_) + 1, none);
    prev[0] = 0;
    for (std::int32_t k = 1; k <= K_; ++k) {
      std::fill(cur.begin(), cur.end(), none);
      for (std::int32_t e = lo(k); e <= hi(k); ++e) {
        size_type& best = cur[at(e)];
        scan(e, first(k, e), [&](std::int32_t s, size_type need) {
          const size_type before = prev[at(s)];
          if (before != none) best = std::min(best, std::max(before, need));
        });
      }
      std::swap(prev, cur);
    }
    return prev[at(L_)];
  }

  // 2. min of the sum of cut activations over partitions whose blocks all need <= bound. Sums in
  // double: they only rank partitions. Choices are kept per block count, over each one's range
  // of ends. (x[0] starts every partition: a constant.) Returns the block starts, then L.
  [[nodiscard]] constexpr std::vector<std::int32_t> least_cut_sum(size_type bound) const {
    constexpr double inf = std::numeric_limits<double>::infinity();
    std::vector<double> sum_prev(at(L_) + 1, inf), sum_cur(at(L_) + 1);
    sum_prev[0] = 0;
    std::vector<std::vector<std::int32_t>> choice(static_cast<std::size_t>(K_) + 1);
    for (std::int32_t k = 1; k <= K_; ++k) {
      std::fill(sum_cur.begin(), sum_cur.end(), inf);
      std::vector<std::int32_t>& from = choice[static_cast<std::size_t>(k)];
      from.assign(static_cast<std::size_t>(hi(k) - lo(k)) + 1, -1);
      for (std::int32_t e = lo(k); e <= hi(k); ++e)
        scan(e, first(k, e), [&](std::int32_t s, size_type need) {
          const double before = sum_prev[at(s)];
          if (need > bound || !(before < inf)) return;
          const double total = before + static_cast<double>(activation(s));
          if (total < sum_cur[at(e)]) {
            sum_cur[at(e)] = total;
            from[static_cast<std::size_t>(e - lo(k))] = s;
          }
        });
      std::swap(sum_prev, sum_cur);
    }
    std::vector<std::int32_t> starts(static_cast<std::size_t>(K_) + 1);
    starts[static_cast<std::size_t>(K_)] = L_;
    for (std::int32_t k = K_; k >= 1; --k) {
      const std::int32_t e = starts[static_cast<std::size_t>(k)];
      starts[static_cast<std::size_t>(k - 1)] =
          choice[static_cast<std::size_t>(k)][static_cast<std::size_t>(e - lo(k))];
    }
    return starts;
  }

 private:
  [[nodiscard]] constexpr std::int32_t lo(std::int32_t k) const {
    return std::max(k, L_ - (K_ - k) * W_);
  }
  [[nodiscard]] constexpr std::int32_t hi(std::int32_t k) const {
    return std::min(k * W_, L_ - (K_ - k));
  }
  // The earliest start of block k ending at e.
  [[nodiscard]] constexpr std::int32_t first(std::int32_t k, std::int32_t e) const {
    return std::max(k == 1 ? 0 : lo(k - 1), e - W_);
  }
  static constexpr std::size_t at(std::int32_t e) { return static_cast<std::size_t>(e); }
  [[nodiscard]] constexpr size_type activation(std::int32_t k) const {
    return k == 0 ? c_.input_size : c_.stages[static_cast<std::size_t>(k - 1)].output_size;
  }
  [[nodiscard]] constexpr std::size_t cell(std::int32_t s, std::int32_t e) const {
    return static_cast<std::size_t>(e - 1) * static_cast<std::size_t>(W_) +
           static_cast<std::size_t>(e - 1 - s);
  }
  // `visit(s, need)` for the blocks [s, e), s from e - 1 down to `first`. Both programs need
  // every block of at most W stages once per block count: their needs are computed once into a
  // table of L x W (up to max_table entries; above, with few long blocks, recomputed).
  template <class Visit>
  constexpr void scan(std::int32_t e, std::int32_t first_start, Visit&& visit) const {
    if (tabled_) {
      for (std::int32_t s = e - 1; s >= first_start; --s) visit(s, table_[cell(s, e)]);
      return;
    }
    block_builder b(c_, e);
    while (b.start() > first_start) {
      b.prepend();
      visit(b.start(), b.need());
    }
  }

  const chain& c_;
  std::int32_t L_, K_, W_;
  bool tabled_;
  std::vector<size_type> table_;
};

// The block starts of the least-loss partition of validated chain `c` into K blocks (1 <= K <=
// L), then L. `max_table` caps the table of block needs (the tests lower it to check the path
// without it).
constexpr std::vector<std::int32_t> least_loss_starts(const chain& c, std::int32_t K,
                                                      std::int64_t max_table = max_need_table) {
  const auto L = static_cast<std::int32_t>(c.length());
  if (K == L || K == 1) return even_starts(L, K);
  const least_loss_partition p(c, K, max_table);
  return p.least_cut_sum(p.least_largest_need());
}

}  // namespace remat::detail
