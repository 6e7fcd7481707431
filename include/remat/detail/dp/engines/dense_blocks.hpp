// The dense DP's kernel on one cell's blocks of m (engines/dense.hpp, "Exact pruning"): where a
// block starts and ends, the block tests as bit masks (AVX2 where the build or the CPU has it),
// a branch's run over a range of m, and keeping best non-increasing with its block maxima. The
// tile's walk over cells and split points (engines/dense_kernel.hpp) calls these in its loops.
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/dp/branches.hpp>
#include <remat/detail/dp/engines/dense_table.hpp>
#include <remat/detail/dp/engines/dense_tile.hpp>
#include <remat/detail/dp/intervals.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

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

namespace remat::detail::dense {

// The first and the last m of the cell's block q (counted from its first block), within [a, b].
inline size_type block_lo(const cell_state& cs, std::size_t q) noexcept {
  return std::max(cs.a, (cs.a / block + static_cast<size_type>(q)) * block);
}
inline size_type block_hi(const cell_state& cs, std::size_t q) noexcept {
  return std::min(cs.b, (cs.a / block + static_cast<size_type>(q)) * block + block - 1);
}

#if REMAT_DETAIL_AVX2_MASK
// The bits of k < n, n a multiple of 4.
REMAT_DETAIL_AVX2_TARGET inline std::uint64_t below_mask_avx2(const double* r, const double* lf,
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

// Bit k (k < n <= 64) set when checkpoint_value(acc, r[k], lf[k]) < bar[k]: with AVX2, 4 at a
// time up to the last whole 4 (the same additions in the same order), the rest one by one.
template <bool Avx2>
[[gnu::always_inline]] inline std::uint64_t below_mask(const double* r, const double* lf,
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
  for (; k < n; ++k)
    bits |= static_cast<std::uint64_t>(checkpoint_value(acc, r[k], lf[k]) < bar[k]) << k;
  return bits;
}

#if REMAT_DETAIL_AVX2_MASK
// all_below, with AVX2.
REMAT_DETAIL_AVX2_TARGET inline bool all_below_avx2(const double* least, const std::int64_t* arg,
                                                    std::int64_t top) noexcept {
  const __m256d finite =
      _mm256_cmp_pd(_mm256_loadu_pd(least), _mm256_set1_pd(infinite_time), _CMP_LT_OQ);
  const __m256i above = _mm256_cmpgt_epi64(
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(arg)), _mm256_set1_epi64x(top));
  return _mm256_movemask_pd(finite) == 15 && _mm256_testz_si256(above, above) != 0;
}
#endif

// Whether least[0..3] are finite and arg[0..3] <= top.
template <bool Avx2>
[[gnu::always_inline]] inline bool all_below(const double* least, const std::int64_t* arg,
                                             std::int64_t top) noexcept {
#if REMAT_DETAIL_AVX2_MASK
  if constexpr (Avx2) return all_below_avx2(least, arg, top);
#endif
  bool pass = true;
  for (int u = 0; u < 4; ++u) pass &= least[u] < infinite_time && arg[u] <= top;
  return pass;
}

// Keeps best non-increasing in m after a run that ended at m = hi, and the block maxima up to
// date from block q on (the run's first block). Past hi, best falls to
// best(hi) until it is lower. Exact: a value lowered so is the value of a branch at a smaller m,
// never below the least branch value at m (each branch is non-increasing); where the least
// branch is pruned its bound was at or above best there, so it is never lost.
[[gnu::always_inline]] inline void settle(cell_state& cs, std::size_t q, size_type hi) noexcept {
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
[[gnu::always_inline]] inline void block_maxima(cell_state& cs) noexcept {
  for (std::size_t q = 0; q < cs.blocks; ++q) cs.block_best[q] = cs.best[block_lo(cs, q) - cs.a];
}

// Branch `br` over m in [p, q], a <= p: split where either side becomes its constant.
[[gnu::always_inline]] inline void run_parts(const branch& br, size_type a, size_type p,
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

}  // namespace remat::detail::dense
