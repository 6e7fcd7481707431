// The ops of the store-all schedule (F_all every stage, the loss, every backward): the store-all
// solver's, the fastest schedule of the DP with the tape branch, and a reference for the sweeps,
// the exhaustive search's bounds and the tools. Users get it from `solve_store_all`.
#pragma once

#include <remat/schedule.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace remat::detail {

constexpr std::vector<op> store_all_ops(std::int32_t length) {
  std::vector<op> ops;
  ops.reserve(2 * static_cast<std::size_t>(length) + 1);
  for (std::int32_t k = 0; k < length; ++k) ops.push_back(f_all(k));
  ops.push_back(loss_op(length));
  for (std::int32_t k = length - 1; k >= 0; --k) ops.push_back(backward(k));
  return ops;
}

}  // namespace remat::detail
