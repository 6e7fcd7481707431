// The fastest schedule with offloading and recomputation, within the class docs/offload.md states:
// persistent schedules (docs/model.md) whose top-level cells may offload their input (a_i, or the
// tape t_i) during their own forward and prefetch it during the last op of the cell below.
//
// It runs the persistent DP (on `slots` memory units: 500 by default, or the sizes as given with
// `exact_units`), then the spine DP of detail/dp/offload_spine.hpp over its table, takes the
// fastest of that schedule, `solve_optimal`'s and the offloading baselines' at the same budget
// (solvers/offload_baselines.hpp), and tightens it where it moves tensors: drops or delays waits
// and issues prefetches earlier wherever the replay stays within the budget and gets faster
// (detail/solvers/tighten_transfers.hpp). So it is never slower than any of them, and bit for
// bit the recompute-only solve wherever offloading does not help (always on a chain without
// `transfer`). Makespan and peak are those of replaying the schedule by docs/offload.md's rules.
#pragma once

#include <remat/chain.hpp>
#include <remat/concepts.hpp>
#include <remat/detail/dp/cost_policy.hpp>
#include <remat/detail/dp/dispatch.hpp>
#include <remat/detail/dp/frontier_solve.hpp>
#include <remat/detail/dp/offload_spine.hpp>
#include <remat/detail/solvers/tighten_transfers.hpp>
#include <remat/detail/verify/finish.hpp>
#include <remat/simulate.hpp>
#include <remat/solver_options.hpp>
#include <remat/solvers/offload_baselines.hpp>
#include <remat/solvers/optimal.hpp>

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace remat {

namespace detail {

// The least budget of the offload DP's class, on the chain's own sizes.
inline size_type spine_least_budget(const chain& c) {
  const model exact = make_model(c, 1);
  const size_type root_need =
      offload_spine_need(exact, persistent_need(exact, dp_branches::tape_and_checkpoint), true);
  return root_need == unreachable ? solve_result::no_budget : exact.x[0] + root_need;
}

// The offloading baselines at `budget`: weighed against the spine DP's schedule, and their least
// budgets lower the floor below which nothing fits.
inline std::vector<solve_result> offload_baselines_at(const chain& c, size_type budget) {
  std::vector<solve_result> out;
  out.push_back(solve_save_on_cpu(c, budget));
  out.push_back(solve_vdnn(c, budget));
  out.push_back(solve_sequential_offload(c, budget));
  return out;
}

// The least of two least budgets, either of which may be `no_budget`.
constexpr size_type lesser_budget(size_type a, size_type b) noexcept {
  return a == solve_result::no_budget ? b : b == solve_result::no_budget ? a : std::min(a, b);
}

// Whether `solve_offload` runs the spine DP at `budget`, decided before it solves anything (so
// `estimate_solve_at` decides the same): not below `floor`, under which nothing of any of them
// fits, nor where the fastest schedule fits and computes every forward and backward once, each
// by its fastest option, which no schedule can beat.
inline bool offload_runs_spine(const chain& c, size_type budget, size_type floor) {
  if (floor != solve_result::no_budget && budget < floor) return false;
  double lower = c.loss_time;
  for (const stage& s : c.stages) {
    double fastest = infinite_time;  // F_all(k, o) and B(k): the least over options
    for (std::size_t o = 0; o < option_count(s); ++o)
      fastest = std::min(fastest, option_at(s, o).forward_time + option_at(s, o).backward_time);
    lower += fastest;
  }
  const fastest_schedule f = fastest_schedule_of(c, dp_branches::tape_and_checkpoint);
  return !(budget >= f.bytes.peak_memory && f.bytes.makespan <= lower);
}

// `r` with its copies kept running and prefetches issued earlier, where the replay says that
// helps (tighten_transfers.hpp); still `exact` where it was: no schedule of the class is faster.
inline solve_result tightened(const chain& c, size_type budget, solve_result r) {
  std::vector<op> tight = tighten_transfers(c, budget, r.schedule.ops);
  if (tight == r.schedule.ops) return r;
  const double makespan = replay(c, tight).makespan;
  solve_result out = finish(c, solver::offload, budget, std::move(tight), makespan);
  out.exact = r.exact;
  out.unit = r.unit;
  return out;
}

// `offload` at `budget` (solvers/offload.hpp): `optimal`'s solve (the recompute-only schedule it
// starts from); with a link, the spine's least budget (a least-memory DP) and the baselines, and
// where `offload_runs_spine`, the spine DP in each unit `for_spine_units` tries, as `spine_plan`
// costs it: until the budget reaches the spine's least budget in one, or one passes the limits,
// which the solve refuses.
inline solve_estimate estimate_offload(const chain& c, size_type budget,
                                       const solve_options& options) {
  solve_options recompute = options;
  recompute.solver = solver::optimal;
  solve_estimate out = estimate_persistent(c, budget, recompute, solver::optimal);
  if (!c.transfer.available() || !out.within_limits) return out;
  out.exact = false;
  out.seconds += need_dp_seconds(c, 1);
  size_type floor = spine_least_budget(c);
  for (const solve_result& r : offload_baselines_at(c, budget))
    floor = lesser_budget(floor, r.min_feasible_budget);
  if (!offload_runs_spine(c, budget, floor)) return out;
  const auto byte_limit =
      static_cast<double>(options.max_table_bytes.value_or(default_table_limit()));
  for_spine_units(c, budget, options, [&](const spine_plan& p) {
    if (!p.runs) return false;
    out.runs_dp = true;
    out.seconds += p.seconds;
    out.bytes = std::max(out.bytes, p.bytes);
    if (p.bytes > byte_limit || p.seconds > options.max_estimated_seconds) {
      out.within_limits = false;  // refused there
      return true;
    }
    out.exact = p.feasible && p.unit == 1;
    return p.feasible;
  });
  return out;
}

}  // namespace detail

/// The fastest schedule with offloading (docs/offload.md's class) for `budget`. Without
/// `transfer` on the chain it is `solve_optimal`'s result. `options.slots`: the memory units of
/// the offload DP (`auto_slots`: 500, finer where the budget is feasible but 500 slots lose it;
/// `exact_units`: the sizes as given); `coarsen` is refused. `min_feasible_budget` is exact with
/// `exact_units`; with slots it is the least of recompute-only's and the baselines' (or this
/// budget, where the DP found a schedule below those).
template <chain_like C>
solve_result solve_offload(const C& chain_in, size_type budget, const solve_options& options = {}) {
  detail::refuse_in_flight(solver::offload, options);
  const chain c = to_chain(chain_in);
  if (budget < 0) detail::throw_solver_error("the budget must be >= 0");
  if (options.coarsen != no_coarsening)
    detail::throw_solver_error(
        "offload: coarsening is not supported with offloading (solve the chain as given)");
  solve_options recompute_options = options;
  recompute_options.solver = solver::optimal;
  solve_result recompute = solve_optimal(c, budget, recompute_options);
  if (!c.transfer.available()) return recompute;

  const size_type spine_least = detail::spine_least_budget(c);
  constexpr auto lesser = detail::lesser_budget;
  // The least budget this solver reports: the DP's on the sizes as given only with exact_units
  // (with slots, sizes rounded up can need more), else recompute-only's and the baselines'.
  size_type least = recompute.min_feasible_budget;
  if (options.slots == exact_units) least = lesser(least, spine_least);
  // Below `floor` nothing of any of them fits, whatever the slots.
  size_type floor = spine_least;
  // The baselines' schedules are outside the DP's class where their copies run across ops the
  // class waits at: the fastest of all is returned, and the least of all least budgets.
  std::vector<solve_result> baselines = detail::offload_baselines_at(c, budget);
  for (const solve_result& r : baselines) {
    least = lesser(least, r.min_feasible_budget);
    floor = lesser(floor, r.min_feasible_budget);
  }
  recompute.memory_loss = 0;  // bounds against the persistent optimum, not this solver's
  recompute.makespan_loss = 0;
  recompute.exact = false;
  if (!detail::offload_runs_spine(c, budget, floor)) {
    recompute.min_feasible_budget = least;
    return recompute;
  }
  // The spine DP, in the units the dispatch chooses (`detail::run_spine`).
  detail::spine_run spine = detail::run_spine(c, budget, options);
  std::vector<op>& ops = spine.ops;
  const size_type unit = spine.unit;
  solve_result out = recompute;
  if (!ops.empty()) {
    const replay_result r = detail::replay(c, ops);
    if (!recompute.feasible || r.makespan < recompute.schedule.makespan) {
      out = detail::finish(c, solver::offload, budget, std::move(ops), r.makespan);
      out.unit = unit;
    }
    // The DP on the sizes as given: the schedule is the fastest of its class.
    out.exact = unit == 1;
  }
  for (solve_result& r : baselines) {
    if (r.feasible && (!out.feasible || r.schedule.makespan < out.schedule.makespan)) {
      out = detail::finish(c, solver::offload, budget, std::move(r.schedule.ops),
                           r.schedule.makespan);
      out.exact = false;
    }
  }
  if (out.feasible) out = detail::tightened(c, budget, std::move(out));
  // A schedule the DP found with slots below the others' least budgets is one at this budget.
  out.min_feasible_budget = out.feasible ? lesser(least, budget) : least;
  return out;
}

namespace detail {
// `solver::offload`'s row: its solve and its estimate.
template <>
struct solver_entry<solver::offload> : entry<&solve_offload<chain>, &estimate_offload> {};
}  // namespace detail

}  // namespace remat
