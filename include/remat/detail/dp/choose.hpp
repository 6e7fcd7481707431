// What a DP solve at one budget runs (`optimal`, `checkpoint-only`, and `min-memory`'s exact
// schedule), decided before any DP over memory runs: `choose` turns a request into a
// `dp_choice`, whose `step` is one value of `dp_step`; `dispatch` (dispatch.hpp) visits it once,
// to run it or to cost it. docs/architecture.md draws the steps.
//
// * Settled by the least-memory DP (O(L^3)) alone: below its least budget nothing fits; from the
//   peak of the fastest schedule the DP reaches (store-all; checkpoint-all without the tape
//   branch) that schedule is the answer.
// * `slots` = N: Rotor's dense DP on N slots of budget / N (sizes rounded up).
// * The whole frontier DP where the chain's sums round or its sizes pass 2^52.
// * The exact engines (`exact_units`, and the default `auto_slots`), each within what is left of
//   an allowance: the limits when exact is asked for (refused where none finishes), by default
//   the default's own limits (`default_engines`: tuning.hpp's `default_exact_seconds` and
//   `default_exact_bytes`), with the 500-slot DP as the fallback past them.
// * In constant evaluation: the frontier DP capped at the budget, without estimates or limits.
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/dp/cost.hpp>
#include <remat/detail/dp/discretize.hpp>
#include <remat/detail/dp/engines/dense.hpp>
#include <remat/detail/dp/frontier_solve.hpp>
#include <remat/detail/dp/intervals.hpp>
#include <remat/detail/dp/least_memory.hpp>
#include <remat/detail/dp/model.hpp>
#include <remat/detail/dp/platform.hpp>
#include <remat/detail/dp/tuning.hpp>
#include <remat/simulate.hpp>
#include <remat/solver_options.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace remat::detail {

enum class dp_mode : std::uint8_t {
  automatic,  // `auto_slots`: exact within the default's limits, else 500 slots with a bound
  exact,      // `exact_units`: exact within the limits, or refused
  slots,      // N slots: Rotor's DP
};

constexpr dp_mode mode_of(size_type slots) {
  if (slots == auto_slots) return dp_mode::automatic;
  if (slots == exact_units) return dp_mode::exact;
  if (slots < 0) throw_solver_error("slots must be > 0 (or exact_units, or auto_slots)");
  return dp_mode::slots;
}

// Who asks, at which budget, and how.
struct dp_request {
  solver which = solver::optimal;
  dp_branches branches = dp_branches::tape_and_checkpoint;
  dp_mode mode = dp_mode::automatic;
  size_type budget = 0;
  // The threads the estimates count: one in the default, whose choice between exact and 500
  // slots must not depend on the threads or the machine; the solve's own otherwise.
  unsigned threads = 1;
};

// The least-memory DP on the chain's own sizes: the needs every exact engine starts from.
struct least_memory_dp {
  std::vector<size_type> need;
  double seconds = 0;  // its estimate
};

// Rotor's dense DP on `slots` slots of the budget, every size rounded up to the slot: the solve
// with slots, and the default's fallback.
struct slotted_dp {
  size_type slots = 0;
  discretization unit;
  model rounded;
  std::vector<size_type> need;  // the least-memory DP of `rounded`
  double need_seconds = 0;      // the least-memory DPs of its least budget with these slots
  double dense_seconds = 0;     // the dense DP's estimate on `rounded`, and its table
  double dense_bytes = 0;
};

// The steps a solve can take.
struct settled_step {};   // the fastest schedule fits, or nothing does: no DP over memory
struct slots_step {};     // Rotor's DP on `dp_choice::slotted`
struct whole_step {       // the whole frontier DP, exact within the limits (by default, the
  bool fallback = false;  // default's); past them, by default the 500-slot DP, else the refusal
};
struct engines_step {      // the exact engines at the budget, each within what is left of:
  double allowance = 0;    // seconds at the estimates' rates, the frontier DP's probe included
  bool fallback = false;   // none finishes: the 500-slot DP with its bound, else a refusal
  frontier_limits limits;  // the table limit (by default, the default's) and the frontier's rate
};
struct constant_step {};  // constant evaluation: the frontier DP capped at the budget

// Built once, never assigned: clang 14 with libstdc++ 12 cannot change a variant's alternative
// in constant evaluation.
using dp_step = std::variant<settled_step, slots_step, whole_step, engines_step, constant_step>;

// The request, what its steps read, and the one step it takes.
struct dp_choice {
  dp_request request;
  fastest_schedule fastest;
  model md;               // on the chain's own sizes (empty with slots)
  least_memory_dp least;  // on them (empty with slots and for the whole frontier)
  // The exact least budget (with slots and for the whole frontier: found as they run).
  size_type min_feasible_budget = solve_result::no_budget;
  std::optional<slotted_dp> slotted;  // with slots, and the default's fallback
  dp_step step;
};

// Rotor's DP on `slots` slots at the request's budget: the unit, the rounded model and its needs,
// and (at run time) its estimates; with slots asked for, refused where finding its least budget
// passes `max_estimated_seconds`.
constexpr slotted_dp plan_slots(const chain& c, const dp_request& r,
                                const fastest_schedule& fastest, const solve_options& options,
                                size_type slots) {
  slotted_dp s;
  s.slots = slots;
  s.unit = discretize(r.budget, slots);
  s.rounded = make_model(c, s.unit.unit);
  bool costed = !std::is_constant_evaluated();  // (not const: see `choose`)
  if (costed) {
    s.need_seconds = need_dp_seconds(c, need_dp_runs(c, slots));
    if (r.mode == dp_mode::slots)
      check_dp_seconds(name(r.which), c, slots, s.need_seconds, need_dp_bytes(s.rounded.L), options,
                       "finding the least budget");
  }
  s.need = persistent_need(s.rounded, r.branches);
  if (costed) {
    const size_type top =
        std::min(s.unit.budget, replay(to_chain(s.rounded), fastest.ops).peak_memory);
    const interval_bounds b = make_interval_bounds(s.rounded, s.need, r.branches);
    const size_type M = std::max<size_type>(0, top - s.rounded.x[0]);
    s.dense_bytes =
        dense_table_bytes(make_dense_layout(b, s.rounded.L, M), s.rounded.L, M, r.threads);
    s.dense_seconds = main_dp_seconds(b, s.rounded.L, M, r.branches, r.threads);
  }
  return s;
}

// `c` with each stage's first option only, where any stage lists several: the same chain without
// its options (option 0 of a graph's block is plain autograd), whose schedules are schedules of
// `c`. The default is never slower on `c` than on it.
inline std::optional<chain> first_options_only(const chain& c) {
  if (std::ranges::none_of(c.stages, [](const stage& s) { return s.options.size() > 1; }))
    return std::nullopt;
  chain plain = c;
  for (stage& s : plain.stages)
    if (s.options.size() > 1) s.options.resize(1);
  return plain;
}

// The default's limits on an exact solve: those of `options`, within tuning.hpp's
// `default_exact_seconds` and `default_exact_bytes`.
inline solve_options default_exact_limits(const solve_options& options) {
  solve_options o = options;
  o.max_estimated_seconds = std::min(options.max_estimated_seconds, tuning.default_exact_seconds);
  const auto bytes = static_cast<std::size_t>(tuning.default_exact_bytes);
  o.max_table_bytes = std::min(options.max_table_bytes.value_or(default_table_limit()), bytes);
  return o;
}

// The default's exact engines: within `default_exact_limits` and what the limits of `options`
// leave beside the least-memory DP and the fallback (the 500-slot DP `s` and its bound's DP on
// `auto_bound_slots` memories). Where that fallback itself would pass the limits, the exact
// engines get the limits, as when exact is asked for, and none finishing is a refusal.
inline engines_step default_engines(const slotted_dp& s, double need_seconds,
                                    const solve_options& options, frontier_limits limits) {
  const double fallback_seconds = s.dense_seconds * fallback_dense_factor;
  const double room = options.max_estimated_seconds - need_seconds - fallback_seconds;
  const bool fallback = !(room < 0) && !(s.dense_bytes > static_cast<double>(limits.byte_limit));
  if (!fallback) return {options.max_estimated_seconds, false, limits};
  limits.byte_limit = std::min(limits.byte_limit, *default_exact_limits(options).max_table_bytes);
  return {std::min(room, tuning.default_exact_seconds), true, limits};
}

// What `which` runs on `c` at `budget` under `options` (the chain validated by the caller).
constexpr dp_choice choose(const chain& c, size_type budget, const solve_options& options,
                           solver which) {
  if (budget < 0) throw_solver_error("the budget must be >= 0");
  // Not const: a const bool initialized so is a constant expression, always true.
  bool constant = std::is_constant_evaluated();
  dp_request r{.which = which,
               .branches = branches_of(which),
               .mode = mode_of(options.slots),
               .budget = budget};
  if (!constant && r.mode != dp_mode::automatic) r.threads = dp_threads(options.threads);
  fastest_schedule fastest = fastest_schedule_of(c, r.branches);
  model md;
  least_memory_dp least;
  size_type min_budget = solve_result::no_budget;
  std::optional<slotted_dp> slotted;
  auto choice = [&](dp_step step) {
    return dp_choice{r,          std::move(fastest), std::move(md), std::move(least),
                     min_budget, std::move(slotted), step};
  };
  if (r.mode == dp_mode::slots) {
    slotted = plan_slots(c, r, fastest, options, options.slots);
    return choice(slots_step{});
  }
  md = make_model(c, 1);
  if (!constant && (!md.exact_sums || !need_in_doubles(md)))
    return choice(whole_step{r.mode == dp_mode::automatic});
  if (!constant) {
    least.seconds = need_dp_seconds(c, 1);
    check_dp_seconds(name(which), c, exact_units, least.seconds, need_dp_bytes(md.L), options,
                     "finding the least budget");
  }
  least.need = persistent_need(md, r.branches);
  const size_type root = persistent_min_budget(md, least.need);
  min_budget = fastest.lower(root == unreachable ? solve_result::no_budget : root);
  if (budget >= fastest.bytes.peak_memory || budget < min_budget) return choice(settled_step{});
  if (constant) return choice(constant_step{});
  const frontier_limits limits = frontier_limits_of(md.L, options, r.threads);
  if (r.mode == dp_mode::exact)
    return choice(engines_step{options.max_estimated_seconds, false, limits});
  slotted = plan_slots(c, r, fastest, options, rotor_slots);
  return choice(default_engines(*slotted, least.seconds, options, limits));
}

}  // namespace remat::detail
