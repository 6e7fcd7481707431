// The umbrella header: the model, the simulator, every solver, and `remat::solve`.
//
//   remat::chain c = ...;                       // or any type modelling remat::chain_like
//   remat::solve_result r = remat::solve(c, budget, {.solver = remat::solver::optimal});
//   if (r.feasible) run(r.schedule.ops);
//
// Long chains: `{.coarsen = remat::auto_coarsening}` merges consecutive stages into blocks as far
// as the solver needs (remat/coarsen.hpp) and returns the schedule on the chain's own stages.
#pragma once

#include <remat/chain.hpp>
#include <remat/coarsen.hpp>
#include <remat/concepts.hpp>
#include <remat/detail/coarsen/target.hpp>
#include <remat/detail/solver_rows.hpp>
#include <remat/detail/verify/finish.hpp>
#include <remat/schedule.hpp>
#include <remat/simulate.hpp>
#include <remat/solver_options.hpp>
#include <remat/version.hpp>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace remat {

namespace detail {

// `options.solver` on the chain as given (`options.coarsen` is not looked at): its row's solve.
template <chain_like C>
constexpr solve_result solve_as_given(const C& chain, size_type budget,
                                      const solve_options& options) {
  if (!info(options.solver).constant_evaluable && std::is_constant_evaluated())
    throw_solver_error(std::string(name(options.solver)) +
                       ": not available in constant expressions");
  check_in_flight(options);
  const solve_pointer run = row_of(options.solver).solve;
  if constexpr (std::same_as<C, remat::chain>)
    return run(chain, budget, options);
  else
    return run(remat::to_chain(chain), budget, options);
}

// A result of the coarse chain `cc` as one of the fine chain `c`: its ops expanded and replayed
// on `c` (within the budget, by coarsen.hpp's proof; a schedule that is not is a bug, reported).
inline solve_result expand_result(const chain& c, const coarse_chain& cc, solve_result coarse,
                                  solver which, std::size_t in_flight = 1) {
  solve_result out;
  if (coarse.feasible) {
    std::vector<op> ops = expand(cc, coarse.schedule.ops);
    const double makespan = replay(c, ops).makespan;
    out = finish(c, which, coarse.budget, std::move(ops), makespan);
    if (out.schedule.peak_memory + (static_cast<size_type>(in_flight) - 1) * out.retained >
        coarse.budget)
      throw_internal_error(name(which), "breaks the in-flight constraint once expanded");
  }
  out.budget = coarse.budget;
  out.min_feasible_budget = coarse.min_feasible_budget;
  out.unit = coarse.unit;
  out.coarse_length = cc.length();
  out.largest_block = cc.largest_block();
  return out;
}

}  // namespace detail

/// `solve` with `options.coarsen` (see solve_options): merges the chain's stages into blocks
/// (remat::coarsen, cut by `options.coarse_boundaries`), solves the blocks, and returns the
/// schedule expanded to the chain's own stages and replayed on them. `coarse_length` and
/// `largest_block` say what was merged (0 when nothing was). `min_feasible_budget` is the coarse
/// chain's. With `auto_coarsening` the DP solvers get the chain as given first, and it is
/// coarsened only if they refuse it, to the most blocks a closed-form bound of their estimate
/// accepts (detail/coarsen/target.hpp); a coarse chain they still refuse is halved, up to 6
/// times, before the refusal is passed on.
template <chain_like C>
solve_result solve_coarsened(const C& chain_in, size_type budget, const solve_options& options) {
  const chain c = to_chain(chain_in);
  if (budget < 0) detail::throw_solver_error("the budget must be >= 0");
  if (!info(options.solver).coarsens && options.coarsen != no_coarsening)
    detail::throw_solver_error(std::string(name(options.solver)) +
                               ": coarsening is not supported with offloading (solve the chain "
                               "as given)");
  solve_options inner = options;
  inner.coarsen = no_coarsening;
  if (options.coarsen == no_coarsening) return detail::solve_as_given(c, budget, inner);
  std::size_t blocks = std::min(options.coarsen, c.length());
  // Only the DP solvers refuse long chains: with auto, they are asked first, and coarsening
  // follows their refusal (the other solvers' errors are not a length's).
  const bool retry =
      options.coarsen == auto_coarsening && info(options.solver).refuses_long_chains();
  if (retry) {
    try {
      return detail::solve_as_given(c, budget, inner);
    } catch (const solver_error&) {
      if (c.length() == 1) throw;
    }
    blocks = detail::auto_coarse_length(c, budget, options);
  }
  for (int retries = 0;; ++retries) {
    try {
      if (blocks == c.length()) return detail::solve_as_given(c, budget, inner);
      const coarse_chain cc = coarsen(c, blocks, options.coarse_boundaries);
      return detail::expand_result(c, cc, detail::solve_as_given(cc.chain, budget, inner),
                                   options.solver, options.in_flight);
    } catch (const solver_error&) {
      if (!retry || retries == 6 || blocks == 1) throw;
      blocks = std::max<std::size_t>(1, blocks / 2);
    }
  }
}

namespace detail {
struct solve_fn {
  /// Runs `options.solver` on `chain` for a total memory `budget` (input, activations, tapes,
  /// gradients and overheads; the chain's units). An infeasible budget is a result
  /// (`feasible == false`, with `min_feasible_budget`); malformed chains throw `chain_error`,
  /// impossible requests `solver_error`. With `options.coarsen`, see `solve_coarsened`.
  template <chain_like C>
  constexpr solve_result operator()(const C& chain, size_type budget,
                                    const solve_options& options = {}) const {
    if (options.coarsen != no_coarsening) {
      if (std::is_constant_evaluated())
        throw_solver_error("coarsening: not available in constant expressions");
      return solve_coarsened(chain, budget, options);
    }
    return solve_as_given(chain, budget, options);
  }
};
}  // namespace detail

inline constexpr detail::solve_fn solve{};

}  // namespace remat
