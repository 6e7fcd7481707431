// A budget sweep: several solvers over evenly spaced budgets, from the least budget at which the
// optimal solver finds a schedule up to the peak of storing everything (with K micro-batches in
// flight, up to what storing everything needs with them); and, for the solvers with
// a frontier (`optimal` and `checkpoint-only` on exact sizes), their whole trade-off curve.
//
//   remat::sweep_result s = remat::sweep(chain, {.solvers = {remat::solver::optimal,
//                                                            remat::solver::chen_sqrt}});
//   for (std::size_t k = 0; k < s.budgets.size(); ++k)
//     if (s.series[0].results[k].feasible) use(s.budgets[k],
//     s.series[0].results[k].schedule.makespan);
//
// The range is that of the trade-off: below the optimal solver's least budget no persistent
// schedule exists (at the sweep's discretization), and above the store-all peak nothing is faster
// than storing everything. A budget at which a solver finds nothing is an infeasible result, as
// `remat::solve` returns it; a solver that refuses the request (`exhaustive` on a long chain, a DP
// table over its limit) throws `solver_error` from here as from `solve`.
//
// `optimal` and `checkpoint-only` run their frontier DP once for the whole sweep where it is exact
// within the limits (`slots` = exact_units, or refused) or, by default (`auto_slots`), within
// about the time of solving each budget on its own: their results at the budgets are read back
// from it, and `sweep_series::curve` holds a result at every point of their curve
// (`remat::trade_off`), so that a chart or a table of the sweep has every budget where their
// makespan drops, not only the sampled ones. Elsewhere each budget is solved on its own.
#pragma once

#include <remat/chain.hpp>
#include <remat/concepts.hpp>
#include <remat/detail/dp/dispatch.hpp>
#include <remat/estimate.hpp>
#include <remat/schedule.hpp>
#include <remat/simulate.hpp>
#include <remat/solve.hpp>
#include <remat/solver_options.hpp>
#include <remat/solvers/min_memory.hpp>
#include <remat/solvers/optimal.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace remat {

struct sweep_options {
  /// The solvers to run at every budget, in this order.
  std::vector<remat::solver> solvers = {solver::optimal};
  /// How many budgets, at least 2 (fewer when the range has fewer distinct integers).
  std::size_t points = 20;
  /// Discretization, table limit and threads of the DP solvers, as in `solve_options`. The
  /// sweep's lowest budget is the optimal solver's least budget with these slots.
  size_type slots = default_slots;
  std::optional<std::size_t> max_table_bytes = std::nullopt;
  unsigned threads = 1;
  /// As in `solve_options`.
  double max_estimated_seconds = solve_options{}.max_estimated_seconds;
  /// Micro-batches in flight, as in `solve_options` (docs/pipelines.md): every solve keeps
  /// peak + (K - 1) * retained <= budget, and the range ends at what store-all needs so. With
  /// K > 1 every budget is solved on its own (no curves).
  std::size_t in_flight = 1;
  /// Called after each solve with the number of solves done and the total (budgets x solvers).
  std::function<void(std::size_t done, std::size_t total)> progress = nullptr;
};

/// One solver's results, one per budget of the sweep.
struct sweep_series {
  remat::solver solver = solver::optimal;
  std::vector<solve_result> results;
  /// The least budget at which this solver, with the sweep's options, finds a schedule
  /// (`solve_result::no_budget` when none does); it may lie outside the sweep's range.
  size_type min_feasible_budget = solve_result::no_budget;
  /// `optimal` and `checkpoint-only` on exact sizes: a result at every point of the solver's
  /// curve (`remat::trade_off`), in increasing budget, strictly decreasing makespan. Each is the
  /// exact result at the point's budget, with the point's makespan. Empty for the other solvers,
  /// with slots, and where the sweep solved each budget on its own.
  std::vector<solve_result> curve;
};

struct sweep_result {
  /// Increasing, distinct; the first is the optimal solver's least budget, the last the store-all
  /// peak (or the first, if rounding to slots puts that least budget above the peak).
  std::vector<size_type> budgets;
  double store_all_makespan = 0;  ///< the store-all schedule replayed on the chain
  size_type store_all_memory = 0;
  size_type store_all_retained = 0;  ///< what store-all holds at the loss
  std::vector<sweep_series> series;  ///< one per requested solver, in the requested order
};

namespace detail {

// `points` budgets from `lo` to `hi`, spaced as evenly as integers allow: lo + floor((hi - lo) *
// k / (points - 1)), computed without overflow; duplicates (a range narrower than the count)
// dropped.
inline std::vector<size_type> even_budgets(size_type lo, size_type hi, std::size_t points) {
  std::vector<size_type> out;
  const size_type range = hi - lo;
  const auto steps = static_cast<size_type>(points - 1);
  const size_type q = range / steps;
  const size_type r = range % steps;
  for (size_type k = 0; k <= steps; ++k) {
    const size_type b = lo + q * k + r * k / steps;
    if (out.empty() || out.back() != b) out.push_back(b);
  }
  return out;
}

// The options of the DP solvers in a sweep, and those of its whole frontiers: forced exact
// (refused past the limits), or by default within about what solving the budgets one by one may
// take (`points` times the estimate of the default solve at half of store-all's peak, each at
// least the frontier probe that solve starts with).
inline solve_options sweep_solve_options(const sweep_options& options) {
  return {.solver = solver::optimal,
          .slots = options.slots,
          .max_table_bytes = options.max_table_bytes,
          .threads = options.threads,
          .max_estimated_seconds = options.max_estimated_seconds,
          .in_flight = options.in_flight};
}

inline solve_options whole_frontier_options(const chain& c, const sweep_options& options,
                                            size_type store_all_memory) {
  solve_options whole = sweep_solve_options(options);
  if (options.slots == auto_slots) {
    const solve_estimate mid = estimate_solve_at(c, store_all_memory / 2, whole);
    const double each = std::max(mid.seconds, tuning.frontier_probe_seconds);
    whole.max_estimated_seconds =
        std::min(options.max_estimated_seconds, static_cast<double>(options.points) * each);
  }
  return whole;
}

// The whole frontiers a sweep reads its budgets from, one per DP, computed when first asked for:
// those of the solvers with a curve, and min-memory's (a point of optimal's), on exact sizes or
// by default; none where the default's frontier passes its limits.
class sweep_frontiers {
 public:
  sweep_frontiers(const chain& c, const sweep_options& options, size_type store_all_memory)
      : c_(c),
        options_(whole_frontier_options(c, options, store_all_memory)),
        exact_(options.slots == exact_units),
        on_((exact_ || options.slots == auto_slots) && options.in_flight == 1) {
    frontiers_.reserve(2);  // pointers into it stay valid
  }

  const whole_frontier* of(solver s) {
    const solver_info& about = info(s);
    if (!on_ || !(about.has_curve() || about.dp == solver_dp::least_memory)) return nullptr;
    if (about.dp == solver_dp::least_memory) s = solver::optimal;  // the same DP
    for (auto& [which, f] : frontiers_)
      if (which == s) return f ? &*f : nullptr;
    std::optional<whole_frontier> f;
    try {
      f = make_whole_frontier(c_, options_, s);
    } catch (const solver_error&) {
      if (exact_) throw;
    }
    frontiers_.emplace_back(s, std::move(f));
    return frontiers_.back().second ? &*frontiers_.back().second : nullptr;
  }

 private:
  const chain& c_;
  solve_options options_;
  bool exact_, on_;
  std::vector<std::pair<solver, std::optional<whole_frontier>>> frontiers_;
};

// One solver's series at `budgets`: read from its whole frontier `f` where it has one (with its
// curve), else solved budget by budget; `tick` after each budget.
template <class Tick>
sweep_series sweep_series_of(const chain& c, solver s, const std::vector<size_type>& budgets,
                             const whole_frontier* f, solve_options o, Tick&& tick) {
  sweep_series series;
  series.solver = s;
  o.solver = s;
  for (const size_type b : budgets) {
    if (f == nullptr) {
      series.results.push_back(solve(c, b, o));
    } else if (info(s).dp == solver_dp::least_memory) {
      // Min-memory's schedule is the exact optimum at the least budget, read from the frontier.
      solve_result r = whole_frontier_at(c, *f, std::min(b, f->min_feasible_budget), s);
      r.budget = b;
      series.results.push_back(std::move(r));
    } else {
      series.results.push_back(whole_frontier_at(c, *f, b, s));
    }
    tick();
  }
  if (f != nullptr && info(s).has_curve()) {
    for (const frontier_step& p : f->table.root()) {
      solve_result r = whole_frontier_at(c, *f, f->md.x[0] + p.m, s);
      if (!r.feasible) continue;
      if (!series.curve.empty() && !(r.schedule.makespan < series.curve.back().schedule.makespan))
        continue;
      series.curve.push_back(std::move(r));
    }
  }
  series.min_feasible_budget = series.results.front().min_feasible_budget;
  return series;
}

struct sweep_fn {
  /// Runs every solver of `options.solvers` at every budget of the sweep.
  template <chain_like C>
  sweep_result operator()(const C& chain_in, const sweep_options& options = {}) const {
    const chain c = to_chain(chain_in);
    if (options.points < 2) throw_solver_error("a sweep needs at least 2 budgets");
    if (options.solvers.empty()) throw_solver_error("a sweep needs at least one solver");

    sweep_result out;
    const std::vector<op> all = detail::store_all_ops(static_cast<std::int32_t>(c.length()));
    const replay_result base = replay(c, all);
    out.store_all_makespan = base.makespan;
    out.store_all_memory = base.peak_memory;
    out.store_all_retained = base.retained;
    const size_type store_all_need =
        base.peak_memory + static_cast<size_type>(options.in_flight - 1) * base.retained;

    const solve_options dp_options = sweep_solve_options(options);
    sweep_frontiers frontiers(c, options, out.store_all_memory);
    // The least budget does not depend on the budget asked for; 0 costs no table.
    const whole_frontier* optimal = frontiers.of(solver::optimal);
    const size_type least = optimal != nullptr
                                ? optimal->min_feasible_budget
                                : solve_optimal(c, 0, dp_options).min_feasible_budget;
    if (least == solve_result::no_budget)
      throw_solver_error("optimal: no budget is feasible with " + std::to_string(options.slots) +
                         " slots; use more slots");
    out.budgets = even_budgets(least, std::max(least, store_all_need), options.points);

    const std::size_t total = out.budgets.size() * options.solvers.size();
    std::size_t done = 0;
    const auto tick = [&] {
      if (options.progress) options.progress(++done, total);
    };
    for (const remat::solver s : options.solvers)
      out.series.push_back(sweep_series_of(c, s, out.budgets, frontiers.of(s), dp_options, tick));
    return out;
  }
};

}  // namespace detail

/// `remat::sweep(chain, options)`: see the file comment.
inline constexpr detail::sweep_fn sweep{};

}  // namespace remat
