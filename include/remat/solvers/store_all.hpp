// Store-all: F_all every stage, the loss, then every backward. No recomputation, so the least
// time (sum fw + sum bw) and the most memory; the reference the other solvers are compared with.
#pragma once

#include <remat/chain.hpp>
#include <remat/concepts.hpp>
#include <remat/detail/store_all_ops.hpp>
#include <remat/detail/verify/finish.hpp>
#include <remat/schedule.hpp>
#include <remat/simulate.hpp>
#include <remat/solver_options.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace remat {

/// The store-all schedule when its peak fits `budget` (with `options.in_flight` = K, its peak
/// plus K - 1 times what it holds at the loss); that need is `min_feasible_budget` either way.
/// Sizes are used as given (no discretization).
template <chain_like C>
constexpr solve_result solve_store_all(const C& chain_in, size_type budget,
                                       const solve_options& options = {}) {
  const chain c = to_chain(chain_in);
  if (budget < 0) detail::throw_solver_error("the budget must be >= 0");
  std::vector<op> ops = detail::store_all_ops(static_cast<std::int32_t>(c.length()));
  const replay_result r = detail::replay(c, ops);
  const size_type need =
      r.peak_memory + static_cast<size_type>(std::max<std::size_t>(options.in_flight, 1) - 1) *
                          r.retained;
  if (need > budget) {
    solve_result out;
    out.budget = budget;
    out.min_feasible_budget = need;
    return out;
  }
  solve_result out = detail::finish(c, solver::store_all, budget, std::move(ops), r.makespan);
  out.min_feasible_budget = need;
  return out;
}

namespace detail {
// `solver::store_all`'s row: its solve (no DP over memory: nothing to estimate).
template <>
struct solver_entry<solver::store_all> : entry<&solve_store_all<chain>> {};
}  // namespace detail

}  // namespace remat
