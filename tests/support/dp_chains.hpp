// Chains and memories for the DP tests (detail/dp/): random chains, half of them with options per
// stage, a third one or two stages repeated (so that intervals pose equal problems, which the
// frontier DP shares), and a memory past which no DP value changes.
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/dp/model.hpp>

#include "random_chain.hpp"

#include <cstddef>
#include <limits>
#include <random>

namespace remat::testing {

inline chain dp_test_chain(std::mt19937_64& rng, const random_chain_options& o) {
  chain c = random_chain(rng, o);
  // Half the chains give their stages 1 to 4 options each (every engine takes the least over
  // them).
  if (std::uniform_int_distribution<int>(0, 1)(rng) == 0)
    add_random_options(rng, c, 4, o.max_size);
  if (std::uniform_int_distribution<int>(0, 2)(rng) == 0 && c.length() > 2) {
    const std::size_t period = std::uniform_int_distribution<std::size_t>(1, 2)(rng);
    for (std::size_t k = period; k < c.length(); ++k) c.stages[k] = c.stages[k % period];
  }
  return c;
}

// A memory past which nothing changes: every size of the model held at once, plus one; -1 where
// that passes `most` (fuzzed sizes reach 2^62, whose sums overflow).
inline size_type everything(const detail::model& md,
                            size_type most = std::numeric_limits<size_type>::max()) {
  size_type total = 1;
  bool over = false;
  detail::for_each_size(md, [&](size_type s) {
    if (over || s > most - total) {
      over = true;
      return;
    }
    total += s;
  });
  return over ? -1 : total;
}

}  // namespace remat::testing
