// `dispatch`'s policy that runs the step it visits (cost_policy.hpp costs it instead): the
// engines, Rotor's DP on slots, the fallback's bound, and the results they give.
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/dp/choose.hpp>
#include <remat/detail/dp/cost.hpp>
#include <remat/detail/dp/discretize.hpp>
#include <remat/detail/dp/engines/dense.hpp>
#include <remat/detail/dp/engines/frontier.hpp>
#include <remat/detail/dp/engines/reference.hpp>
#include <remat/detail/dp/engines/search.hpp>
#include <remat/detail/dp/engines/search_bounds.hpp>
#include <remat/detail/dp/exact_engines.hpp>
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

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

namespace remat::detail {

// The dense DP on `md` up to M, planned within the table limit: its bounds, layout and threads.
// `extra_bytes`, what the caller keeps beside the table, counts against the limit too; a table
// past it is refused, naming `which`.
struct dense_job {
  interval_bounds bounds;
  dense_layout layout;
  unsigned threads = 1;
  double bytes = 0;
};

inline dense_job plan_dense(const model& md, std::vector<size_type> need, size_type M,
                            dp_branches branches, const solve_options& options, solver which,
                            double extra_bytes = 0) {
  dense_job job;
  job.bounds = make_interval_bounds(md, std::move(need), branches);
  job.layout = make_dense_layout(job.bounds, md.L, M);
  job.threads = dp_threads(options.threads);
  job.bytes = dense_table_bytes(job.layout, md.L, M, job.threads) + extra_bytes;
  const std::size_t limit = options.max_table_bytes.value_or(default_table_limit());
  if (job.bytes > static_cast<double>(limit))
    throw_table_too_large(md.L, M, job.bytes, limit, name(which));
  return job;
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
  dense_job job = plan_dense(md, std::move(need), M, branches, options, which);
  check_dp_seconds(name(which), c, slots,
                   need_seconds + main_dp_seconds(job.bounds, md.L, M, branches, job.threads),
                   job.bytes, options, "the DP");
  const dense_table t =
      dense_dp(md, std::move(job.bounds), std::move(job.layout), M, branches, job.threads);
  run.makespan = t.get(0, md.L, M);
  if (run.makespan < infinite_time)
    run.ops = persistent_ops(md, 0, md.L, M, [&](std::int32_t i, std::int32_t l, size_type m) {
      return t.choice_at(md, i, l, m);
    });
  return run;
}

// Rotor's DP on `s`: its least budget with these slots (`slots_min_budget`) where `least` is
// `no_budget`, the dense DP up to the budget (or the fastest schedule's peak, above which nothing
// changes), its schedule.
constexpr solve_result run_slots(const chain& c, const dp_choice& d, const slotted_dp& s,
                                 const solve_options& options, size_type least) {
  const dp_request& r = d.request;
  solve_result out;
  out.budget = r.budget;
  out.unit = s.unit.unit;
  out.min_feasible_budget = least;
  if (least == solve_result::no_budget)
    out.min_feasible_budget = d.fastest.lower(slots_min_budget(
        c, s.slots, persistent_min_budget(make_model(c, 1), r.branches), r.branches));
  // The fastest schedule is the answer wherever its own peak fits, even where sizes rounded up to
  // whole slots would not.
  if (d.fastest.bytes.peak_memory <= r.budget) {
    solve_result f = finish(c, r.which, r.budget, d.fastest.ops, d.fastest.bytes.makespan);
    f.min_feasible_budget = out.min_feasible_budget;
    f.unit = out.unit;
    f.exact = true;
    return f;
  }
  const size_type root_need = s.need[interval_index(s.rounded.L, 0, s.rounded.L)];
  if (root_need == unreachable || s.rounded.x[0] + root_need > s.unit.budget) return out;
  const size_type top =
      std::min(s.unit.budget, replay(to_chain(s.rounded), d.fastest.ops).peak_memory);
  const double need_seconds = r.mode == dp_mode::slots ? s.need_seconds : 0;
  dense_run run = run_dense(c, s.rounded, s.need, top - s.rounded.x[0], r.branches, options,
                            r.which, s.slots, need_seconds);
  if (!(run.makespan < infinite_time)) throw_makespan_overflow(r.which);
  solve_result f = finish(c, r.which, r.budget, std::move(run.ops), run.makespan);
  f.min_feasible_budget = out.min_feasible_budget;
  f.unit = out.unit;
  f.exact = out.unit == 1;
  return f;
}

// The bound of a schedule of makespan `r.schedule.makespan` at `r.budget` against the exact
// optimum, from the dense DP on the chain's sizes rounded down (`lb`: never above OPT on the
// chain's own sizes, engines/search_bounds.hpp): `makespan_loss`, and `memory_loss`, the share of
// the budget below which the exact optimum is no faster than this schedule. Where the bound reaches
// the makespan, the schedule is the exact optimum.
inline void bound_from(const model& md, const lower_bound_table& lb, solve_result& r) {
  const size_type m = r.budget - md.x[0];
  const std::size_t root = interval_index(md.L, 0, md.L);
  const double makespan = r.schedule.makespan;
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

// The least-memory DP's schedule (the fastest of least peak among its choices) at the choice's
// budget, which is at least the exact least budget.
inline solve_result least_peak_result(const chain& c, const dp_choice& d) {
  const model& md = d.md;
  const least_peak_table t = least_peak_dp(md, d.request.branches);
  std::vector<op> ops =
      persistent_ops(md, 0, md.L, 0, [&](std::int32_t i, std::int32_t l, size_type) {
        return t.choice[interval_index(md.L, i, l)];
      });
  solve_result r = finish(c, d.request.which, d.request.budget, std::move(ops),
                          t.time[interval_index(md.L, 0, md.L)]);
  r.min_feasible_budget = d.min_feasible_budget;
  r.unit = d.slotted->unit.unit;  // the fallback's, as the 500-slot schedule it stands in for
  return r;
}

// Runs what `dispatch` visits; the leaves of dispatch.hpp's flow.
struct run_policy {
  using result = solve_result;
  const chain& c;
  const solve_options& options;

  // An exact schedule of makespan `value` at the budget.
  solve_result exact_result(const dp_choice& d, std::vector<op> ops, double value) const {
    if (!(value < infinite_time)) throw_makespan_overflow(d.request.which);
    solve_result r = finish(c, d.request.which, d.request.budget, std::move(ops), value);
    r.min_feasible_budget = d.min_feasible_budget;
    r.exact = true;
    return r;
  }

  constexpr solve_result settled(const dp_choice& d) const {
    return frontier_result(c, d.md, frontier_table{}, d.fastest, d.min_feasible_budget,
                           d.request.budget, d.request.which);
  }

  constexpr solve_result slots(const dp_choice& d, const slotted_dp& s, size_type least) const {
    return run_slots(c, d, s, options, least);
  }

  // (In constant evaluation the frontier DP answers at every budget.)
  constexpr solve_result constant(const dp_choice& d) const {
    const frontier_table t = frontier_dp(
        d.md, {}, {.branches = d.request.branches, .cap = d.request.budget - d.md.x[0]});
    return frontier_result(c, d.md, t, d.fastest, d.min_feasible_budget, d.request.budget,
                           d.request.which);
  }

  // The whole frontier; nullopt where it passes the limits (by default, the default's) and the
  // step falls back.
  std::optional<solve_result> whole(const dp_choice& d, const whole_step& w) const {
    try {
      const solve_options limits = w.fallback ? default_exact_limits(options) : options;
      return whole_frontier_at(c, make_whole_frontier(c, limits, d.request.which), d.request.budget,
                               d.request.which);
    } catch (const solver_error&) {
      if (!w.fallback) throw;
    }
    return std::nullopt;
  }

  // The probe finished the frontier DP: its schedule.
  solve_result probed(const dp_choice& d, const engines_step&, const exact_attempt& a) const {
    const size_type m = d.request.budget - d.md.x[0];
    return exact_result(d, frontier_ops(d.md, a.probe, 0, d.md.L, m), a.probe.value(0, d.md.L, m));
  }

  // Engine `x` within `left` seconds: its exact result, or nullopt where it stopped.
  std::optional<solve_result> engine(const dp_choice& d, const engines_step& e,
                                     const exact_candidate& x, double left,
                                     exact_attempt& a) const {
    const model& md = d.md;
    const dp_request& r = d.request;
    const size_type m = r.budget - md.x[0];
    const frontier_limits& limits = e.limits;
    switch (x.engine) {
      case exact_engine::frontier: {
        // From where the probe stopped, within `left` more.
        const double probed = a.probe.work;
        const frontier_table t =
            frontier_dp_resume(md, {},
                               {.threads = limits.threads,
                                .max_work = probed + left * limits.rate,
                                .max_points = limits.max_points(),
                                .stop_on_projection = r.mode != dp_mode::automatic},
                               std::move(a.probe));
        a.spent += (t.work - probed) / limits.rate;
        if (t.complete)
          return exact_result(d, frontier_ops(md, t, 0, md.L, m), t.value(0, md.L, m));
        a.weigh(exact_engine::frontier, (std::max(t.projected_work, t.work) - probed) / limits.rate,
                limits.fixed.bytes +
                    std::max(t.projected_points, t.points_done) * frontier_point_bytes);
        return std::nullopt;
      }
      case exact_engine::search: {
        a.spent += a.bounds->seconds;
        const search_result s = search_dp_within(
            md, make_interval_bounds(md, d.least.need, r.branches), std::move(*a.bounds), m,
            r.branches, r.threads, left, static_cast<double>(limits.byte_limit), &a.lower_bounds);
        a.spent += s.work / tuning.search_work_per_second;
        if (s.complete) return exact_result(d, s.ops, s.value);
        a.weigh(exact_engine::search, infinite_time, x.bytes);  // it gave up: no estimate
        return std::nullopt;
      }
      case exact_engine::dense: {
        dense_run run = run_dense(c, md, d.least.need, m, r.branches, options, r.which, exact_units,
                                  d.least.seconds);
        return exact_result(d, std::move(run.ops), run.makespan);
      }
    }
    return std::nullopt;
  }

  [[noreturn]] solve_result refuse(const dp_choice& d, const engines_step& e,
                                   const exact_attempt& a) const {
    refuse_exact(c, d, e, options, a.weighed);
  }

  // `own`, or the schedule of the same chain without its options (`plain`) where that is faster:
  // replayed on `c`, where it runs each stage's first option; exact only on that other chain.
  solve_result faster(const dp_choice& d, solve_result own,
                      std::optional<solve_result> plain) const {
    if (!plain || !plain->feasible ||
        (own.feasible && !(plain->schedule.makespan < own.schedule.makespan)))
      return own;
    solve_result r = finish(c, d.request.which, d.request.budget, std::move(plain->schedule.ops),
                            plain->schedule.makespan);
    const size_type least = own.min_feasible_budget;
    r.min_feasible_budget = least == solve_result::no_budget
                                ? plain->min_feasible_budget
                                : std::min(least, plain->min_feasible_budget);
    r.unit = plain->unit;
    return r;
  }

  // No exact engine finished: the 500-slot schedule, or the chain's schedule without its options
  // where faster (`plain`), bounded. Sizes rounded up to slots can pass a budget that the chain's
  // own sizes fit (near the exact least budget): the least-memory DP's schedule fits from that
  // least budget up.
  solve_result fallback(const dp_choice& d, const engines_step&, exact_attempt& a,
                        std::optional<solve_result> plain) const {
    solve_result r = run_slots(c, d, *d.slotted, options, d.min_feasible_budget);
    if (!r.feasible) r = least_peak_result(c, d);
    r = faster(d, std::move(r), std::move(plain));
    if (r.exact) return r;
    if (!a.lower_bounds) {
      const size_type m = d.request.budget - d.md.x[0];
      const size_type unit = std::max<size_type>(1, m / tuning.auto_bound_slots);
      const unsigned threads = dp_threads(options.threads);
      a.lower_bounds =
          make_lower_bounds(plan_lower_bounds_on(d.md, m, unit, d.request.branches, threads),
                            d.request.branches, threads);
    }
    bound_from(d.md, *a.lower_bounds, r);
    return r;
  }
};

}  // namespace remat::detail
