// The one dispatch of the DP solvers (`optimal`, `checkpoint-only`, and `min-memory`'s exact
// schedule): a request (chain, budget, solver, options) becomes a plan once (`choose`), and the
// plan runs (`run`); `remat::estimate_solve_at` costs the same plan. docs/architecture.md draws
// the engines and this dispatch.
//
// The plan:
// * Settled by the least-memory DP (O(L^3)) alone: below its least budget nothing fits; from the
//   peak of the fastest schedule the DP reaches (store-all; checkpoint-all without the tape
//   branch) that schedule is the answer.
// * `slots` = N: Rotor's dense DP on N slots of budget / N (sizes rounded up).
// * Exact (`exact_units`, and the default `auto_slots` where it is cheap): the engines that give
//   the exact optimum, each within what is left of an allowance, until one finishes: the
//   frontier DP capped at the budget (stopped as soon as its projection passes the allowance),
//   branch and bound on its lower bounds (where their unit fits the chain's sizes), the dense DP
//   on the chain's own units (where the budget is small in them). The allowance is the limits
//   (`max_estimated_seconds`, `max_table_bytes`) when exact is asked for, and refused where none
//   finishes; by default it is a share of the time the 500-slot solve is estimated at.
// * Default only, where no exact engine finished: the dense DP on `rotor_slots`, whose schedule
//   is the 500-slot solve's, and its distance from the exact optimum bounded by the same DP on
//   sizes rounded down (`bound_from`). Whether exact or not, the default is never slower than the
//   500-slot schedule, and takes about as long as the 500-slot solve at most.
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/dp/cost.hpp>
#include <remat/detail/dp/discretize.hpp>
#include <remat/detail/dp/engines/dense.hpp>
#include <remat/detail/dp/engines/frontier.hpp>
#include <remat/detail/dp/engines/reference.hpp>
#include <remat/detail/dp/engines/search.hpp>
#include <remat/detail/dp/engines/search_bounds.hpp>
#include <remat/detail/dp/frontier_solve.hpp>
#include <remat/detail/dp/intervals.hpp>
#include <remat/detail/dp/least_memory.hpp>
#include <remat/detail/dp/model.hpp>
#include <remat/detail/dp/platform.hpp>
#include <remat/detail/dp/read_back.hpp>
#include <remat/detail/dp/tuning.hpp>
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

namespace remat::detail {

enum class dp_mode : std::uint8_t {
  automatic,  // `auto_slots`: exact where cheap, else 500 slots with a bound
  exact,      // `exact_units`: exact within the limits, or refused
  slots,      // N slots: Rotor's DP
};

constexpr dp_mode mode_of(size_type slots) {
  if (slots == auto_slots) return dp_mode::automatic;
  if (slots == exact_units) return dp_mode::exact;
  if (slots < 0) throw_solver_error("slots must be > 0 (or exact_units, or auto_slots)");
  return dp_mode::slots;
}

// A solve at one budget, decided before any DP over memory runs.
struct dp_plan {
  solver which = solver::optimal;
  dp_branches branches = dp_branches::tape_and_checkpoint;
  dp_mode mode = dp_mode::automatic;
  size_type budget = 0;
  // The threads the estimates count: one in the default, whose choice between exact and 500
  // slots must not depend on the threads or the machine; the solve's own otherwise.
  unsigned threads = 1;
  model md;  // on the chain's own sizes
  fastest_schedule fastest;
  size_type min_feasible_budget = solve_result::no_budget;
  // Nothing to run: the fastest schedule fits, or nothing does.
  bool settled = false;
  // The chain's sums round, or its sizes pass 2^52: the whole frontier (exact) instead of the
  // engines at one budget, and the least budget from it.
  bool whole = false;
  std::vector<size_type> need;  // the least-memory DP's, on the chain's own sizes
  double need_seconds = 0;      // its estimate
  // What the exact engines may spend together (seconds at the estimates' rates).
  double allowance = 0;
  // The default's fallback, and the solve with slots: Rotor's DP on `slots` slots.
  size_type slots = 0;
  discretization unit;
  model rounded;                        // the chain's sizes rounded up to `unit.unit`
  std::vector<size_type> rounded_need;  // its least-memory DP
  double dense_seconds = 0;             // the dense DP's estimate on it
  double dense_bytes = 0;
  double slots_need_seconds = 0;  // the least-memory DPs of its least budget
  // The default falls back on that DP (within the limits) where no exact engine finishes.
  bool fallback = false;
};

// The plan of the dense DP on `slots` slots (the solve with slots, and the default's fallback):
// its unit, the rounded model and its needs, its estimate (`dense_seconds`, the DP over memory;
// `slots_need_seconds`, the least-memory DPs of the least budget with these slots).
inline void plan_slots(const chain& c, dp_plan& p, const solve_options& options, size_type slots) {
  p.slots = slots;
  p.unit = discretize(p.budget, slots);
  p.rounded = make_model(c, p.unit.unit);
  p.slots_need_seconds = need_dp_seconds(c, need_dp_runs(c, slots));
  const unsigned threads = p.threads;
  if (p.mode == dp_mode::slots)
    check_dp_seconds(name(p.which), c, slots, p.slots_need_seconds, need_dp_bytes(p.rounded.L),
                     options, "finding the least budget");
  p.rounded_need = persistent_need(p.rounded, p.branches);
  const size_type top =
      std::min(p.unit.budget, replay(to_chain(p.rounded), p.fastest.ops).peak_memory);
  const interval_bounds b = make_interval_bounds(p.rounded, p.rounded_need, p.branches);
  const size_type M = std::max<size_type>(0, top - p.rounded.x[0]);
  p.dense_bytes = dense_table_bytes(make_dense_layout(b, p.rounded.L, M), p.rounded.L, M, threads);
  p.dense_seconds = main_dp_seconds(b, p.rounded.L, M, p.branches, threads);
}

// The plan of `which` on `c` at `budget` under `options` (budget and chain validated by the
// caller; `slots` may be any of its three kinds).
inline dp_plan choose(const chain& c, size_type budget, const solve_options& options,
                      solver which) {
  if (budget < 0) throw_solver_error("the budget must be >= 0");
  dp_plan p;
  p.which = which;
  p.branches = branches_of(which);
  p.mode = mode_of(options.slots);
  p.budget = budget;
  p.threads = p.mode == dp_mode::automatic ? 1U : dp_threads(options.threads);
  p.fastest = fastest_schedule_of(c, p.branches);
  if (p.mode == dp_mode::slots) {
    plan_slots(c, p, options, options.slots);
    return p;
  }
  p.md = make_model(c, 1);
  if (!p.md.exact_sums || !need_in_doubles(p.md)) {
    p.whole = true;
    p.allowance = options.max_estimated_seconds;
    return p;
  }
  p.need_seconds = need_dp_seconds(c, 1);
  check_dp_seconds(name(which), c, exact_units, p.need_seconds, need_dp_bytes(p.md.L), options,
                   "finding the least budget");
  p.need = persistent_need(p.md, p.branches);
  const size_type least = persistent_min_budget(p.md, p.need);
  p.min_feasible_budget = p.fastest.lower(least == unreachable ? solve_result::no_budget : least);
  p.settled = budget >= p.fastest.bytes.peak_memory || budget < p.min_feasible_budget;
  if (p.settled) return p;
  if (p.mode == dp_mode::exact) {
    p.allowance = options.max_estimated_seconds;
    return p;
  }
  // The default: the 500-slot solve's estimate (with its least budget, as a user runs it) sets
  // what the exact engines may spend, and its DP is the fallback, with the bound's DP (on
  // `auto_bound_slots` memories). Where those would pass the limits, the exact engines get the
  // limits, as when exact is asked for; elsewhere the exact attempts, the fallback and its bound
  // together stay within `max_estimated_seconds`.
  plan_slots(c, p, options, rotor_slots);
  const double slots_seconds = p.slots_need_seconds + p.dense_seconds;
  const double fallback_seconds =
      p.dense_seconds * (1 + static_cast<double>(tuning.auto_bound_slots) / rotor_slots);
  const double room = options.max_estimated_seconds - p.need_seconds - fallback_seconds;
  p.fallback = !(room < 0) &&
               !(p.dense_bytes >
                 static_cast<double>(options.max_table_bytes.value_or(default_table_limit())));
  p.allowance = p.fallback ? std::min(room, std::max(tuning.auto_min_exact_seconds,
                                                     tuning.auto_exact_share * slots_seconds))
                           : options.max_estimated_seconds;
  return p;
}

// The dense DP on `md` up to M with the solve's limits (table bytes, estimated time), its
// makespan and schedule for (0, L, M); an infinite makespan where the budget is infeasible.
struct dense_run {
  double makespan = infinite_time;
  std::vector<op> ops;
};

constexpr dense_run run_dense(const chain& c, const model& md, std::vector<size_type> need,
                              size_type M, dp_branches branches, const solve_options& options,
                              solver which, size_type slots, double need_seconds) {
  dense_run run;
  if (std::is_constant_evaluated()) {
    const reference_table t = reference_dp(md, M, branches);
    run.makespan = t.value[t.at(0, md.L, M)];
    if (run.makespan < infinite_time) run.ops = reference_ops(md, t, 0, md.L, M);
    return run;
  }
  interval_bounds bounds = make_interval_bounds(md, std::move(need), branches);
  dense_layout layout = make_dense_layout(bounds, md.L, M);
  const unsigned threads = dp_threads(options.threads);
  const double bytes = dense_table_bytes(layout, md.L, M, threads);
  const std::size_t limit = options.max_table_bytes.value_or(default_table_limit());
  if (bytes > static_cast<double>(limit)) throw_table_too_large(md.L, M, bytes, limit, name(which));
  check_dp_seconds(name(which), c, slots,
                   need_seconds + main_dp_seconds(bounds, md.L, M, branches, threads), bytes,
                   options, "the DP");
  const dense_table t = dense_dp(md, std::move(bounds), std::move(layout), M, branches, threads);
  run.makespan = t.get(0, md.L, M);
  if (run.makespan < infinite_time)
    run.ops = persistent_ops(md, 0, md.L, M, [&](std::int32_t i, std::int32_t l, size_type m) {
      return t.choice_at(md, i, l, m);
    });
  return run;
}

// Rotor's DP on the plan's slots: its least budget with these slots (`slots_min_budget`) where
// `least` is `no_budget`, the dense DP up to the budget (or the fastest schedule's peak, above
// which nothing changes), its schedule.
constexpr solve_result run_slots(const chain& c, const dp_plan& p, const solve_options& options,
                                 size_type least) {
  solve_result out;
  out.budget = p.budget;
  out.unit = p.unit.unit;
  out.min_feasible_budget = least;
  if (least == solve_result::no_budget)
    out.min_feasible_budget = p.fastest.lower(slots_min_budget(
        c, p.slots, persistent_min_budget(make_model(c, 1), p.branches), p.branches));
  // The fastest schedule is the answer wherever its own peak fits, even where sizes rounded up to
  // whole slots would not.
  if (p.fastest.bytes.peak_memory <= p.budget) {
    solve_result r = finish(c, p.which, p.budget, p.fastest.ops, p.fastest.bytes.makespan);
    r.min_feasible_budget = out.min_feasible_budget;
    r.unit = out.unit;
    r.exact = true;
    return r;
  }
  const size_type root_need = p.rounded_need[interval_index(p.rounded.L, 0, p.rounded.L)];
  if (root_need == unreachable || p.rounded.x[0] + root_need > p.unit.budget) return out;
  const size_type top =
      std::min(p.unit.budget, replay(to_chain(p.rounded), p.fastest.ops).peak_memory);
  const double need_seconds = p.mode == dp_mode::slots ? p.slots_need_seconds : 0;
  dense_run run = run_dense(c, p.rounded, p.rounded_need, top - p.rounded.x[0], p.branches, options,
                            p.which, p.slots, need_seconds);
  if (!(run.makespan < infinite_time)) throw_makespan_overflow(p.which);
  solve_result r = finish(c, p.which, p.budget, std::move(run.ops), run.makespan);
  r.min_feasible_budget = out.min_feasible_budget;
  r.unit = out.unit;
  r.exact = out.unit == 1;
  return r;
}

// The bound of a schedule of makespan `r.plan.makespan` at `r.budget` against the exact optimum,
// from the dense DP on the chain's sizes rounded down (`lb`: never above OPT on the chain's own
// sizes, engines/search_bounds.hpp): `makespan_loss`, and `memory_loss`, the share of the budget
// below which the exact optimum is no faster than this schedule. Where the bound reaches the
// makespan, the schedule is the exact optimum.
inline void bound_from(const model& md, const lower_bound_table& lb, solve_result& r) {
  const size_type m = r.budget - md.x[0];
  const std::size_t root = interval_index(md.L, 0, md.L);
  const double makespan = r.plan.makespan;
  const double floor_value = lb.at(root, m);
  if (!(floor_value < makespan)) {
    r.exact = true;
    r.makespan_loss = 0;
    r.memory_loss = 0;
    return;
  }
  r.makespan_loss = floor_value > 0 ? makespan / floor_value - 1 : infinite_time;
  // The least memory in units at which the bound falls below the makespan: below it, OPT is at
  // least the makespan.
  size_type k = 0;
  while (k < m / lb.unit && !(lb.dense.get(root, k) < makespan)) ++k;
  const size_type equal = std::min(m, k * lb.unit - 1);
  r.memory_loss = static_cast<double>(m - equal) / static_cast<double>(r.budget);
}

// How long the frontier DP runs before the exact engines are weighed (`exact_candidates`).
constexpr double probe_seconds_of(const dp_plan& p) noexcept {
  return std::min(tuning.frontier_probe_share * p.allowance, tuning.frontier_probe_seconds);
}

// The exact engines at one budget and what each is estimated to cost there.
enum class exact_engine : std::uint8_t { frontier, search, dense };

struct exact_candidate {
  exact_engine engine = exact_engine::frontier;
  double seconds = 0;
  double bytes = 0;
};

// The exact engines' estimates at the plan's budget, cheapest first (ties in the order frontier,
// search, dense): the frontier DP capped there from a probe of `probe_seconds` (`probe`, its
// table: the answer where the probe finished it), branch and bound from its lower bounds' DP
// (where `search_plan` gives bounds; `bounds` receives that plan), the dense DP on the chain's
// own units from its triples.
inline std::vector<exact_candidate> exact_candidates(const dp_plan& p, const solve_options& options,
                                                     double probe_seconds, frontier_table& probe,
                                                     std::optional<lower_bound_plan>& bounds) {
  const model& md = p.md;
  const size_type m = p.budget - md.x[0];
  const frontier_limits limits = frontier_limits_of(md.L, options, p.threads);
  std::vector<exact_candidate> out;
  probe = frontier_dp(md, {},
                      {.branches = p.branches,
                       .threads = limits.threads,
                       .max_work = probe_seconds * limits.rate,
                       .max_points = limits.max_points(),
                       .stop_on_projection = false,
                       .cap = m});
  // Exact asked for, the frontier DP stops as soon as a projection made as it goes passes its
  // limit, and from the first diagonals that can be above the whole: the most of them. The
  // default runs it to its limit of work instead, and weighs it on the projection.
  const bool stops = p.mode != dp_mode::automatic;
  const double work = probe.complete ? probe.work
                      : stops        ? std::max(probe.projected_work, probe.peak_projected_work)
                                     : probe.projected_work;
  const double points = probe.complete ? probe.points_done
                        : stops ? std::max(probe.projected_points, probe.peak_projected_points)
                                : probe.projected_points;
  out.push_back({exact_engine::frontier, limits.fixed.seconds + work / limits.rate,
                 limits.fixed.bytes + points * frontier_point_bytes});
  bounds = search_plan(md, m, p.branches, p.threads);
  if (bounds)
    out.push_back(
        {exact_engine::search, tuning.search_cost_factor * bounds->seconds, 2 * bounds->bytes});
  const interval_bounds b = make_interval_bounds(md, p.need, p.branches);
  out.push_back({exact_engine::dense, main_dp_seconds(b, md.L, m, p.branches, p.threads),
                 dense_table_bytes(make_dense_layout(b, md.L, m), md.L, m, p.threads)});
  // Ties in the order frontier, search, dense. (No stable_sort: it allocates a buffer.)
  std::sort(out.begin(), out.end(), [](const exact_candidate& x, const exact_candidate& y) {
    return x.seconds < y.seconds || (x.seconds == y.seconds && x.engine < y.engine);
  });
  return out;
}

// The exact solve at the plan's budget by the engines in order of their estimates, each that
// fits what is left of the allowance (and the table limit) tried until one finishes; empty where
// none does. `lower_bounds` receives the search's lower bounds where it ran.
// `weighed` receives the engines' estimates, the frontier DP's as it projected when it stopped
// and without the search where it gave up: what a refusal reports.
inline std::optional<solve_result> run_exact(const chain& c, const dp_plan& p,
                                             const solve_options& options,
                                             std::optional<lower_bound_table>& lower_bounds,
                                             std::vector<exact_candidate>& weighed) {
  const model& md = p.md;
  const size_type m = p.budget - md.x[0];
  const frontier_limits limits = frontier_limits_of(md.L, options, p.threads);
  const auto byte_limit = static_cast<double>(limits.byte_limit);
  auto exact_result = [&](std::vector<op> ops, double value) {
    if (!(value < infinite_time)) throw_makespan_overflow(p.which);
    solve_result r = finish(c, p.which, p.budget, std::move(ops), value);
    r.min_feasible_budget = p.min_feasible_budget;
    r.exact = true;
    return r;
  };
  const double probe_seconds = probe_seconds_of(p);
  frontier_table probe;
  std::optional<lower_bound_plan> bounds;
  const std::vector<exact_candidate> candidates =
      exact_candidates(p, options, probe_seconds, probe, bounds);
  weighed = candidates;
  auto update = [&weighed](exact_engine engine, double seconds, double bytes) {
    for (exact_candidate& w : weighed)
      if (w.engine == engine) w = {engine, seconds, bytes};
  };
  if (probe.complete)
    return exact_result(frontier_ops(md, probe, 0, md.L, m), probe.value(0, md.L, m));
  double spent = probe.work / limits.rate;
  for (const exact_candidate& e : candidates) {
    const double left = p.allowance - spent;
    if (e.seconds > left || e.bytes > byte_limit) continue;
    switch (e.engine) {
      case exact_engine::frontier: {
        const frontier_table t =
            frontier_dp(md, {},
                        {.branches = p.branches,
                         .threads = limits.threads,
                         .max_work = (left - limits.fixed.seconds) * limits.rate,
                         .max_points = limits.max_points(),
                         .stop_on_projection = p.mode != dp_mode::automatic,
                         .cap = m});
        spent += limits.fixed.seconds + t.work / limits.rate;
        if (t.complete) return exact_result(frontier_ops(md, t, 0, md.L, m), t.value(0, md.L, m));
        update(exact_engine::frontier,
               limits.fixed.seconds + std::max(t.projected_work, t.work) / limits.rate,
               limits.fixed.bytes +
                   std::max(t.projected_points, t.points_done) * frontier_point_bytes);
        break;
      }
      case exact_engine::search: {
        spent += bounds->seconds;
        const search_result r =
            search_dp_within(md, make_interval_bounds(md, p.need, p.branches), std::move(*bounds),
                             m, p.branches, p.threads, left, byte_limit, &lower_bounds);
        spent += r.work / tuning.search_work_per_second;
        if (r.complete) return exact_result(r.ops, r.value);
        update(exact_engine::search, infinite_time, e.bytes);  // it gave up: no estimate
        break;
      }
      case exact_engine::dense: {
        dense_run run =
            run_dense(c, md, p.need, m, p.branches, options, p.which, exact_units, p.need_seconds);
        return exact_result(std::move(run.ops), run.makespan);
      }
    }
  }
  return std::nullopt;
}

// The refusal of an exact solve no engine finished within the limits, with the estimate of the
// engine that came nearest: the fastest of those whose table fits, else the smallest table.
[[noreturn]] inline void refuse_exact(const chain& c, const dp_plan& p,
                                      const solve_options& options,
                                      const std::vector<exact_candidate>& weighed) {
  const frontier_limits limits = frontier_limits_of(p.md.L, options, p.threads);
  const auto byte_limit = static_cast<double>(limits.byte_limit);
  const exact_candidate* nearest = nullptr;
  for (const exact_candidate& e : weighed) {
    if (!(e.seconds < infinite_time)) continue;
    const bool fits = !(e.bytes > byte_limit);
    const bool nearest_fits = nearest != nullptr && !(nearest->bytes > byte_limit);
    if (nearest == nullptr || (fits && (!nearest_fits || e.seconds < nearest->seconds)) ||
        (!fits && !nearest_fits && e.bytes < nearest->bytes))
      nearest = &e;
  }
  const exact_candidate none{exact_engine::frontier, infinite_time, 0};
  if (nearest == nullptr) nearest = &none;
  refuse_frontier(name(p.which), c, nearest->seconds, nearest->bytes, options, limits.byte_limit);
}

// The least-memory DP's schedule (the fastest of least peak among its choices) at the plan's
// budget, which is at least the exact least budget.
inline solve_result least_peak_result(const chain& c, const dp_plan& p) {
  const least_peak_table t = least_peak_dp(p.md, p.branches);
  std::vector<op> ops =
      persistent_ops(p.md, 0, p.md.L, 0, [&](std::int32_t i, std::int32_t l, size_type) {
        return t.choice[interval_index(p.md.L, i, l)];
      });
  solve_result r =
      finish(c, p.which, p.budget, std::move(ops), t.time[interval_index(p.md.L, 0, p.md.L)]);
  r.min_feasible_budget = p.min_feasible_budget;
  r.unit = p.unit.unit;  // the fallback's, as the 500-slot schedule it stands in for
  return r;
}

// Runs the plan of `choose`.
constexpr solve_result run(const chain& c, const dp_plan& p, const solve_options& options) {
  if (p.mode == dp_mode::slots) return run_slots(c, p, options, solve_result::no_budget);
  if (p.whole) {
    try {
      return whole_frontier_at(c, make_whole_frontier(c, options, p.which), p.budget, p.which);
    } catch (const solver_error&) {
      if (p.mode == dp_mode::exact || std::is_constant_evaluated()) throw;
    }
    dp_plan slots = p;
    plan_slots(c, slots, options, rotor_slots);
    return run_slots(c, slots, options, solve_result::no_budget);
  }
  if (p.settled || std::is_constant_evaluated()) {
    // (In constant evaluation the frontier DP answers at every budget.)
    if (!p.settled) {
      const frontier_table t =
          frontier_dp(p.md, {}, {.branches = p.branches, .cap = p.budget - p.md.x[0]});
      return frontier_result(c, p.md, t, p.fastest, p.min_feasible_budget, p.budget, p.which);
    }
    return frontier_result(c, p.md, frontier_table{}, p.fastest, p.min_feasible_budget, p.budget,
                           p.which);
  }
  std::optional<lower_bound_table> bounds;
  std::vector<exact_candidate> weighed;
  if (std::optional<solve_result> r = run_exact(c, p, options, bounds, weighed)) return *r;
  if (!p.fallback) refuse_exact(c, p, options, weighed);
  solve_result r = run_slots(c, p, options, p.min_feasible_budget);
  // Sizes rounded up to slots can pass a budget that the chain's own sizes fit (near the exact
  // least budget): the least-memory DP's schedule fits from that least budget up.
  if (!r.feasible) r = least_peak_result(c, p);
  if (!r.exact) {
    if (!bounds) {
      const size_type m = p.budget - p.md.x[0];
      const size_type unit = std::max<size_type>(1, m / tuning.auto_bound_slots);
      bounds = make_lower_bounds(
          plan_lower_bounds_on(p.md, m, unit, p.branches, dp_threads(options.threads)), p.branches,
          dp_threads(options.threads));
    }
    bound_from(p.md, *bounds, r);
  }
  return r;
}

// `which` on `c` at `budget`: the plan, run.
constexpr solve_result solve_dp(const chain& c, size_type budget, const solve_options& options,
                                solver which) {
  if (std::is_constant_evaluated()) {
    // Constant evaluation: the same plan without the run-time estimates and engines.
    if (budget < 0) throw_solver_error("the budget must be >= 0");
    dp_plan p;
    p.which = which;
    p.branches = branches_of(which);
    p.mode = mode_of(options.slots);
    p.budget = budget;
    p.fastest = fastest_schedule_of(c, p.branches);
    if (p.mode == dp_mode::slots) {
      p.slots = options.slots;
      p.unit = discretize(budget, options.slots);
      p.rounded = make_model(c, p.unit.unit);
      p.rounded_need = persistent_need(p.rounded, p.branches);
      return run_slots(c, p, options, solve_result::no_budget);
    }
    p.md = make_model(c, 1);
    p.need = persistent_need(p.md, p.branches);
    const size_type least = persistent_min_budget(p.md, p.need);
    p.min_feasible_budget = p.fastest.lower(least == unreachable ? solve_result::no_budget : least);
    p.settled = budget >= p.fastest.bytes.peak_memory || budget < p.min_feasible_budget;
    return run(c, p, options);
  }
  return run(c, choose(c, budget, options, which), options);
}

}  // namespace remat::detail
