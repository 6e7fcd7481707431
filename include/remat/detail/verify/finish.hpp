// The last step of every solver: replay the schedule it built and refuse to return a wrong one.
#pragma once

#include <remat/simulate.hpp>
#include <remat/solver_options.hpp>

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
  return out;
}

}  // namespace remat::detail
