// The umbrella header: the model, the simulator, every solver, and `remat::solve`.
//
//   remat::chain c = ...;                       // or any type modelling remat::chain_like
//   remat::solve_result r = remat::solve(c, budget, {.solver = remat::solver::optimal});
//   if (r.feasible) run(r.plan.ops);
#pragma once

#include <remat/chain.hpp>
#include <remat/concepts.hpp>
#include <remat/schedule.hpp>
#include <remat/simulate.hpp>
#include <remat/solver_options.hpp>
#include <remat/solvers/checkpoint_only.hpp>
#include <remat/solvers/chen_greedy.hpp>
#include <remat/solvers/chen_sqrt.hpp>
#include <remat/solvers/exhaustive.hpp>
#include <remat/solvers/min_memory.hpp>
#include <remat/solvers/optimal.hpp>
#include <remat/solvers/revolve.hpp>
#include <remat/solvers/sequential.hpp>
#include <remat/solvers/store_all.hpp>
#include <remat/version.hpp>

namespace remat {

namespace detail {
struct solve_fn {
  /// Runs `options.solver` on `chain` for a total memory `budget` (input, activations, tapes,
  /// gradients and overheads; the chain's units). An infeasible budget is a result
  /// (`feasible == false`, with `min_feasible_budget`); malformed chains throw `chain_error`,
  /// impossible requests `solver_error`.
  template <chain_like C>
  constexpr solve_result operator()(const C& chain, size_type budget,
                                    const solve_options& options = {}) const {
    switch (options.solver) {
      case solver::store_all: return solve_store_all(chain, budget, options);
      case solver::exhaustive:
        if (std::is_constant_evaluated())
          throw_solver_error("exhaustive: not available in constant expressions");
        return solve_exhaustive(chain, budget, options);
      case solver::sequential: return solve_sequential(chain, budget, options);
      case solver::chen_sqrt: return solve_chen_sqrt(chain, budget, options);
      case solver::chen_greedy: return solve_chen_greedy(chain, budget, options);
      case solver::revolve: return solve_revolve(chain, budget, options);
      case solver::checkpoint_only: return solve_checkpoint_only(chain, budget, options);
      case solver::min_memory: return solve_min_memory(chain, budget, options);
      case solver::optimal: break;
    }
    return solve_optimal(chain, budget, options);
  }
};
}  // namespace detail

inline constexpr detail::solve_fn solve{};

}  // namespace remat
