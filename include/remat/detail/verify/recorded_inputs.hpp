// Whether a schedule drops an activation that a held tape was recorded from. The model lets
// F_none(k) drop a_k while t_{k+1} is held (B(k) then needs a_k re-made), but in a framework the
// recording of t_{k+1} holds a_k (autograd saves a stage's input for its backward): the drop
// frees nothing, and the step would peak above the schedule's prediction. No solver of remat
// returns such a schedule (the exhaustive searches leave the op out; the others never make it);
// the executors refuse one.
#pragma once

#include <remat/schedule.hpp>

#include <cstddef>
#include <span>
#include <vector>

namespace remat::detail {

// The index of the first op of `ops` that is F_none(k) while t_{k+1} is held (on the device or
// the host), or `ops.size()` where there is none. `length` is the chain's.
inline std::size_t first_drop_of_recorded_input(std::span<const op> ops, std::size_t length) {
  std::vector<char> tape(length + 2, 0);  // [k]: t_k is held somewhere
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const op& o = ops[i];
    if (o.stage < 0 || static_cast<std::size_t>(o.stage) >= length) continue;
    const auto above = static_cast<std::size_t>(o.stage) + 1;
    if (o.kind == op_kind::forward_all) tape[above] = 1;
    if (o.kind == op_kind::backward) tape[above] = 0;
    if (o.kind == op_kind::forward_none && tape[above] != 0) return i;
  }
  return ops.size();
}

}  // namespace remat::detail
