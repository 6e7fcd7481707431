// The one dispatch of the DP solvers (`optimal`, `checkpoint-only`, and `min-memory`'s exact
// schedule): `choose` (choose.hpp) decides the step once, and `dispatch` visits it, under a
// policy: `run_policy` (run_policy.hpp) runs it, and `remat::estimate_solve_at`'s `cost_policy`
// (estimate.hpp) costs it, so the estimate and the solve take the same path. docs/architecture.md
// draws the flow.
//
// The default (`auto_slots`) is exact: a schedule is planned once per training run, so it runs the
// exact engines, cheapest first, until one finishes, within tuning.hpp's `default_exact_seconds`
// and `default_exact_bytes` (estimates at fixed rates on one thread: the same choice on every
// machine). Only where none fits them does it return the 500-slot schedule, whose distance from
// the exact optimum the same DP on sizes rounded down bounds; on a chain with options, the faster
// of that and the default's schedule of the same chain without them (`first_options_only`), so
// that options never make the default slower. Exact or not, it is never slower than the 500-slot
// schedule.
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/dp/choose.hpp>
#include <remat/detail/dp/cost.hpp>
#include <remat/detail/dp/discretize.hpp>
#include <remat/detail/dp/exact_engines.hpp>
#include <remat/detail/dp/least_memory.hpp>
#include <remat/detail/dp/model.hpp>
#include <remat/detail/dp/offload_spine.hpp>
#include <remat/detail/dp/run_policy.hpp>
#include <remat/detail/dp/tuning.hpp>
#include <remat/schedule.hpp>
#include <remat/solver_options.hpp>

#include <optional>
#include <utility>
#include <variant>
#include <vector>

namespace remat::detail {

template <class... F>
struct overloaded : F... {
  using F::operator()...;
};
template <class... F>
overloaded(F...) -> overloaded<F...>;

template <class Policy>
constexpr typename Policy::result dispatch(Policy& policy, const dp_choice& d);

// Where the default falls back on a chain with options: its step on the same chain without them
// (`first_options_only`), which the fallback is weighed against; nullopt where the chain lists
// none, or where that solve is refused.
template <class Policy>
std::optional<typename Policy::result> without_options(const Policy& policy, const dp_choice& d) {
  const std::optional<chain> plain = first_options_only(policy.c);
  if (!plain) return std::nullopt;
  try {
    Policy inner{*plain, policy.options};
    return dispatch(inner, choose(*plain, d.request.budget, policy.options, d.request.which));
  } catch (const solver_error&) {
    return std::nullopt;
  }
}

// The exact engines at the budget: the probe (its answer where it finished the frontier DP), then
// each engine that fits what is left of the allowance and the table limit, cheapest first, until
// one finishes; where none does, the fallback or the refusal.
template <class Policy>
typename Policy::result run_exact(Policy& policy, const dp_choice& d, const engines_step& e) {
  exact_attempt a = start_exact(d, e);
  if (a.probe.complete) return policy.probed(d, e, a);
  for (const exact_candidate& x : a.candidates) {
    if (!affordable(e, a, x)) continue;
    if (std::optional<typename Policy::result> r = policy.engine(d, e, x, left_for(e, a), a))
      return std::move(*r);
  }
  if (!e.fallback) return policy.refuse(d, e, a);
  return policy.fallback(d, e, a, without_options(policy, d));
}

// The step of `d`, visited once.
template <class Policy>
constexpr typename Policy::result dispatch(Policy& policy, const dp_choice& d) {
  using result = typename Policy::result;
  return std::visit(overloaded{
                        [&](settled_step) -> result { return policy.settled(d); },
                        [&](slots_step) -> result {
                          return policy.slots(d, *d.slotted, solve_result::no_budget);
                        },
                        [&](constant_step) -> result { return policy.constant(d); },
                        [&](const whole_step& w) -> result {
                          if (std::optional<result> r = policy.whole(d, w)) return std::move(*r);
                          // Past the default's limits: Rotor's DP, with its own least budget
                          // (or the chain's schedule without its options, where faster).
                          const slotted_dp s = plan_slots(policy.c, d.request, d.fastest,
                                                          policy.options, rotor_slots);
                          return policy.faster(d, policy.slots(d, s, solve_result::no_budget),
                                               without_options(policy, d));
                        },
                        [&](const engines_step& e) -> result { return run_exact(policy, d, e); },
                    },
                    d.step);
}

// Runs a choice of `choose`.
constexpr solve_result run(const chain& c, const dp_choice& d, const solve_options& options) {
  run_policy policy{c, options};
  return dispatch(policy, d);
}

// `which` on `c` at `budget`: the choice, run.
constexpr solve_result solve_dp(const chain& c, size_type budget, const solve_options& options,
                                solver which) {
  return run(c, choose(c, budget, options, which), options);
}

// The offload solver's spine DP (offload_spine.hpp) over the dense DP's table in one unit, planned
// before it runs: the model in that unit, its least-memory DP, whether the budget reaches the
// spine's least budget there, and the cost that `spine_ops` checks against the limits and
// `estimate_solve_at` reports (the least-memory DP; the dense DP; the spine's 2 (L + 1) (M + 1)
// cells of up to L + 1 splits each, counted at the dense DP's rate; the dense and spine tables).
struct spine_plan {
  size_type slots = exact_units;  // as asked for (the refusal names them)
  size_type unit = 1;
  model md;
  size_type M = 0;              // the budget in units
  std::vector<size_type> need;  // the least-memory DP in the unit (empty where M < x[0])
  bool feasible = false;        // the budget reaches the spine's least budget in the unit
  bool runs = false;            // a DP runs: the input alone fits M
  double seconds = 0;
  double bytes = 0;
};

inline spine_plan plan_spine(const chain& c, size_type budget, size_type slots,
                             const solve_options& options) {
  constexpr dp_branches branches = dp_branches::tape_and_checkpoint;
  spine_plan p;
  p.slots = slots;
  const discretization d = discretize(budget, slots);
  p.unit = d.unit;
  p.md = make_model(c, d.unit);
  p.M = d.budget;
  if (p.M < p.md.x[0]) return p;
  p.runs = true;
  const std::int32_t L = p.md.L;
  p.need = persistent_need(p.md, branches);
  const size_type root = offload_spine_need(p.md, p.need, true);
  p.feasible = root != unreachable && root <= p.M - p.md.x[0];
  const interval_bounds b = make_interval_bounds(p.md, p.need, branches);
  const unsigned threads = dp_threads(options.threads);
  p.bytes = dense_table_bytes(make_dense_layout(b, L, p.M), L, p.M, threads) +
            offload_spine_bytes(L, p.M);
  const double spine_pairs = 2 * (static_cast<double>(L) + 1) * (static_cast<double>(L) + 1) *
                             (static_cast<double>(p.M) + 1);
  p.seconds = need_dp_seconds(c, 1) + main_dp_seconds(b, L, p.M, branches, threads) +
              spine_pairs / main_triples_per_second(L, branches);
  return p;
}

// The spine DP as planned: its schedule, or none where the budget is infeasible in that unit; a
// `solver_error` where its tables pass `max_table_bytes` or its estimate `max_estimated_seconds`.
inline std::vector<op> spine_ops(const chain& c, const spine_plan& p,
                                 const solve_options& options) {
  if (!p.runs) return {};
  constexpr dp_branches branches = dp_branches::tape_and_checkpoint;
  const model& md = p.md;
  dense_job job = plan_dense(md, p.need, p.M, branches, options, solver::offload,
                             offload_spine_bytes(md.L, p.M));
  check_dp_seconds(name(solver::offload), c, p.slots, p.seconds, job.bytes, options,
                   "the offload DP");
  const dense_table t =
      dense_dp(md, std::move(job.bounds), std::move(job.layout), p.M, branches, job.threads);
  const offload_spine spine(md, c, t, p.M);
  const size_type root = p.M - md.x[0];
  if (!(spine.value(0, tensor_kind::activation, root) < infinite_time)) return {};
  return spine.ops(root);
}

// The units the spine DP runs in at `budget`, in order: that of `options.slots` (`exact_units`:
// the chain's own), and by default `rotor_slots` slots, then `tuning.offload_slot_growth` times
// as many while the DP finds nothing, up to `tuning.offload_max_slots` slots or a unit of 1.
// `visit(plan)` returns whether the DP found a schedule there (the last unit is then reached).
template <class Visit>
void for_spine_units(const chain& c, size_type budget, const solve_options& options,
                     Visit&& visit) {
  const dp_mode mode = mode_of(options.slots);
  for (size_type slots = mode == dp_mode::automatic ? rotor_slots : options.slots;;
       slots *= tuning.offload_slot_growth) {
    const spine_plan p = plan_spine(c, budget, slots, options);
    if (visit(p) || mode != dp_mode::automatic || p.unit == 1 || slots >= tuning.offload_max_slots)
      return;
  }
}

// The offload solver's spine DP at `budget` and the unit it ran in (`for_spine_units`).
struct spine_run {
  std::vector<op> ops;  // empty: infeasible in every unit tried
  size_type unit = 1;
};

inline spine_run run_spine(const chain& c, size_type budget, const solve_options& options) {
  spine_run r;
  for_spine_units(c, budget, options, [&](const spine_plan& p) {
    r.unit = p.unit;
    r.ops = spine_ops(c, p, options);
    return !r.ops.empty();
  });
  return r;
}

}  // namespace remat::detail
