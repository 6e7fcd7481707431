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

// The offload solver's spine DP (offload_spine.hpp) over the dense DP's table, in one unit: its
// schedule, or none where the budget is infeasible in that unit.
inline std::vector<op> spine_ops(const chain& c, size_type budget, size_type unit,
                                 const solve_options& options) {
  const model md = make_model(c, unit);
  const size_type M = budget / unit;
  if (M < md.x[0]) return {};
  constexpr dp_branches branches = dp_branches::tape_and_checkpoint;
  dense_job job = plan_dense(md, persistent_need(md, branches), M, branches, options,
                             solver::offload, offload_spine_bytes(md.L, M));
  const dense_table t =
      dense_dp(md, std::move(job.bounds), std::move(job.layout), M, branches, job.threads);
  const offload_spine spine(md, c, t, M);
  const size_type root = M - md.x[0];
  if (!(spine.value(0, tensor_kind::activation, root) < infinite_time)) return {};
  return spine.ops(root);
}

// The offload solver's spine DP at `budget` and the unit it ran in: that of `options.slots`
// (`exact_units`: the chain's own), and by default `rotor_slots` slots, then
// `tuning.offload_slot_growth` times as many while the DP finds nothing, up to
// `tuning.offload_max_slots` slots or a unit of 1.
struct spine_run {
  std::vector<op> ops;  // empty: infeasible in every unit tried
  size_type unit = 1;
};

inline spine_run run_spine(const chain& c, size_type budget, const solve_options& options) {
  const dp_mode mode = mode_of(options.slots);
  size_type slots = mode == dp_mode::automatic ? rotor_slots : options.slots;
  for (;; slots *= tuning.offload_slot_growth) {
    spine_run r;
    r.unit = discretize(budget, slots).unit;
    r.ops = spine_ops(c, budget, r.unit, options);
    if (!r.ops.empty() || mode != dp_mode::automatic || r.unit == 1 ||
        slots >= tuning.offload_max_slots)
      return r;
  }
}

}  // namespace remat::detail
