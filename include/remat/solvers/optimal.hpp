// The optimal persistent schedule: the dynamic program of MODEL.md, with the exact check.
//
// OPT(i, l, m) is the least time to produce g_i from the input of stage i (held, not counted in
// m) and the gradient g_{l+1} (held, counted). A cell is either a base case, the tape branch
// (F_all(i), solve (i+1, l), B(i)), or the checkpoint branch at some j (F_ck(i), F_none(i+1 ..
// j-1), solve (j, l) holding a_j, then solve (i, j-1)). Ties go to the tape branch, then to the
// smallest j.
//
// By default the DP runs on the chain's own sizes, every budget at once
// (detail/dp/frontier_dp.hpp), or every budget up to the one asked for (`solve_exact`): the result
// is the fastest persistent schedule that fits the budget in bytes. With `solve_options::slots` = N
// it is Rotor's discretized DP (detail/dp/optimal_fast.hpp): sizes rounded up to whole slots of
// budget / N, so its schedule fits, but can be slower than the exact one or missing where the
// exact one fits.
#pragma once

#include <remat/chain.hpp>
#include <remat/concepts.hpp>
#include <remat/detail/dp/branch_and_bound.hpp>
#include <remat/detail/dp/cost.hpp>
#include <remat/detail/dp/discretize.hpp>
#include <remat/detail/dp/frontier_dp.hpp>
#include <remat/detail/dp/model.hpp>
#include <remat/detail/dp/optimal_fast.hpp>
#include <remat/detail/dp/persistent_dp.hpp>
#include <remat/detail/dp/reference_dp.hpp>
#include <remat/detail/verify/finish.hpp>
#include <remat/schedule.hpp>
#include <remat/simulate.hpp>
#include <remat/solver_options.hpp>
#include <remat/solvers/store_all.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace remat {
namespace detail {

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

[[noreturn]] inline void throw_makespan_overflow(solver which) {
  throw_solver_error(std::string(name(which)) +
                     ": the makespan overflows a double at this budget; scale the chain's times "
                     "down");
}

// The thinning tried, in order, where the exact DP (0) would pass the limits.
inline constexpr double thinning_steps[] = {0, 0.001, 0.005, 0.02, 0.1};

// What the frontier DP may spend under `options`: its threads, its rate (work units a second on
// them, at most one a core), the table limit, and the fixed cost of the intervals' classes, paid
// before any frontier.
struct frontier_limits {
  unsigned threads = 1;
  double rate = 0;
  std::size_t byte_limit = 0;
  frontier_fixed_cost fixed;

  // The points that fit the table limit beside the classes.
  double max_points() const noexcept {
    return (static_cast<double>(byte_limit) - fixed.bytes) / frontier_point_bytes;
  }
};

inline frontier_limits frontier_limits_of(const model& md, const solve_options& options) {
  frontier_limits f;
  f.threads = dp_threads(options.threads);
  f.rate = frontier_work_per_second *
           std::min(f.threads, std::max(1U, std::thread::hardware_concurrency()));
  f.byte_limit = options.max_table_bytes.value_or(default_table_limit());
  f.fixed = frontier_classes_cost(md.L);
  return f;
}

// The frontier DP within the solve's limits: exact where its work and points, projected as it
// goes, stay within them; else thinned, by the first epsilon of `thinning_steps` that does (none
// without `allow_thinning`). Throws the refusal where none does. `cap`: `frontier_options::cap`.
constexpr frontier_table frontier_within_limits(const chain& c, const model& md,
                                                const interval_bounds& bounds,
                                                const solve_options& options, solver which,
                                                dp_branches branches, double& epsilon,
                                                bool allow_thinning = true,
                                                size_type cap = unreachable) {
  frontier_options fo{.branches = branches, .cap = cap};
  epsilon = 0;
  if (std::is_constant_evaluated()) return frontier_dp(md, bounds, fo);
  const frontier_limits limits = frontier_limits_of(md, options);
  fo.threads = limits.threads;
  const double rate = limits.rate;
  const std::size_t byte_limit = limits.byte_limit;
  const double fixed_bytes = limits.fixed.bytes;
  double seconds = limits.fixed.seconds;
  if (fixed_bytes > static_cast<double>(byte_limit) || seconds > options.max_estimated_seconds)
    refuse_frontier(name(which), c, seconds, fixed_bytes, options, byte_limit);
  double spent = seconds;  // the classes', then each stopped attempt's
  double projected_seconds = seconds;
  double projected_bytes = fixed_bytes;
  for (const double eps : thinning_steps) {
    if (eps > 0 && !allow_thinning) break;
    fo.epsilon = eps;
    fo.max_work = (options.max_estimated_seconds - spent) * rate;
    fo.max_points = limits.max_points();
    frontier_table t = frontier_dp(md, bounds, fo);
    if (t.complete) {
      epsilon = eps;
      return t;
    }
    spent += t.work / rate;
    projected_seconds = spent + (t.projected_work - t.work) / rate;
    projected_bytes = fixed_bytes + t.projected_points * frontier_point_bytes;
  }
  refuse_frontier(name(which), c, projected_seconds, projected_bytes, options, byte_limit);
  return {};
}

// The fastest schedule the DP can reach, store-all with the tape branch and checkpoint-all
// without it, replayed on the chain's own sizes. Both solves return it wherever it fits.
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
  f.bytes = replay(c, f.ops);
  return f;
}

// The frontier DP of a chain on its own sizes, within the limits of `options`.
struct exact_frontier {
  model md;
  interval_bounds bounds;
  frontier_table table;
  double epsilon = 0;  // the thinning it took (0: exact)
};

constexpr exact_frontier solve_frontier(const chain& c, const solve_options& options, solver which,
                                        dp_branches branches, bool allow_thinning = true,
                                        size_type cap = unreachable) {
  exact_frontier f;
  f.md = make_model(c, 1);
  // Only chains whose sums round read the intervals' store and S (and not their need).
  if (!f.md.exact_sums) f.bounds = make_interval_bounds(f.md, {}, branches);
  f.table = frontier_within_limits(c, f.md, f.bounds, options, which, branches, f.epsilon,
                                   allow_thinning, cap);
  return f;
}

// An exact solve for any number of budgets: the frontier DP on the chain's own sizes (thinned
// where the limits say) run once, the least budget its root's first point, the fastest schedule,
// and, for thinned frontiers only, the DP thinned the other way that the loss bounds compare
// with, run on first use.
struct exact_solver {
  exact_frontier f;
  fastest_schedule fastest;
  size_type min_feasible_budget = solve_result::no_budget;
  frontier_table low;
  bool has_low = false;
};

constexpr exact_solver prepare_exact(const chain& c, const solve_options& options, solver which,
                                     dp_branches branches, bool allow_thinning = true) {
  exact_solver s;
  s.f = solve_frontier(c, options, which, branches, allow_thinning);
  const std::vector<frontier_step>& root = s.f.table.root();
  s.min_feasible_budget = root.empty() ? solve_result::no_budget : s.f.md.x[0] + root.front().m;
  // The fastest schedule is the answer wherever its peak fits, whatever the frontier says there:
  // at sizes whose sums pass 2^62 the DP's arithmetic saturates and its root can miss it (found
  // by fuzz_solvers: one stage with a 2^62 tape and a loss overhead of 2^62 - 1, budget 2^63 - 1).
  s.fastest = fastest_schedule_of(c, branches);
  s.min_feasible_budget = s.fastest.lower(s.min_feasible_budget);
  return s;
}

// The result of `prepare_exact`'s solve at `budget`: the schedule read back at that memory. (Also
// `solve_exact`'s, whose table is empty where the budget is below the least or the fastest
// schedule fits, and capped at the budget elsewhere.)
constexpr solve_result exact_result_at(const chain& c, exact_solver& s, size_type budget,
                                       const solve_options& options, solver which,
                                       dp_branches branches) {
  if (budget < 0) throw_solver_error("the budget must be >= 0");
  const model& md = s.f.md;
  const frontier_table& t = s.f.table;
  const double epsilon = s.f.epsilon;
  solve_result out;
  out.budget = budget;
  out.epsilon = epsilon;
  out.min_feasible_budget = s.min_feasible_budget;
  if (s.fastest.bytes.peak_memory <= budget) {
    solve_result r = finish(c, which, budget, s.fastest.ops, s.fastest.bytes.makespan);
    r.min_feasible_budget = out.min_feasible_budget;
    return r;
  }
  if (budget < out.min_feasible_budget || t.root().empty()) return out;  // (no table below)
  const size_type m = budget - md.x[0];
  const double value = t.value(0, md.L, m);
  if (!(value < infinite_time)) throw_makespan_overflow(which);
  std::vector<op> ops = frontier_ops(md, t, 0, md.L, m);
  // Thinned, the schedule read back at the true memory can beat the value of its point.
  const double makespan = epsilon == 0 ? value : replay(to_chain(md), ops).makespan;
  solve_result r = finish(c, which, budget, std::move(ops), makespan);
  r.min_feasible_budget = out.min_feasible_budget;
  r.epsilon = epsilon;
  if (epsilon > 0) {
    // The bounds, against the DP thinned the other way (never above exact).
    if (!s.has_low) {
      s.low = frontier_dp(md, s.f.bounds,
                          {.branches = branches,
                           .epsilon = epsilon,
                           .side = thinning::optimistic,
                           .threads = dp_threads(options.threads),
                           .cap = t.cap});
      s.has_low = true;
    }
    const double floor_value = s.low.value(0, md.L, m);
    r.makespan_loss = floor_value > 0 ? makespan / floor_value - 1 : 0;
    // The last memory at which the lower bound is still >= the makespan: the exact optimum
    // there is no faster than this schedule.
    const std::vector<frontier_step>& lr = s.low.root();
    auto it =
        std::find_if(lr.begin(), lr.end(), [&](const frontier_step& p) { return p.t < makespan; });
    const size_type equal = it == lr.end() ? m : std::min(m, it->m - 1);
    r.memory_loss = static_cast<double>(m - equal) / static_cast<double>(budget);
  }
  return r;
}

// When a solve at one budget tries branch and bound (detail/dp/branch_and_bound.hpp) before the
// frontier DP capped there: where that DP projects more than 1 ms of work and more than twice the
// estimated time of the search's lower bounds' DP (their unit divides the common sizes, so the
// search after it is short). One thread, 20% to 70% of store-all (benchmarks/README-scaling.md):
// resnet101 and resnet152 search (their bounds' DP estimated 0.5 and 1.5-2.7 ms, the frontier DP
// projecting 1.2-2.0 and 7-10 ms: 1.3-1.9 ms against 2.0-3.1 ms, 2.8-4.4 against 5-12 ms), GPT-2
// does not (gpt2-large's bounds 2.2-4.7 ms against a projection of 2.2 ms: 1.3-2.0 ms by the
// frontier DP, 2.3-5.0 by the search). The projections from the first diagonals run up to 2
// times high; the bounds' estimate within about 1.3 times.
inline constexpr double search_switch_work = 0.001 * frontier_work_per_second;
inline constexpr double search_switch_ratio = 2;

// The frontier DP capped at `m`, stopped as soon as it projects more than `max_work` (or passes
// the limits): the exact solver at that budget where it finished (`s.f.table.complete`).
inline void capped_frontier_within(const model& md, size_type m, const frontier_limits& limits,
                                   const solve_options& options, dp_branches branches,
                                   double max_work, exact_solver& s) {
  s.f.md = md;
  s.f.table = frontier_dp(
      md, s.f.bounds,
      {.branches = branches,
       .threads = limits.threads,
       .max_work =
           std::min(max_work, (options.max_estimated_seconds - limits.fixed.seconds) * limits.rate),
       .max_points = limits.max_points(),
       .cap = m});
}

// Branch and bound at one budget, where the frontier DP capped there would do more than
// `switch_work` and `search_switch_ratio` times its lower bounds' DP: given half the time that
// DP projects (at least 10 ms, at most a quarter of the time limit), and the table limit. Where it
// does not finish, the solve takes up to half as long again (a quarter of the limit where the
// frontier DP thins); where it does, it is faster or, where the frontier DP would thin, exact
// (measured in benchmarks/README-scaling.md). Empty where it does not finish (or the frontier DP
// finished first).
inline std::optional<solve_result> solve_by_search(const chain& c, const model& md,
                                                   const std::vector<size_type>& need,
                                                   size_type budget, const solve_options& options,
                                                   solver which, dp_branches branches,
                                                   double switch_work, exact_solver& s) {
  const size_type m = budget - md.x[0];
  const frontier_limits limits = frontier_limits_of(md, options);
  double projected = 0;  // seconds (0: `switch_work` 0, the search alone, for the tests)
  if (switch_work > 0) {
    capped_frontier_within(md, m, limits, options, branches, switch_work, s);
    // Stopped before its first diagonal, its projection is only its least work (each interval's
    // split points once): run it on to a projection from its first diagonals.
    if (!s.f.table.complete && s.f.table.diagonals_done < 0)
      capped_frontier_within(md, m, limits, options, branches, 2 * s.f.table.projected_work, s);
    if (s.f.table.complete) return exact_result_at(c, s, budget, options, which, branches);
    projected = s.f.table.projected_work / limits.rate;
  }
  std::optional<lower_bound_plan> plan = search_plan(md, m, branches, limits.threads);
  // No search: the caller's frontier DP, capped at the budget within the limits (thinned where
  // it passes them).
  if (!plan || (switch_work > 0 && projected < search_switch_ratio * plan->seconds))
    return std::nullopt;
  const double seconds = std::min(std::max(projected / 2, 0.01), options.max_estimated_seconds / 4);
  const bnb_result r = branch_and_bound_within(md, make_interval_bounds(md, need, branches),
                                               std::move(*plan), m, branches, limits.threads,
                                               seconds, static_cast<double>(limits.byte_limit));
  if (!r.complete) return std::nullopt;
  if (!(r.value < infinite_time)) throw_makespan_overflow(which);
  solve_result out = finish(c, which, budget, r.ops, r.value);
  out.min_feasible_budget = s.min_feasible_budget;
  return out;
}

// The exact solve at one budget. The least budget first, from the least-memory DP (O(L^3), no
// memory dimension): where every value is finite (exact sums) and no sum of sizes rounds or wraps
// (`need_in_doubles`), that is the whole frontier's first point, as a cell's first point is where
// the first of its branches' conditions holds, which is that DP's recurrence. Below it and from
// the fastest schedule's peak on, no frontier DP runs. Between: the frontier DP capped at the
// budget (`frontier_options::cap`: a half to two thirds of the whole curve's points at 30% of
// store-all), where it projects at most `switch_work` or `search_switch_ratio` times the search's
// lower bounds' DP; above, branch and bound first (`solve_by_search`: the same value, the dense
// DP's schedule among equally fast ones), then the capped frontier DP within the limits where the
// search does not finish (`switch_work` infinite: never searched; 0: searched first, for the
// tests). Elsewhere (sums that round, sizes near 2^63) the whole frontier, as `prepare_exact`.
constexpr solve_result solve_exact(const chain& c, size_type budget, const solve_options& options,
                                   solver which, dp_branches branches,
                                   double switch_work = search_switch_work) {
  if (budget < 0) throw_solver_error("the budget must be >= 0");
  const model md = make_model(c, 1);
  exact_solver s;
  if (!md.exact_sums || !need_in_doubles(md)) {
    s = prepare_exact(c, options, which, branches);
    return exact_result_at(c, s, budget, options, which, branches);
  }
  if (!std::is_constant_evaluated())
    check_dp_seconds(name(which), c, exact_units, need_dp_seconds(c, 1), need_dp_bytes(md.L),
                     options, "finding the least budget");
  const std::vector<size_type> need = persistent_need(md, branches);
  const size_type least = persistent_min_budget(md, need);
  s.fastest = fastest_schedule_of(c, branches);
  s.min_feasible_budget = s.fastest.lower(least == unreachable ? solve_result::no_budget : least);
  if (budget < s.fastest.bytes.peak_memory && budget >= s.min_feasible_budget) {
    if (!std::is_constant_evaluated() && switch_work < infinite_time)
      if (std::optional<solve_result> r =
              solve_by_search(c, md, need, budget, options, which, branches, switch_work, s))
        return *r;
    s.f = solve_frontier(c, options, which, branches, true, budget - md.x[0]);
  }
  return exact_result_at(c, s, budget, options, which, branches);
}

// The solve with slots: discretize, the least budget with these slots, the dense DP up to the
// budget (or the fastest schedule's peak, above which nothing changes), its schedule read back.
constexpr solve_result solve_slots(const chain& c, size_type budget, const solve_options& options,
                                   solver which, dp_branches branches) {
  const discretization d = discretize(budget, options.slots);
  const model md = make_model(c, d.unit);
  // The least-memory DPs are O(L^3) each, whatever the slots: refuse before running them when
  // they alone would take too long.
  double need_seconds = 0;
  if (!std::is_constant_evaluated()) {
    need_seconds = need_dp_seconds(c, need_dp_runs(c, options.slots));
    check_dp_seconds(name(which), c, options.slots, need_seconds, need_dp_bytes(md.L), options,
                     "finding the least budget");
  }
  std::vector<size_type> need = persistent_need(md, branches);
  const size_type root_need = need[interval_index(md.L, 0, md.L)];
  solve_result out;
  out.budget = budget;
  out.unit = d.unit;
  out.min_feasible_budget = slots_min_budget(
      c, options.slots, persistent_min_budget(make_model(c, 1), branches), branches);
  // The fastest schedule is the answer wherever its own peak fits, even where sizes rounded up to
  // whole slots would not (so every budget from its peak up is feasible); below, the table stops
  // there, above which OPT no longer decreases.
  fastest_schedule fastest = fastest_schedule_of(c, branches);
  out.min_feasible_budget = fastest.lower(out.min_feasible_budget);
  if (fastest.bytes.peak_memory <= budget) {
    solve_result r = finish(c, which, budget, std::move(fastest.ops), fastest.bytes.makespan);
    r.min_feasible_budget = out.min_feasible_budget;
    r.unit = d.unit;
    return r;
  }
  if (root_need == unreachable || md.x[0] + root_need > d.budget) return out;
  const size_type top = std::min(d.budget, replay(to_chain(md), fastest.ops).peak_memory);
  dense_run run = run_dense(c, md, std::move(need), top - md.x[0], branches, options, name(which),
                            need_seconds);
  if (!(run.makespan < infinite_time)) throw_makespan_overflow(which);
  solve_result r = finish(c, which, budget, std::move(run.ops), run.makespan);
  r.min_feasible_budget = out.min_feasible_budget;
  r.unit = d.unit;
  return r;
}

// The DP solvers (`optimal`, `checkpoint-only`).
constexpr solve_result solve_persistent(const chain& c, size_type budget,
                                        const solve_options& options, solver which,
                                        dp_branches branches) {
  if (options.slots == exact_units) return solve_exact(c, budget, options, which, branches);
  return solve_slots(c, budget, options, which, branches);
}

}  // namespace detail

/// The fastest persistent schedule for `budget` (MODEL.md's DP, exact check), on the chain's own
/// sizes. With `options.slots` = N, Rotor's discretization instead: the budget cut into N units
/// and sizes rounded up, so the schedule fits the byte budget but may be slower than the exact
/// one (or missing where it fits).
template <chain_like C>
constexpr solve_result solve_optimal(const C& chain_in, size_type budget,
                                     const solve_options& options = {}) {
  const chain c = to_chain(chain_in);
  return detail::solve_persistent(c, budget, options, solver::optimal,
                                  detail::dp_branches::tape_and_checkpoint);
}

}  // namespace remat
