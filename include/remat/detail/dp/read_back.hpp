// A schedule read back from per-cell choices, whichever engine made them.
#pragma once

#include <remat/detail/dp/intervals.hpp>
#include <remat/detail/dp/model.hpp>
#include <remat/schedule.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace remat::detail {

// The schedule of cell (i, l, m), without recursion (chains can be long). `choice_of(i, l, m)`
// gives the cell's choice in the encoding of `reference_table::choice`.
template <class ChoiceOf>
constexpr std::vector<op> persistent_ops(const model& md, std::int32_t i, std::int32_t l,
                                         size_type m, ChoiceOf choice_of) {
  struct task {
    bool emit;  // emit `o`, or expand (i, l, m)
    op o;
    std::int32_t i, l;
    size_type m;
  };
  std::vector<op> ops;
  std::vector<task> stack{{false, {}, i, l, m}};
  while (!stack.empty()) {
    const task tk = stack.back();
    stack.pop_back();
    if (tk.emit) {
      ops.push_back(tk.o);
      continue;
    }
    const std::int32_t c = choice_of(tk.i, tk.l, tk.m);
    if (tk.i == md.L) {
      ops.push_back(loss_op(md.L));
    } else if (tk.i == tk.l) {
      ops.push_back(f_all(tk.i));
      ops.push_back(backward(tk.i));
    } else if (c == 0) {
      ops.push_back(f_all(tk.i));
      stack.push_back({true, backward(tk.i), 0, 0, 0});
      stack.push_back(
          {false, {}, tk.i + 1, tk.l, tk.m - md.xb[static_cast<std::size_t>(tk.i) + 1]});
    } else {
      ops.push_back(f_ck(tk.i));
      for (std::int32_t k = tk.i + 1; k < c; ++k) ops.push_back(f_none(k));
      stack.push_back({false, {}, tk.i, c - 1, tk.m});
      stack.push_back({false, {}, c, tk.l, tk.m - md.x[static_cast<std::size_t>(c)]});
    }
  }
  return ops;
}

// The dense DP's choice at cell (i, l, m), finite there (`reference_cell`: the tape branch on a
// tie, then the smallest j), recomputed from the cells' values `value_of(i, l, m)`; -1 where no
// branch reaches the cell's value. Where an engine's values are the dense DP's bit for bit (sums
// exact, `model::exact_sums`), its schedule read back with these choices is the dense DP's: every
// engine then gives the same schedule at a budget, not just the same makespan.
template <class ValueOf>
constexpr std::int32_t dense_choice(const model& md, dp_branches branches, std::int32_t i,
                                    std::int32_t l, size_type m, ValueOf value_of) {
  auto at = [](std::int32_t k) { return static_cast<std::size_t>(k); };
  if (i == md.L || i == l) return 0;
  const double target = value_of(i, l, m);
  if (branches == dp_branches::tape_and_checkpoint && m >= tape_ops_memory(md, i, l) &&
      m >= md.xb[at(i + 1)]) {
    const double rest = value_of(i + 1, l, m - md.xb[at(i + 1)]);
    if (rest < infinite_time && md.fw[at(i)] + md.bw[at(i)] + rest == target) return 0;
  }
  double forward = 0;
  size_type forwards = 0;
  for (std::int32_t j = i + 1; j <= l; ++j) {
    forward += md.fw[at(j - 1)];
    forwards = j == i + 1 ? md.x[at(i + 1)] + md.ft[at(i)]
                          : std::max(forwards, md.x[at(j - 1)] + md.x[at(j)] + md.ft[at(j - 1)]);
    if (m < md.x[at(l + 1)] + forwards) break;
    if (m < md.x[at(j)]) continue;
    const double right = value_of(j, l, m - md.x[at(j)]);
    if (!(right < infinite_time)) continue;
    const double left = value_of(i, j - 1, m);
    if (left < infinite_time && forward + right + left == target) return j;
  }
  return -1;
}

}  // namespace remat::detail
