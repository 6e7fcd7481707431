// The homogeneous chain of docs/model.md and Griewank & Walther's binomial count, the oracle the
// checkpointing solvers are tested against.
#pragma once

#include <remat/chain.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace remat::testing {

// fw = 1, bw = 0, x = xb = 1, no overheads, input of size 1.
constexpr chain homogeneous(std::int32_t length) {
  chain c;
  c.input_size = 1;
  c.stages.assign(static_cast<std::size_t>(length), stage{1, 0, 1, 1, 0, 0});
  return c;
}

// C(n, k), 0 outside 0 <= k <= n.
constexpr std::int64_t binomial(std::int64_t n, std::int64_t k) {
  if (k < 0 || k > n) return 0;
  k = std::min(k, n - k);
  std::int64_t c = 1;
  for (std::int64_t i = 1; i <= k; ++i) c = c * (n - k + i) / i;
  return c;
}

// t(l, s) = r l - C(s + r, s + 1), r the least with C(s + r, s) >= l: the least number of forward
// steps to reverse l steps with s snapshots (Griewank & Walther, Algorithm 799); -1 for s = 0 and
// l >= 2, where nothing can be reversed.
constexpr std::int64_t binomial_count(std::int64_t l, std::int64_t s) {
  if (s == 0) return l <= 1 ? 0 : -1;
  std::int64_t r = 0;
  while (binomial(s + r, s) < l) ++r;
  return r * l - binomial(s + r, s + 1);
}

}  // namespace remat::testing
