// Solve and place, keeping the user's budget end to end.
//
//   remat::plan_result p = remat::plan(chain, budget, {.alignment = 256});
//   if (p.feasible) run(p.memory);  // p.memory.arena_bytes <= budget, always
//
// A solver keeps the *sum* of live sizes within the budget; the arena that holds them also pays
// for fragmentation and alignment, so it can be larger. When it is, `plan` solves again at a
// smaller budget, until the arena fits or no schedule does.
#pragma once

#include <remat/chain.hpp>
#include <remat/concepts.hpp>
#include <remat/memory_plan.hpp>
#include <remat/solve.hpp>
#include <remat/solver_options.hpp>

#include <algorithm>
#include <string>

namespace remat {

struct plan_options {
  solve_options solve{};                                  ///< which solver, how many slots
  size_type alignment = memory_plan_options{}.alignment;  ///< see memory_plan_options
};

struct plan_result {
  /// True when `memory.arena_bytes <= budget`; then `solution` is the schedule that runs.
  bool feasible = false;
  size_type budget = 0;   ///< the user's budget
  solve_result solution;  ///< the last solve; `solution.budget` is what the solver was given
  memory_plan memory;     ///< the placed buffers of `solution.schedule` (empty when infeasible)
  int attempts = 0;       ///< solves made
  std::string reason;     ///< why nothing fits, when nothing does
};

namespace detail {
struct plan_fn {
  /// Finds a schedule of `chain` (sizes in bytes) whose placed arena is at most `budget`.
  /// After an attempt whose arena is `over` bytes too large, the next budget is the schedule's
  /// peak minus `over` (as if fragmentation stayed the same), then minus twice the overshoot,
  /// four times, ...: the peak strictly decreases, and the doubling bounds the attempts by about
  /// 64. Below the solver's least feasible budget it tries that budget once, then stops.
  template <chain_like C>
  constexpr plan_result operator()(const C& chain_in, size_type budget,
                                   const plan_options& options = {}) const {
    const chain c = to_chain(chain_in);
    plan_result out;
    out.budget = budget;
    size_type solver_budget = budget;
    for (int shift = 0;; ++shift) {
      ++out.attempts;
      out.solution = solve(c, solver_budget, options.solve);
      if (!out.solution.feasible) {
        out.memory = {};
        out.reason = out.attempts == 1
                         ? "no schedule fits: the solver needs at least " +
                               std::to_string(out.solution.min_feasible_budget) + " bytes"
                         : "no schedule fits once placed: every schedule found at or below " +
                               std::to_string(budget) +
                               " bytes needs a larger arena (alignment, fragmentation)";
        return out;
      }
      out.memory = make_memory_plan(c, out.solution.schedule, {.alignment = options.alignment});
      if (out.memory.arena_bytes <= budget) {
        out.feasible = true;
        return out;
      }
      const size_type over = out.memory.arena_bytes - budget;
      const size_type peak = out.solution.schedule.peak_memory;
      // peak - over * 2^shift, saturating at -1 (which no solver can meet)
      const bool too_far = shift >= 62 || over > (peak >> shift);
      const size_type next = too_far ? -1 : peak - (over << shift);
      // Below the solver's least budget nothing is found; that budget itself is worth a try.
      const size_type least = out.solution.min_feasible_budget;
      if (least != solve_result::no_budget && next < least && least < peak) {
        solver_budget = least;
        continue;
      }
      if (next < 0 || (least != solve_result::no_budget && next < least)) {
        out.feasible = false;
        out.reason = "no schedule fits once placed: the smallest arena found needs " +
                     std::to_string(out.memory.arena_bytes) + " bytes for a peak of " +
                     std::to_string(peak) + " (alignment, fragmentation), and the solver " +
                     "finds nothing below " + std::to_string(least) + " bytes";
        out.memory = {};
        return out;
      }
      solver_budget = next;
    }
  }
};
}  // namespace detail

inline constexpr detail::plan_fn plan{};

}  // namespace remat
