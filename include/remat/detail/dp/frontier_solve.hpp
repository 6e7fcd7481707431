// The frontier DP as a solve of the chain's own sizes: the whole curve (every budget at once:
// `remat::trade_off`, the sweeps, min-memory), and the result at a budget read from a frontier
// table, whole or capped there; with the fastest schedule the DP can reach, which answers
// wherever its peak fits. The dispatch (dispatch.hpp) runs these; docs/model.md, "Engines".
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/dp/cost.hpp>
#include <remat/detail/dp/engines/frontier.hpp>
#include <remat/detail/dp/intervals.hpp>
#include <remat/detail/dp/model.hpp>
#include <remat/detail/dp/platform.hpp>
#include <remat/detail/dp/tuning.hpp>
#include <remat/detail/store_all_ops.hpp>
#include <remat/detail/verify/finish.hpp>
#include <remat/schedule.hpp>
#include <remat/simulate.hpp>
#include <remat/solver_options.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace remat::detail {

// The branches of each DP solver (`solver_info::tape_branch`).
constexpr dp_branches branches_of(solver s) noexcept {
  return info(s).tape_branch ? dp_branches::tape_and_checkpoint : dp_branches::checkpoint_only;
}

[[noreturn]] inline void throw_makespan_overflow(solver which) {
  throw_solver_error(std::string(name(which)) +
                     ": the makespan overflows a double at this budget; scale the chain's times "
                     "down");
}

// F_ck(0 .. L-1), loss, then F_all(i), B(i) for i = L-1 .. 0: every activation checkpointed,
// each stage recomputed once with its tape. Every schedule of the DP without the tape branch
// forwards each stage at least twice, and this one forwards each exactly twice.
constexpr std::vector<op> checkpoint_all_ops(std::int32_t length) {
  std::vector<op> ops;
  ops.reserve(4 * static_cast<std::size_t>(length) + 1);
  for (std::int32_t k = 0; k < length; ++k) ops.push_back(f_ck(k));
  ops.push_back(loss_op(length));
  for (std::int32_t k = length - 1; k >= 0; --k) {
    ops.push_back(f_all(k));
    ops.push_back(backward(k));
  }
  return ops;
}

// The fastest schedule the DP can reach, store-all with the tape branch and checkpoint-all
// without it, replayed on the chain's own sizes: the answer wherever its peak fits.
struct fastest_schedule {
  std::vector<op> ops;
  replay_result bytes;

  // The least feasible budget once this schedule is known to fit from its own peak up.
  [[nodiscard]] constexpr size_type lower(size_type min_budget) const noexcept {
    return min_budget == solve_result::no_budget || bytes.peak_memory < min_budget
               ? bytes.peak_memory
               : min_budget;
  }
};

constexpr fastest_schedule fastest_schedule_of(const chain& c, dp_branches branches) {
  const auto L = static_cast<std::int32_t>(c.length());
  fastest_schedule f;  // (a conditional of two vector calls trips g++ 12 in constexpr)
  if (branches == dp_branches::tape_and_checkpoint)
    f.ops = store_all_ops(L);
  else
    f.ops = checkpoint_all_ops(L);
  // Each stage records with its fastest option (the first of least fw_o + bw_o): the schedule
  // then takes S(0, L), the least time of any schedule.
  const model md = make_model(c, 1);
  for (op& o : f.ops)
    if (o.kind == op_kind::forward_all)
      o.option = md.options(o.stage)[md.fastest[static_cast<std::size_t>(o.stage)]].index;
  f.bytes = replay(c, f.ops);
  return f;
}

// What the frontier DP may spend under `options`: its threads, its rate (work units a second on
// them, at most one a core), the table limit, and the fixed cost of the intervals' classes.
struct frontier_limits {
  unsigned threads = 1;
  double rate = 0;
  std::size_t byte_limit = 0;
  frontier_fixed_cost fixed;

  // The points that fit the table limit beside the classes.
  [[nodiscard]] double max_points() const noexcept {
    return (static_cast<double>(byte_limit) - fixed.bytes) / frontier_point_bytes;
  }
};

// `estimate_threads`: the threads the rate counts (0: those the DP runs on). The default solve
// counts one, so that what it chooses does not depend on the threads or the machine's cores.
inline frontier_limits frontier_limits_of(std::int32_t L, const solve_options& options,
                                          unsigned estimate_threads = 0) {
  frontier_limits f;
  f.threads = dp_threads(options.threads);
  const unsigned counted = estimate_threads == 0 ? f.threads : estimate_threads;
  f.rate = tuning.frontier_work_per_second *
           std::min(counted, std::max(1U, std::thread::hardware_concurrency()));
  f.byte_limit = options.max_table_bytes.value_or(default_table_limit());
  f.fixed = frontier_classes_cost(L);
  return f;
}

// The whole frontier of a chain on its own sizes (every budget at once: the curve, the sweeps,
// min-memory), exact within the limits of `options` or refused; with the least budget and the
// fastest schedule, which answer wherever the frontier's root would not (`at`).
struct whole_frontier {
  model md;
  interval_bounds bounds;  // store and S, read only where the sums round
  frontier_table table;
  fastest_schedule fastest;
  size_type min_feasible_budget = solve_result::no_budget;
};

constexpr whole_frontier make_whole_frontier(const chain& c, const solve_options& options,
                                             solver which) {
  const dp_branches branches = branches_of(which);
  whole_frontier w;
  w.md = make_model(c, 1);
  if (!w.md.exact_sums) w.bounds = make_interval_bounds(w.md, {}, branches);
  frontier_options fo{.branches = branches};
  frontier_limits limits;
  if (!std::is_constant_evaluated()) {
    limits = frontier_limits_of(w.md.L, options);
    const double seconds = limits.fixed.seconds;
    if (limits.fixed.bytes > static_cast<double>(limits.byte_limit) ||
        seconds > options.max_estimated_seconds)
      refuse_frontier(name(which), c, seconds, limits.fixed.bytes, options, limits.byte_limit);
    fo.threads = limits.threads;
    fo.max_work = (options.max_estimated_seconds - seconds) * limits.rate;
    fo.max_points = limits.max_points();
  }
  w.table = frontier_dp(w.md, w.bounds, fo);
  if (!w.table.complete)
    refuse_frontier(name(which), c, limits.fixed.seconds + w.table.projected_work / limits.rate,
                    limits.fixed.bytes + w.table.projected_points * frontier_point_bytes, options,
                    limits.byte_limit);
  const std::vector<frontier_step>& root = w.table.root();
  w.min_feasible_budget = root.empty() ? solve_result::no_budget : w.md.x[0] + root.front().m;
  // The fastest schedule is the answer wherever its peak fits, whatever the frontier says there:
  // at sizes whose sums pass 2^62 the DP's arithmetic saturates and its root can miss it.
  w.fastest = fastest_schedule_of(c, branches);
  w.min_feasible_budget = w.fastest.lower(w.min_feasible_budget);
  return w;
}

// The result at `budget` of a frontier table of the chain (whole, or capped at least there).
constexpr solve_result frontier_result(const chain& c, const model& md, const frontier_table& t,
                                       const fastest_schedule& fastest, size_type min_feasible,
                                       size_type budget, solver which) {
  if (budget < 0) throw_solver_error("the budget must be >= 0");
  solve_result out;
  out.budget = budget;
  out.min_feasible_budget = min_feasible;
  out.exact = true;  // the least budget is exact: nothing fits below it
  if (fastest.bytes.peak_memory <= budget) {
    solve_result r = finish(c, which, budget, fastest.ops, fastest.bytes.makespan);
    r.min_feasible_budget = min_feasible;
    r.exact = true;
    return r;
  }
  if (budget < min_feasible || t.root().empty()) return out;
  const size_type m = budget - md.x[0];
  const double value = t.value(0, md.L, m);
  if (!(value < infinite_time)) throw_makespan_overflow(which);
  solve_result r = finish(c, which, budget, frontier_ops(md, t, 0, md.L, m), value);
  r.min_feasible_budget = min_feasible;
  r.exact = true;
  return r;
}

constexpr solve_result whole_frontier_at(const chain& c, const whole_frontier& w, size_type budget,
                                         solver which) {
  return frontier_result(c, w.md, w.table, w.fastest, w.min_feasible_budget, budget, which);
}

}  // namespace remat::detail
