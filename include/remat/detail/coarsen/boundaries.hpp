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

// The block starts of the least-loss partition of validated chain `c` into K blocks (1 <= K <=
// L), then L. `max_table` caps the table of block needs (the tests lower it to check the path
// without it).
constexpr std::vector<std::int32_t> least_loss_starts(const chain& c, std::int32_t K,
                                                      std::int64_t max_table = max_need_table) {
  const auto L = static_cast<std::int32_t>(c.length());
  if (K == L || K == 1) return even_starts(L, K);
  const std::int32_t W = 2 * ((L + K - 1) / K);
  // Block k (1-based) of a partition ends at e in [lo(k), hi(k)]: k blocks of length 1 .. W
  // before it, K - k after it.
  auto lo = [&](std::int32_t k) { return std::max(k, L - (K - k) * W); };
  auto hi = [&](std::int32_t k) { return std::min(k * W, L - (K - k)); };
  auto at = [](std::int32_t e) { return static_cast<std::size_t>(e); };
  auto activation = [&](std::int32_t k) {
    return k == 0 ? c.input_size : c.stages[static_cast<std::size_t>(k - 1)].output_size;
  };
  constexpr size_type none = std::numeric_limits<size_type>::max();

  // `visit(s, need)` for the blocks [s, e), s from e - 1 down to `first`. Both programs need
  // every block of at most W stages once per block count: their needs are computed once into a
  // table of L x W (up to max_table entries; above, with few long blocks, recomputed).
  const bool tabled = static_cast<std::int64_t>(L) * W <= max_table;
  std::vector<size_type> table;
  auto cell = [&](std::int32_t s, std::int32_t e) {
    return static_cast<std::size_t>(e - 1) * static_cast<std::size_t>(W) +
           static_cast<std::size_t>(e - 1 - s);
  };
  if (tabled) {
    table.resize(static_cast<std::size_t>(L) * static_cast<std::size_t>(W));
    for (std::int32_t e = 1; e <= L; ++e) {
      block_builder b(c, e);
      while (b.start() > std::max(0, e - W)) {
        b.prepend();
        table[cell(b.start(), e)] = b.need();
      }
    }
  }
  auto scan = [&](std::int32_t e, std::int32_t first, auto&& visit) {
    if (tabled) {
      for (std::int32_t s = e - 1; s >= first; --s) visit(s, table[cell(s, e)]);
      return;
    }
    block_builder b(c, e);
    while (b.start() > first) {
      b.prepend();
      visit(b.start(), b.need());
    }
  };

  // 1. min over partitions of the largest need.
  std::vector<size_type> prev(at(L) + 1, none), cur(at(L) + 1, none);
  prev[0] = 0;
  for (std::int32_t k = 1; k <= K; ++k) {
    std::fill(cur.begin(), cur.end(), none);
    for (std::int32_t e = lo(k); e <= hi(k); ++e) {
      const std::int32_t first = std::max(k == 1 ? 0 : lo(k - 1), e - W);
      size_type& best = cur[at(e)];
      scan(e, first, [&](std::int32_t s, size_type need) {
        const size_type before = prev[at(s)];
        if (before != none) best = std::min(best, std::max(before, need));
      });
    }
    std::swap(prev, cur);
  }
  const size_type bound = prev[at(L)];

  // 2. min of the sum of cut activations over partitions whose blocks all need <= bound. Sums in
  // double: they only rank partitions. Choices are kept per block count, over each one's range
  // of ends. (x[0] starts every partition: a constant.)
  std::vector<double> sum_prev(at(L) + 1, std::numeric_limits<double>::infinity());
  std::vector<double> sum_cur(sum_prev.size());
  sum_prev[0] = 0;
  std::vector<std::vector<std::int32_t>> choice(static_cast<std::size_t>(K) + 1);
  for (std::int32_t k = 1; k <= K; ++k) {
    std::fill(sum_cur.begin(), sum_cur.end(), std::numeric_limits<double>::infinity());
    std::vector<std::int32_t>& from = choice[static_cast<std::size_t>(k)];
    from.assign(static_cast<std::size_t>(hi(k) - lo(k)) + 1, -1);
    for (std::int32_t e = lo(k); e <= hi(k); ++e) {
      const std::int32_t first = std::max(k == 1 ? 0 : lo(k - 1), e - W);
      scan(e, first, [&](std::int32_t s, size_type need) {
        const double before = sum_prev[at(s)];
        if (need > bound || !(before < std::numeric_limits<double>::infinity())) return;
        const double total = before + static_cast<double>(activation(s));
        if (total < sum_cur[at(e)]) {
          sum_cur[at(e)] = total;
          from[static_cast<std::size_t>(e - lo(k))] = s;
        }
      });
    }
    std::swap(sum_prev, sum_cur);
  }
  std::vector<std::int32_t> starts(static_cast<std::size_t>(K) + 1);
  starts[static_cast<std::size_t>(K)] = L;
  for (std::int32_t k = K; k >= 1; --k) {
    const std::int32_t e = starts[static_cast<std::size_t>(k)];
    starts[static_cast<std::size_t>(k - 1)] =
        choice[static_cast<std::size_t>(k)][static_cast<std::size_t>(e - lo(k))];
  }
  return starts;
}

}  // namespace remat::detail
