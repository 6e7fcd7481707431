// The last step of every solver: replay the schedule it built and refuse to return a wrong one.
#pragma once

#include <remat/simulate.hpp>
#include <remat/solver_options.hpp>

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace remat::detail {

[[noreturn]] inline void throw_internal_error(std::string_view solver_name,
                                              const std::string& why) {
  throw std::logic_error("remat internal error: the " + std::string(solver_name) +
                         " solver built a schedule that " + why +
                         "; please report this with the chain and the budget");
}

// Replays `ops` on the byte-sized chain `c` and fills a feasible result. A schedule that is
// invalid or over budget is a bug in the solver: it is reported, never returned.
constexpr solve_result finish(const chain& c, solver which, size_type budget, std::vector<op> ops,
                              double predicted_makespan) {
  const replay_result r = replay(c, ops);
  if (!r.valid()) throw_internal_error(name(which), "is invalid (" + describe(r, ops) + ")");
  if (r.peak_memory > budget)
    throw_internal_error(name(which), "exceeds the budget (" + std::to_string(r.peak_memory) +
                                          " > " + std::to_string(budget) + ")");
  solve_result out;
  out.feasible = true;
  out.budget = budget;
  out.schedule.ops = std::move(ops);
  out.schedule.makespan = predicted_makespan;
  out.schedule.peak_memory = r.peak_memory;
  out.retained = r.retained;
  return out;
}

// The most micro-batches in flight a request may name (sizes times K stay far from overflow).
inline constexpr std::size_t max_in_flight = std::size_t{1} << 20;

constexpr void check_in_flight(const solve_options& options) {
  if (options.in_flight == 0 || options.in_flight > max_in_flight)
    throw_solver_error("in_flight must be between 1 and " + std::to_string(max_in_flight) +
                       " (micro-batches in flight), not " + std::to_string(options.in_flight));
  if (options.in_flight > 1 && std::is_constant_evaluated())
    throw_solver_error("in_flight > 1: not available in constant expressions");
}

// The offloading solvers with K > 1 in flight: refused (docs/pipelines.md).
inline void refuse_in_flight(solver which, const solve_options& options) {
  if (options.in_flight > 1)
    throw_solver_error(std::string(name(which)) +
                       ": offloading with micro-batches in flight (in_flight = " +
                       std::to_string(options.in_flight) +
                       ") is not modelled; use optimal, checkpoint-only or min-memory");
}

// A baseline's result at K = `options.in_flight` > 1: its schedule where it keeps
// peak + (K - 1) * retained <= budget; else infeasible, with the budget that schedule needs as
// `min_feasible_budget` where it is above the budget (the baseline ignores K).
constexpr solve_result keep_in_flight(solve_result r, size_type budget,
                                      const solve_options& options) {
  if (!r.feasible || options.in_flight <= 1) return r;
  const size_type need =
      r.schedule.peak_memory + static_cast<size_type>(options.in_flight - 1) * r.retained;
  if (need <= budget) return r;
  solve_result out;
  out.budget = budget;
  out.min_feasible_budget = need;
  out.retained = r.retained;
  out.unit = r.unit;
  return out;
}

}  // namespace remat::detail
