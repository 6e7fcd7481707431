// Min-memory: the persistent schedule of least peak memory, and with it the smallest budget at
// which any persistent schedule exists, without bisection.
//
// It is MODEL.md's DP with no memory dimension (`detail::least_peak_dp`): for every interval
// (i, l), the least m at which OPT(i, l, m) is finite, over the same branches and with the same
// exact conditions, in O(L^3). Every condition of the DP is the peak of an op the schedule runs,
// so the peak of the schedule it builds, replayed, is exactly that least budget (`x[0]` plus the
// need of (0, L)), which is `persistent_min_budget` and what bisection on `optimal`'s feasibility
// finds on exact sizes. Among the choices of least peak at an interval it keeps the fastest
// (ties to the tape branch, then the smallest j); that is a tie-break, not the fastest schedule
// at this peak (`optimal` with this budget finds that one).
//
// The schedule does not depend on the budget: it is returned whenever its peak fits. Having no
// memory dimension, the DP needs no discretization and always works on the sizes as given
// (`options.slots` does not apply, `unit` is 1): its `min_feasible_budget` can be below
// `optimal`'s with slots, which rounds sizes up.
#pragma once

#include <remat/chain.hpp>
#include <remat/concepts.hpp>
#include <remat/detail/dp/cost.hpp>
#include <remat/detail/dp/model.hpp>
#include <remat/detail/verify/finish.hpp>
#include <remat/schedule.hpp>
#include <remat/solver_options.hpp>
#include <remat/solvers/optimal.hpp>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace remat {

/// The persistent schedule of least peak memory, when that peak fits `budget`.
template <chain_like C>
constexpr solve_result solve_min_memory(const C& chain_in, size_type budget,
                                        const solve_options& options = {}) {
  const chain c = to_chain(chain_in);
  if (budget < 0) detail::throw_solver_error("the budget must be >= 0");
  const detail::model md = detail::make_model(c, 1);
  if (!std::is_constant_evaluated())
    detail::check_dp_seconds(
        name(solver::min_memory), c, exact_units,
        detail::need_dp_pairs(md.L) / detail::exact_need_pairs_per_second,
        detail::need_dp_bytes(md.L), options, "the least-memory DP");
  const detail::least_peak_table t = detail::least_peak_dp(md);
  const std::size_t top = detail::interval_index(md.L, 0, md.L);

  solve_result out;
  out.budget = budget;
  out.min_feasible_budget =
      t.need[top] == detail::unreachable ? solve_result::no_budget : md.x[0] + t.need[top];
  if (out.min_feasible_budget == solve_result::no_budget || budget < out.min_feasible_budget)
    return out;
  std::vector<op> ops =
      detail::persistent_ops(md, 0, md.L, 0, [&](std::int32_t i, std::int32_t l, size_type) {
        return t.choice[detail::interval_index(md.L, i, l)];
      });
  solve_result r = detail::finish(c, solver::min_memory, budget, std::move(ops), t.time[top]);
  r.min_feasible_budget = out.min_feasible_budget;
  return r;
}

}  // namespace remat
