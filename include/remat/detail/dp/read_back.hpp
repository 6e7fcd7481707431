// A schedule read back from per-cell choices, whichever engine made them.
#pragma once

#include <remat/detail/dp/branches.hpp>
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
      const branch_part rest = tape_branch_of(md, tk.i, tk.l, o).rest();
      stack.push_back({true, backward(tk.i), 0, 0, 0});
      stack.push_back({false, {}, rest.i, rest.l, rest.memory(tk.m)});
    } else {
      // F_ck(i), F_none(i+1) .. F_none(j-1): the walk's forwards up to split point j = c.
      checkpoint_walk w(md, tk.i, tk.l);
      ops.push_back(f_ck(tk.i));
      for (; w->j < c; w.next()) ops.push_back(f_none(w->j));
      const branch_part left = w->left();
      const branch_part right = w->right();
      stack.push_back({false, {}, left.i, left.l, left.memory(tk.m)});
      stack.push_back({false, {}, right.i, right.l, right.memory(tk.m)});
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
  if (i == md.L) return 0;
  const double target = value_of(i, l, m);
  auto value = [&](const branch_part& p) { return value_of(p.i, p.l, p.memory(m)); };
  if (i == l) {
    const std::span<const tape_option> options = md.options(i);
    std::int32_t fits = 0;  // where no option reaches the value: the first that fits
    for (std::size_t p = options.size(); p-- > 0;)
      if (m >= tape_branch_of(md, i, i, options[p]).own) fits = tape_choice(p);
    for (std::size_t p = 0; p < options.size(); ++p) {
      const tape_branch base = tape_branch_of(md, i, i, options[p]);
      if (m >= base.own && base.time == target) return tape_choice(p);
    }
    return fits;
  }
  std::int32_t found = -1;
  for_each_branch_within(
      md, branches, i, l, m,
      [&](std::size_t p, const tape_branch& b) {
        const double rest = value(b.rest());
        if (rest < infinite_time && b.value(rest) == target) found = tape_choice(p);
        return found == -1;  // a tape choice is never -1
      },
      [&](const checkpoint_branch& b) {
        const double right = value(b.right());
        if (!(right < infinite_time)) return true;
        const double left = value(b.left());
        if (left < infinite_time && b.value(right, left) == target) found = b.j;
        return found == -1;
      });
  return found;
}

}  // namespace remat::detail
