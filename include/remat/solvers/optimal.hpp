// The optimal persistent schedule: the dynamic program of MODEL.md, with the exact check.
//
// OPT(i, l, m) is the least time to produce g_i from the input of stage i (held, not counted in
// m) and the gradient g_{l+1} (held, counted). A cell is either a base case, the tape branch
// (F_all(i), solve (i+1, l), B(i)), or the checkpoint branch at some j (F_ck(i), F_none(i+1 ..
// j-1), solve (j, l) holding a_j, then solve (i, j-1)). Ties go to the tape branch, then to the
// smallest j, so the schedule is a pure function of the chain and the budget.
#pragma once

#include <remat/chain.hpp>
#include <remat/concepts.hpp>
#include <remat/detail/dp/discretize.hpp>
#include <remat/detail/dp/cost.hpp>
#include <remat/detail/dp/model.hpp>
#include <remat/detail/dp/optimal_fast.hpp>
#include <remat/detail/dp/persistent_dp.hpp>
#include <remat/detail/verify/finish.hpp>
#include <remat/schedule.hpp>
#include <remat/simulate.hpp>
#include <remat/solver_options.hpp>
#include <remat/solvers/sequential.hpp>
#include <remat/solvers/store_all.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace remat {
namespace detail {

// The DP table: OPT and the choice that achieves it for every interval and every m in 0..M.
struct optimal_table {
  std::int32_t L = 0;
  size_type M = 0;
  std::vector<double> value;         // [interval][m]
  std::vector<std::int32_t> choice;  // 0: tape branch or base case, j > 0: checkpoint at j

  constexpr std::size_t at(std::int32_t i, std::int32_t l, size_type m) const noexcept {
    return interval_index(L, i, l) * static_cast<std::size_t>(M + 1) + static_cast<std::size_t>(m);
  }
};

// One cell of the DP. Reads only cells of strictly shorter intervals (any m) and so is correct
// for any loop order that finishes shorter intervals first, whatever the sizes (zeros included).
//
// Two rules on top of MODEL.md, with the interval's `store` and `S` (`interval_bounds`):
// * store: from m = store on, the cell takes the tape branch and its value is S;
// * clamp: below it, the value is max(S, least branch) (the choice stays the least branch).
// In exact arithmetic both change nothing: S is a lower bound of every schedule of the interval,
// and the tape branch reaches it from store on (ties go to the tape branch). The model's sums are
// exact (`model::exact_sums`) except for times near the largest double; there a sum of the same
// times in another order may round below S, and the rules keep every value >= S and
// non-increasing in m bit for bit, which the fast DP (detail/dp/optimal_fast.hpp) needs to prune
// exactly, and which it reproduces.
constexpr void optimal_cell(const model& md, optimal_table& t, const interval_bounds& bounds,
                            std::int32_t i, std::int32_t l, size_type m, size_type mmin,
                            dp_branches branches = dp_branches::tape_and_checkpoint) {
  auto at = [](std::int32_t k) { return static_cast<std::size_t>(k); };
  const std::size_t c = interval_index(md.L, i, l);
  double best = infinite_time;
  std::int32_t choice = -1;
  if (m >= bounds.store[c]) {
    best = bounds.S[c];
    choice = 0;
  } else if (i == md.L) {
    if (m >= md.x[at(md.L)] + md.bt[at(md.L)]) {
      best = md.bw[at(md.L)];
      choice = 0;
    }
  } else {
    const bool tape_ops_fit = m >= md.x[at(l + 1)] + md.xb[at(i + 1)] + md.ft[at(i)] &&
                              m >= md.x[at(i)] + md.x[at(i + 1)] + md.xb[at(i + 1)] + md.bt[at(i)];
    if (i == l) {
      if (tape_ops_fit) {
        best = md.fw[at(i)] + md.bw[at(i)];
        choice = 0;
      }
    } else if (m >= mmin) {
      if (branches == dp_branches::tape_and_checkpoint && tape_ops_fit && m >= md.xb[at(i + 1)]) {
        const double rest = t.value[t.at(i + 1, l, m - md.xb[at(i + 1)])];
        if (rest < infinite_time) {
          best = md.fw[at(i)] + md.bw[at(i)] + rest;
          choice = 0;
        }
      }
      double forward = 0;
      for (std::int32_t j = i + 1; j <= l; ++j) {
        forward += md.fw[at(j - 1)];
        if (m < md.x[at(j)]) continue;
        const double v =
            forward + t.value[t.at(j, l, m - md.x[at(j)])] + t.value[t.at(i, j - 1, m)];
        if (v < best) {
          best = v;
          choice = j;
        }
      }
    }
    if (best < infinite_time) best = std::max(bounds.S[c], best);
  }
  t.value[t.at(i, l, m)] = best;
  t.choice[t.at(i, l, m)] = choice;
}

// The straightforward DP: m outermost, then intervals by increasing length, each cell a scan over
// its branches. O(L^3 M) time, O(L^2 M) table. Kept for constant evaluation and as the oracle of
// the fast DP.
constexpr optimal_table optimal_dp_reference(
    const model& md, size_type M, dp_branches branches = dp_branches::tape_and_checkpoint) {
  optimal_table t;
  t.L = md.L;
  t.M = M;
  const std::size_t cells = interval_count(md.L) * static_cast<std::size_t>(M + 1);
  t.value.assign(cells, infinite_time);
  t.choice.assign(cells, -1);
  const interval_bounds bounds = make_interval_bounds(md, persistent_need(md, branches), branches);
  std::vector<size_type> mmin(interval_count(md.L), 0);
  for (std::int32_t i = 0; i < md.L; ++i)
    for (std::int32_t l = i + 1; l <= md.L; ++l)
      mmin[interval_index(md.L, i, l)] = necessary_memory(md, i, l);
  for (size_type m = 0; m <= M; ++m)
    for (std::int32_t d = 0; d <= md.L; ++d)
      for (std::int32_t i = 0; i + d <= md.L; ++i)
        optimal_cell(md, t, bounds, i, i + d, m, mmin[interval_index(md.L, i, i + d)], branches);
  return t;
}

// The schedule of cell (i, l, m) of a table.
constexpr std::vector<op> optimal_ops(const model& md, const optimal_table& t, std::int32_t i,
                                      std::int32_t l, size_type m) {
  return persistent_ops(md, i, l, m, [&](std::int32_t ci, std::int32_t cl, size_type cm) {
    return t.choice[t.at(ci, cl, cm)];
  });
}

[[noreturn]] inline void throw_table_too_large(std::int32_t L, size_type M, double bytes,
                                               std::size_t limit,
                                               std::string_view solver_name = "optimal") {
  auto readable = [](double n, char* out, std::size_t size) {
    if (n >= 1073741824.0)
      std::snprintf(out, size, "%.1f GiB", n / 1073741824.0);
    else if (n >= 1048576.0)
      std::snprintf(out, size, "%.1f MiB", n / 1048576.0);
    else
      std::snprintf(out, size, "%.0f bytes", n);
  };
  char need[32];
  char cap[32];
  readable(bytes, need, sizeof need);
  readable(static_cast<double>(limit), cap, sizeof cap);
  char text[320];
  std::snprintf(text, sizeof text,
                "%.*s: the DP table for %d stages and %lld memory units would need %s (limit %s, "
                "max_table_bytes); use fewer slots (--slots N), coarser stages, or raise the limit",
                static_cast<int>(solver_name.size()), solver_name.data(), static_cast<int>(L),
                static_cast<long long>(M), need, cap);
  throw_solver_error(text);
}

// The smallest byte budget at which the problem discretized into `slots` = N units is feasible,
// or `no_budget`. Budgets in ((u-1)N, uN] all use the unit u (the first band, [0, N], unit 1),
// and with unit u a budget B is feasible exactly when floor(B / u) >= Need(u), the least budget
// in units of the chain rounded to u. Need(u) never increases with u (rounded sizes do not), so
// the answer lies in the band of the least u with Need(u) <= N, found by bisection, at
// max(band start, u * Need(u)). Exact: no monotonicity in B is assumed. `exact` is Need(1),
// `persistent_min_budget` on the chain's own sizes (the caller has it).
constexpr size_type slots_min_budget(const chain& c, size_type slots, size_type exact,
                                     dp_branches branches) {
  auto need = [&](size_type unit) { return persistent_min_budget(make_model(c, unit), branches); };
  auto fits = [&](size_type unit) {
    const size_type n = need(unit);
    return n != unreachable && n <= slots;
  };
  // Beyond the largest size every nonzero size is one unit: Need(u) no longer changes.
  size_type largest = std::max(c.input_size, c.loss_overhead);
  for (const stage& s : c.stages)
    largest = std::max({largest, s.tape_size, s.forward_overhead, s.backward_overhead});
  size_type hi = std::max<size_type>(1, largest);
  if (!fits(hi)) return solve_result::no_budget;
  // Need(u) * u >= Need(1), so no u below Need(1) / N can fit.
  size_type lo = std::max<size_type>(1, exact / slots);
  if (fits(lo)) {
    hi = lo;
  } else {
    while (hi - lo > 1) {  // fits(hi), !fits(lo)
      const size_type mid = lo + (hi - lo) / 2;
      (fits(mid) ? hi : lo) = mid;
    }
  }
  const size_type unit = hi;
  // The band must hold a representable budget (budgets go up to 2^63 - 1).
  if (unit > std::numeric_limits<size_type>::max() / slots) return solve_result::no_budget;
  const size_type band_start = unit == 1 ? 0 : (unit - 1) * slots + 1;
  return std::max(band_start, unit * need(unit));
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

// `ops` (`bytes`: its replay on the chain's sizes) in place of `best` where it fits `budget` and
// is faster (or `best` is infeasible); `best.min_feasible_budget` is kept.
constexpr void keep_faster(solve_result& best, const chain& c, size_type budget,
                           std::vector<op> ops, const replay_result& bytes) {
  if (bytes.peak_memory > budget || (best.feasible && !(bytes.makespan < best.plan.makespan)))
    return;
  const size_type least = best.min_feasible_budget;
  best = finish(c, solver::optimal, budget, std::move(ops), bytes.makespan);
  best.min_feasible_budget = least;
}

// With slots, sizes rounded up can leave the DP's schedule slower than a simple schedule on the
// exact sizes, or infeasible where one fits (on chains of identical blocks checkpoint_sequential
// was up to 1.6 points of store-all's time faster at 500 slots). `optimal` then returns the
// simple one: the fastest of its DP schedule, checkpoint-all and checkpoint_sequential (its best
// segment count), each replayed on the chain's own sizes; `min_feasible_budget` is the least of
// theirs. In exact units the DP is never slower than either (both are persistent schedules), so
// nothing changes there. Ties keep the DP's schedule.
//
// Where the DP does not fit (`dp_fits` false) but some persistent schedule does on the exact
// sizes, the schedule of least peak (min-memory's) is a candidate too, and the least budget is
// that peak, `least` (`persistent_min_budget` on the exact sizes): `optimal` with slots is
// feasible wherever any persistent schedule fits the bytes.
constexpr solve_result exact_size_schedules(const chain& c, size_type budget, bool dp_fits,
                                            size_type least) {
  const std::vector<op> all = checkpoint_all_ops(static_cast<std::int32_t>(c.length()));
  const replay_result all_bytes = replay(c, all);
  solve_result best = solve_sequential(c, budget);
  best.min_feasible_budget = best.min_feasible_budget == solve_result::no_budget
                                 ? all_bytes.peak_memory
                                 : std::min(best.min_feasible_budget, all_bytes.peak_memory);
  keep_faster(best, c, budget, all, all_bytes);
  if (least == unreachable) return best;
  best.min_feasible_budget = std::min(best.min_feasible_budget, least);
  if (dp_fits || budget < least) return best;
  const model exact = make_model(c, 1);
  const least_peak_table t = least_peak_dp(exact);
  std::vector<op> ops =
      persistent_ops(exact, 0, exact.L, 0, [&](std::int32_t i, std::int32_t l, size_type) {
        return t.choice[interval_index(exact.L, i, l)];
      });
  const replay_result least_bytes = replay(c, ops);
  keep_faster(best, c, budget, std::move(ops), least_bytes);
  return best;
}

// `dp`, or the plan of `simple` where it is faster (or `dp` is infeasible); ties keep `dp`. Both
// replayed on the chain's own times (the DP's makespan sums the model's, rounded to its quantum,
// in another order: a tie there would go either way by the last bit).
constexpr solve_result faster_of(solve_result dp, const solve_result& simple, const chain& c) {
  if (simple.feasible && (!dp.feasible || simple.plan.makespan < replay(c, dp.plan.ops).makespan)) {
    dp.feasible = true;
    dp.plan = simple.plan;
  }
  return dp;
}

// The DP solvers (`optimal`, `checkpoint-only`): discretize, find the least feasible budget,
// fill the table and read the schedule of (0, L, M) back.
constexpr solve_result solve_persistent(const chain& c, size_type budget,
                                        const solve_options& options, solver which,
                                        dp_branches branches) {
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
  const size_type min_units = root_need == unreachable ? unreachable : md.x[0] + root_need;
  solve_result out;
  size_type exact_least = min_units;  // the least budget on the chain's own sizes
  if (options.slots == exact_units) {
    out.min_feasible_budget = min_units == unreachable ? solve_result::no_budget : min_units;
  } else {
    exact_least = persistent_min_budget(make_model(c, 1), branches);
    out.min_feasible_budget = slots_min_budget(c, options.slots, exact_least, branches);
  }
  const bool with_simple = which == solver::optimal && options.slots != exact_units;
  solve_result simple;  // (a std::optional of it would not be a literal type)
  if (with_simple) {
    simple = exact_size_schedules(c, budget, min_units != unreachable && min_units <= d.budget,
                                  exact_least);
    if (out.min_feasible_budget == solve_result::no_budget ||
        (simple.min_feasible_budget != solve_result::no_budget &&
         simple.min_feasible_budget < out.min_feasible_budget))
      out.min_feasible_budget = simple.min_feasible_budget;
  }
  // The fastest schedule the DP can reach: store-all with the tape branch, checkpoint-all
  // without it. When its own peak fits the budget it is the answer, even where sizes rounded up
  // to whole slots would not fit (with slots, baselines on exact sizes would otherwise win there).
  std::vector<op> fastest;  // (a conditional of two vector calls trips g++ 12 in constexpr)
  if (branches == dp_branches::tape_and_checkpoint)
    fastest = store_all_ops(md.L);
  else
    fastest = checkpoint_all_ops(md.L);
  const replay_result fastest_bytes = replay(c, fastest);
  if (out.min_feasible_budget == solve_result::no_budget ||
      fastest_bytes.peak_memory < out.min_feasible_budget)
    out.min_feasible_budget = fastest_bytes.peak_memory;
  if (fastest_bytes.peak_memory <= budget) {
    solve_result r = finish(c, which, budget, fastest, fastest_bytes.makespan);
    r.min_feasible_budget = out.min_feasible_budget;
    r.unit = d.unit;
    return r;
  }
  // Above the fastest schedule's peak OPT no longer decreases: tables stop there.
  const size_type fastest_units = replay(to_chain(md), fastest).peak_memory;
  // The DP's makespan and schedule for (0, L, units - x[0]). Over the table or time limits it
  // throws, or with `quiet` returns nothing (`ran` false). The makespan is infinite where every
  // time is finite but their sum is not.
  struct dp_run {
    bool ran = false;
    double makespan = infinite_time;
    std::vector<op> ops;
  };
  std::vector<size_type> need_left = std::move(need);
  double quiet_seconds = need_seconds;  // the needs' estimate, and the quiet runs' so far
  auto run_dp = [&](size_type units, bool quiet) {
    dp_run run;
    const size_type M = std::min(units, fastest_units) - md.x[0];
    if (std::is_constant_evaluated()) {
      const optimal_table t = optimal_dp_reference(md, M, branches);
      run.ran = true;
      run.makespan = t.value[t.at(0, md.L, M)];
      if (run.makespan < infinite_time) run.ops = optimal_ops(md, t, 0, md.L, M);
      return run;
    }
    interval_bounds bounds = make_interval_bounds(md, need_left, branches);
    fast_layout layout = make_fast_layout(bounds, md.L, M);
    const unsigned threads = dp_threads(options.threads);
    const double bytes = fast_table_bytes(layout, md.L, M, threads);
    const std::size_t limit = options.max_table_bytes.value_or(default_table_limit());
    const double seconds = main_dp_seconds(bounds, md.L, M, branches, threads);
    if (quiet) {
      quiet_seconds += seconds;
      if (bytes > static_cast<double>(limit) || quiet_seconds > options.max_estimated_seconds)
        return run;
    } else {
      if (bytes > static_cast<double>(limit))
        throw_table_too_large(md.L, M, bytes, limit, name(which));
      check_dp_seconds(name(which), c, options.slots, need_seconds + seconds, bytes, options,
                       "the DP");
    }
    const fast_table t =
        optimal_dp_fast(md, std::move(bounds), std::move(layout), M, branches, threads);
    run.ran = true;
    run.makespan = t.get(0, md.L, M);
    if (run.makespan < infinite_time)
      run.ops = persistent_ops(md, 0, md.L, M, [&](std::int32_t i, std::int32_t l, size_type m) {
        return t.choice_at(md, i, l, m);
      });
    return run;
  };

  if (min_units == unreachable || min_units > d.budget) {
    out.budget = budget;
    out.unit = d.unit;
    if (!with_simple) return out;
    // Sizes rounded up overstate a schedule's peak by up to a unit per tensor it holds, so the
    // DP given a few units more than the budget may still return a schedule that fits the exact
    // bytes, and is faster than min-memory's (ResNet-101 b32 at its least budget: +32% of
    // store-all's time instead of +95%). Tried from the DP's least units up, by doubling steps
    // (each a DP at about this budget; none once the runs' estimates add up past the time limit
    // or one's table is over the memory limit), keeping the fastest that fits on the exact
    // sizes; the first that does not fit ends the search. Below the least persistent peak on
    // the exact sizes none can fit: no DP runs (with a budget of a few bytes its unit is that
    // small, and a DP at the least budget in such units took seconds for nothing).
    if (min_units != unreachable && exact_least != unreachable && budget >= exact_least) {
      size_type extra = 0;
      for (int tries = 0; tries < 8 && min_units + extra < fastest_units; ++tries) {
        dp_run run = run_dp(min_units + extra, true);
        if (!run.ran || !(run.makespan < infinite_time)) break;
        const replay_result bytes = replay(c, run.ops);
        if (bytes.peak_memory > budget) break;
        keep_faster(simple, c, budget, std::move(run.ops), bytes);
        extra = extra == 0 ? 1 : 2 * extra;
      }
    }
    return faster_of(std::move(out), simple, c);
  }

  // Each time is finite but their sum may not be: then no choice of the table beats infinity,
  // and there is no schedule to read back.
  dp_run run = run_dp(d.budget, false);
  if (!(run.makespan < infinite_time))
    throw_solver_error(std::string(name(which)) +
                       ": the makespan overflows a double at this budget; scale the chain's "
                       "times down");
  solve_result r = finish(c, which, budget, std::move(run.ops), run.makespan);
  r.min_feasible_budget = out.min_feasible_budget;
  r.unit = d.unit;
  if (with_simple) return faster_of(std::move(r), simple, c);  // (no ?: of two results: g++ 12)
  return r;
}

}  // namespace detail

/// The fastest persistent schedule for `budget` (MODEL.md's DP, exact check). With
/// `options.slots` = N the budget is cut into N units and sizes rounded up, so the schedule fits
/// the byte budget, and the result is the faster of the DP's schedule, store-all,
/// checkpoint-all and checkpoint_sequential's best where those fit on the exact sizes (rounding
/// can cost the DP what they do not pay); where the DP's rounded sizes fit nothing, also
/// min-memory's schedule (the least persistent peak on the exact sizes) and the DP's for a few
/// more units whose schedules fit the exact bytes; `exact_units` solves on the sizes as given.
template <chain_like C>
constexpr solve_result solve_optimal(const C& chain_in, size_type budget,
                                     const solve_options& options = {}) {
  const chain c = to_chain(chain_in);
  return detail::solve_persistent(c, budget, options, solver::optimal,
                                  detail::dp_branches::tape_and_checkpoint);
}

}  // namespace remat
