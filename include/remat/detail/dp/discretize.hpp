// Turning a byte budget into integer memory slots (MODEL.md, "Discretization").
#pragma once

#include <remat/solver_options.hpp>

namespace remat::detail {

struct discretization {
  size_type unit = 1;    // bytes per slot
  size_type budget = 0;  // the budget in whole slots, floor(budget / unit)
};

// unit = ceil(budget / slots) (at least 1), budget in slots = floor(budget / unit).
// `exact_units` keeps the sizes as given.
constexpr discretization discretize(size_type budget, size_type slots) {
  if (budget < 0) throw_solver_error("the budget must be >= 0");
  if (slots < 0) throw_solver_error("slots must be > 0 (or exact_units)");
  if (slots == exact_units) return {1, budget};
  const size_type unit = budget / slots + (budget % slots != 0 ? 1 : 0);
  if (unit <= 1) return {1, budget};
  return {unit, budget / unit};
}

}  // namespace remat::detail
