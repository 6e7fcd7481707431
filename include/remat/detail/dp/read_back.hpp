// A schedule read back from per-cell choices, whichever engine made them.
#pragma once

#include <remat/detail/dp/intervals.hpp>
#include <remat/detail/dp/model.hpp>
#include <remat/schedule.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
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
    } else if (is_tape_choice(c)) {
      const tape_option& o = md.options(tk.i)[option_of_choice(c)];
      ops.push_back(f_all(tk.i, o.index));
      if (tk.i == tk.l) {
        ops.push_back(backward(tk.i));
        continue;
      }
      stack.push_back({true, backward(tk.i), 0, 0, 0});
      stack.push_back({false, {}, tk.i + 1, tk.l, tk.m - o.xb});
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
// tie, its first option reaching the value, then the smallest j), recomputed from the cells'
// values `value_of(i, l, m)`; -1 where no branch reaches the cell's value. Where an engine's values are the dense DP's bit for bit (sums
// exact, `model::exact_sums`), its schedule read back with these choices is the dense DP's: every
// engine then gives the same schedule at a budget, not just the same makespan.
template <class ValueOf>
constexpr std::int32_t dense_choice(const model& md, dp_branches branches, std::int32_t i,
                                    std::int32_t l, size_type m, ValueOf value_of) {
  auto at = [](std::int32_t k) { return static_cast<std::size_t>(k); };
  if (i == md.L) return 0;
  const double target = value_of(i, l, m);
  const std::span<const tape_option> options = md.options(i);
  if (i == l) {
    std::int32_t fits = 0;  // where no option reaches the value: the first that fits
    for (std::size_t p = options.size(); p-- > 0;)
      if (m >= tape_ops_memory(md, i, l, options[p])) fits = tape_choice(p);
    for (std::size_t p = 0; p < options.size(); ++p)
      if (m >= tape_ops_memory(md, i, l, options[p]) && options[p].fw + options[p].bw == target)
        return tape_choice(p);
    return fits;
  }
  if (branches == dp_branches::tape_and_checkpoint) {
    for (std::size_t p = 0; p < options.size(); ++p) {
      const tape_option& o = options[p];
      if (m < tape_ops_memory(md, i, l, o) || m < o.xb) continue;
      const double rest = value_of(i + 1, l, m - o.xb);
      if (rest < infinite_time && o.fw + o.bw + rest == target) return tape_choice(p);
    }
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
