// Turning a byte budget into integer memory slots (docs/model.md, "Slots and exact units").
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/dp/least_memory.hpp>
#include <remat/detail/dp/model.hpp>
#include <remat/solver_options.hpp>

#include <algorithm>
#include <limits>

namespace remat::detail {

struct discretization {
  size_type unit = 1;    // bytes per slot
  size_type budget = 0;  // the budget in whole slots, floor(budget / unit)
};

// unit = ceil(budget / slots) (at least 1), budget in slots = floor(budget / unit).
// `exact_units` keeps the sizes as given.
constexpr discretization discretize(size_type budget, size_type slots) {
  if (budget < 0) throw_solver_error("the budget must be >= 0");
  if (slots < 0) throw_solver_error("slots must be > 0 (or exact_units, or auto_slots)");
  if (slots == exact_units) return {1, budget};
  const size_type unit = budget / slots + (budget % slots != 0 ? 1 : 0);
  if (unit <= 1) return {1, budget};
  return {unit, budget / unit};
}

// The smallest byte budget at which the problem discretized into `slots` = N units is feasible,
// or `no_budget`. Budgets in ((u-1)N, uN] all use the unit u (the first band, [0, N], unit 1),
// and with unit u a budget B is feasible exactly when floor(B / u) >= Need(u), the least budget
// in units of the chain rounded to u. Need(u) never increases with u (rounded sizes do not), so
// the answer lies in the band of the least u with Need(u) <= N, found by bisection, at
// max(band start, u * Need(u)). Exact: no monotonicity in B is assumed. `exact` is Need(1),
// `persistent_min_budget` on the chain's own sizes (the caller has it).
constexpr size_type slots_min_budget(const chain& c, size_type slots, size_type exact,
                                     dp_branches branches) {
  auto need = [&](size_type unit) { return persistent_min_budget(make_model(c, unit), branches); };
  auto fits = [&](size_type unit) {
    const size_type n = need(unit);
    return n != unreachable && n <= slots;
  };
  // Beyond the largest size every nonzero size is one unit: Need(u) no longer changes.
  size_type largest = std::max(c.input_size, c.loss_overhead);
  for (const stage& s : c.stages) {
    largest = std::max({largest, s.tape_size, s.forward_overhead, s.backward_overhead,
                        s.recording_overhead.value_or(0)});
    for (const stage_option& o : s.options)
      largest = std::max({largest, o.tape_size, o.forward_overhead, o.backward_overhead});
  }
  size_type hi = std::max<size_type>(1, largest);
  if (!fits(hi)) return solve_result::no_budget;
  // Need(u) * u >= Need(1), so no u below Need(1) / N can fit.
  size_type lo = std::max<size_type>(1, exact / slots);
  if (fits(lo)) {
    hi = lo;
  } else {
    while (hi - lo > 1) {  // fits(hi), !fits(lo)
      const size_type mid = lo + (hi - lo) / 2;
      (fits(mid) ? hi : lo) = mid;
    }
  }
  const size_type unit = hi;
  // The band must hold a representable budget (budgets go up to 2^63 - 1).
  if (unit > std::numeric_limits<size_type>::max() / slots) return solve_result::no_budget;
  const size_type band_start = unit == 1 ? 0 : (unit - 1) * slots + 1;
  return std::max(band_start, unit * need(unit));
}

}  // namespace remat::detail
