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
#include <remat/detail/discretize.hpp>
#include <remat/detail/model.hpp>
#include <remat/detail/verify.hpp>
#include <remat/schedule.hpp>
#include <remat/simulate.hpp>
#include <remat/solver_options.hpp>
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

inline constexpr double infinite_time = std::numeric_limits<double>::infinity();
// A memory requirement no chain reaches (validated chains total at most 2^63 - 1 units).
inline constexpr size_type unreachable = std::numeric_limits<size_type>::max();

// Index of interval (i, l), 0 <= i <= l <= L, in a triangular array of (L+1)(L+2)/2 cells.
constexpr std::size_t interval_index(std::int32_t L, std::int32_t i, std::int32_t l) noexcept {
  const auto n = static_cast<std::size_t>(L) + 1;
  const auto ui = static_cast<std::size_t>(i);
  return ui * (2 * n - ui + 1) / 2 + static_cast<std::size_t>(l - i);
}

constexpr std::size_t interval_count(std::int32_t L) noexcept {
  const auto n = static_cast<std::size_t>(L) + 1;
  return n * (n + 1) / 2;
}

// The memory below which OPT(i, l, .) is infinite for every branch (MODEL.md's mmin), i < l.
constexpr size_type necessary_memory(const model& md, std::int32_t i, std::int32_t l) {
  auto at = [](std::int32_t k) { return static_cast<std::size_t>(k); };
  size_type inner = md.x[at(i + 1)] + md.ft[at(i)];
  for (std::int32_t k = i + 1; k < l; ++k)
    inner = std::max(inner, md.x[at(k)] + md.x[at(k + 1)] + md.ft[at(k)]);
  return md.x[at(l + 1)] + inner;
}

// Which branches a DP may take. Without the tape branch (only F_ck/F_none, and F_all(i), B(i) as
// the base case) it is the heterogeneous form of classical AD checkpointing (MODEL.md).
enum class dp_branches : std::uint8_t {
  tape_and_checkpoint,  // MODEL.md's DP: the persistent schedules
  checkpoint_only,      // without the tape branch
};

// The least-memory DP: for every interval, the least m at which OPT(i, l, m) is finite (`need`:
// feasibility is a threshold in m because every condition of the DP is), and a choice that
// reaches it (same encoding as `optimal_table::choice`). Among the choices that reach the least
// need, the one whose schedule (built from the sub-intervals' recorded schedules) is fastest is
// kept, ties to the tape branch, then to the smallest j. The time is a tie-break only: with slack
// in a sub-interval a faster schedule of the same peak may exist (`optimal` at that budget finds
// it). O(L^3) time, no dependence on the budget.
struct least_peak_table {
  std::vector<size_type> need;       // [interval]
  std::vector<double> time;          // [interval], the time of the recorded schedule
  std::vector<std::int32_t> choice;  // [interval], 0: tape branch or base case, j > 0: checkpoint
};

constexpr least_peak_table least_peak_dp(const model& md,
                                         dp_branches branches = dp_branches::tape_and_checkpoint) {
  const std::int32_t L = md.L;
  auto at = [](std::int32_t k) { return static_cast<std::size_t>(k); };
  least_peak_table t;
  t.need.assign(interval_count(L), unreachable);
  t.time.assign(interval_count(L), infinite_time);
  t.choice.assign(interval_count(L), -1);
  auto cell = [&](std::int32_t i, std::int32_t l) { return interval_index(L, i, l); };
  for (std::int32_t d = 0; d <= L; ++d) {
    for (std::int32_t i = 0; i + d <= L; ++i) {
      const std::int32_t l = i + d;
      size_type best = unreachable;
      double best_time = infinite_time;
      std::int32_t choice = -1;
      auto consider = [&](size_type need, double time, std::int32_t c) {
        if (need < best || (need == best && time < best_time)) {
          best = need;
          best_time = time;
          choice = c;
        }
      };
      if (i == L) {
        consider(md.x[at(L)] + md.bt[at(L)], md.bw[at(L)], 0);
      } else {
        // F_all(i) and B(i) with g_{l+1} held (the base case is l = i).
        const size_type tape_ops =
            std::max(md.x[at(l + 1)] + md.xb[at(i + 1)] + md.ft[at(i)],
                     md.x[at(i)] + md.x[at(i + 1)] + md.xb[at(i + 1)] + md.bt[at(i)]);
        if (i == l) {
          consider(tape_ops, md.fw[at(i)] + md.bw[at(i)], 0);
        } else {
          const size_type mmin = necessary_memory(md, i, l);
          const size_type rest = t.need[cell(i + 1, l)];
          if (branches == dp_branches::tape_and_checkpoint && rest != unreachable)
            consider(std::max({tape_ops, md.xb[at(i + 1)] + rest, mmin}),
                     md.fw[at(i)] + md.bw[at(i)] + t.time[cell(i + 1, l)], 0);
          double forward = 0;
          for (std::int32_t j = i + 1; j <= l; ++j) {
            forward += md.fw[at(j - 1)];
            const size_type right = t.need[cell(j, l)];
            const size_type left = t.need[cell(i, j - 1)];
            if (right == unreachable || left == unreachable) continue;
            consider(std::max({md.x[at(j)] + right, left, mmin}),
                     forward + t.time[cell(j, l)] + t.time[cell(i, j - 1)], j);
          }
        }
      }
      t.need[cell(i, l)] = best;
      t.time[cell(i, l)] = best_time;
      t.choice[cell(i, l)] = choice;
    }
  }
  return t;
}

// The least m at which OPT(i, l, m) is finite, for every interval.
constexpr std::vector<size_type> persistent_need(
    const model& md, dp_branches branches = dp_branches::tape_and_checkpoint) {
  return least_peak_dp(md, branches).need;
}

// The smallest total budget (input included) at which a persistent schedule exists, in the
// units of `md`; `unreachable` if none.
constexpr size_type persistent_min_budget(const model& md,
                                          dp_branches branches = dp_branches::tape_and_checkpoint) {
  const size_type need = persistent_need(md, branches)[interval_index(md.L, 0, md.L)];
  return need == unreachable ? unreachable : md.x[0] + need;
}

// The DP table: OPT and the choice that achieves it for every interval and every m in 0..M.
struct optimal_table {
  std::int32_t L = 0;
  size_type M = 0;
  std::vector<double> value;         // [interval][m]
  std::vector<std::int32_t> choice;  // 0: tape branch or base case, j > 0: checkpoint at j

  constexpr std::size_t at(std::int32_t i, std::int32_t l, size_type m) const noexcept {
    return interval_index(L, i, l) * static_cast<std::size_t>(M + 1) +
           static_cast<std::size_t>(m);
  }
};

// Bytes the table of a chain of L stages with budget M (in units) would take.
constexpr double optimal_table_bytes(std::int32_t L, size_type M) noexcept {
  return static_cast<double>(interval_count(L)) * (static_cast<double>(M) + 1) *
         static_cast<double>(sizeof(double) + sizeof(std::int32_t));
}

// One cell of the DP. Reads only cells of strictly shorter intervals (any m) and so is correct
// for any loop order that finishes shorter intervals first, whatever the sizes (zeros included).
constexpr void optimal_cell(const model& md, optimal_table& t, std::int32_t i, std::int32_t l,
                            size_type m, size_type mmin,
                            dp_branches branches = dp_branches::tape_and_checkpoint) {
  auto at = [](std::int32_t k) { return static_cast<std::size_t>(k); };
  double best = infinite_time;
  std::int32_t choice = -1;
  if (i == md.L) {
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
        const double v = forward + t.value[t.at(j, l, m - md.x[at(j)])] + t.value[t.at(i, j - 1, m)];
        if (v < best) {
          best = v;
          choice = j;
        }
      }
    }
  }
  t.value[t.at(i, l, m)] = best;
  t.choice[t.at(i, l, m)] = choice;
}

// The straightforward DP: m outermost, then intervals by increasing length. O(L^3 M).
constexpr optimal_table optimal_dp_reference(
    const model& md, size_type M, dp_branches branches = dp_branches::tape_and_checkpoint) {
  optimal_table t;
  t.L = md.L;
  t.M = M;
  const std::size_t cells = interval_count(md.L) * static_cast<std::size_t>(M + 1);
  t.value.assign(cells, infinite_time);
  t.choice.assign(cells, -1);
  std::vector<size_type> mmin(interval_count(md.L), 0);
  for (std::int32_t i = 0; i < md.L; ++i)
    for (std::int32_t l = i + 1; l <= md.L; ++l)
      mmin[interval_index(md.L, i, l)] = necessary_memory(md, i, l);
  for (size_type m = 0; m <= M; ++m)
    for (std::int32_t d = 0; d <= md.L; ++d)
      for (std::int32_t i = 0; i + d <= md.L; ++i)
        optimal_cell(md, t, i, i + d, m, mmin[interval_index(md.L, i, i + d)], branches);
  return t;
}

// The schedule of cell (i, l, m), without recursion (chains can be long). `choice_of(i, l, m)`
// gives the cell's choice in the encoding of `optimal_table::choice`.
template <class ChoiceOf>
constexpr std::vector<op> persistent_ops(const model& md, std::int32_t i, std::int32_t l,
                                         size_type m, ChoiceOf choice_of) {
  struct task {
    bool emit;  // emit `o`, or expand (i, l, m)
    op o;
    std::int32_t i, l;
    size_type m;
  };
  std::vector<op> ops;
  std::vector<task> stack{{false, {}, i, l, m}};
  while (!stack.empty()) {
    const task tk = stack.back();
    stack.pop_back();
    if (tk.emit) {
      ops.push_back(tk.o);
      continue;
    }
    const std::int32_t c = choice_of(tk.i, tk.l, tk.m);
    if (tk.i == md.L) {
      ops.push_back(loss_op(md.L));
    } else if (tk.i == tk.l) {
      ops.push_back(f_all(tk.i));
      ops.push_back(backward(tk.i));
    } else if (c == 0) {
      ops.push_back(f_all(tk.i));
      stack.push_back({true, backward(tk.i), 0, 0, 0});
      stack.push_back(
          {false, {}, tk.i + 1, tk.l, tk.m - md.xb[static_cast<std::size_t>(tk.i) + 1]});
    } else {
      ops.push_back(f_ck(tk.i));
      for (std::int32_t k = tk.i + 1; k < c; ++k) ops.push_back(f_none(k));
      stack.push_back({false, {}, tk.i, c - 1, tk.m});
      stack.push_back({false, {}, c, tk.l, tk.m - md.x[static_cast<std::size_t>(c)]});
    }
  }
  return ops;
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
  char text[320];
  std::snprintf(text, sizeof text,
                "%.*s: the DP table for %d stages and %lld memory units would need %.1f GiB "
                "(limit %.1f GiB); use fewer slots (--slots N), coarser stages, or raise the limit",
                static_cast<int>(solver_name.size()), solver_name.data(), static_cast<int>(L),
                static_cast<long long>(M), bytes / 1073741824.0,
                static_cast<double>(limit) / 1073741824.0);
  throw_solver_error(text);
}

// The smallest byte budget at which the problem discretized into `slots` = N units is feasible,
// or `no_budget`. Budgets in ((u-1)N, uN] all use the unit u (the first band, [0, N], unit 1),
// and with unit u a budget B is feasible exactly when floor(B / u) >= Need(u), the least budget
// in units of the chain rounded to u. Need(u) never increases with u (rounded sizes do not), so
// the answer lies in the band of the least u with Need(u) <= N, found by bisection, at
// max(band start, u * Need(u)). Exact: no monotonicity in B is assumed.
constexpr size_type slots_min_budget(const chain& c, size_type slots,
                                     dp_branches branches = dp_branches::tape_and_checkpoint) {
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
  const size_type exact = need(1);
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
  if (unit > max_size / slots) return solve_result::no_budget;  // the band lies beyond 2^62
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

// The DP solvers (`optimal`, `checkpoint-only`): discretize, find the least feasible budget,
// fill the table and read the schedule of (0, L, M) back.
constexpr solve_result solve_persistent(const chain& c, size_type budget,
                                        const solve_options& options, solver which,
                                        dp_branches branches) {
  const discretization d = discretize(budget, options.slots);
  const model md = make_model(c, d.unit);

  const size_type min_units = persistent_min_budget(md, branches);
  solve_result out;
  if (options.slots == exact_units)
    out.min_feasible_budget = min_units == unreachable ? solve_result::no_budget : min_units;
  else
    out.min_feasible_budget = slots_min_budget(c, options.slots, branches);
  if (min_units == unreachable || min_units > d.budget) {
    out.budget = budget;
    out.unit = d.unit;
    return out;
  }

  // Above the peak of a schedule that reaches the least time the DP can reach (store-all with
  // the tape branch, checkpoint-all without it), OPT no longer decreases: cap the table there.
  std::vector<op> fastest;  // (a conditional of two vector calls trips g++ 12 in constexpr)
  if (branches == dp_branches::tape_and_checkpoint)
    fastest = store_all_ops(md.L);
  else
    fastest = checkpoint_all_ops(md.L);
  const size_type fastest_units = replay(to_chain(md), fastest).peak_memory;
  const size_type M = std::min(d.budget, fastest_units) - md.x[0];

  if (!std::is_constant_evaluated()) {
    const double bytes = optimal_table_bytes(md.L, M);
    if (bytes > static_cast<double>(options.max_table_bytes))
      throw_table_too_large(md.L, M, bytes, options.max_table_bytes, name(which));
  }
  const optimal_table t = optimal_dp_reference(md, M, branches);
  const double makespan = t.value[t.at(0, md.L, M)];
  // Each time is finite but their sum may not be: then no choice of the table beats infinity,
  // and there is no schedule to read back.
  if (!(makespan < infinite_time))
    throw_solver_error(std::string(name(which)) +
                       ": the makespan overflows a double at this budget; scale the chain's "
                       "times down");
  solve_result r = finish(c, which, budget, optimal_ops(md, t, 0, md.L, M), makespan);
  r.min_feasible_budget = out.min_feasible_budget;
  r.unit = d.unit;
  return r;
}

}  // namespace detail

/// The fastest persistent schedule for `budget` (MODEL.md's DP, exact check). With
/// `options.slots` = N the budget is cut into N units and sizes rounded up, so the schedule fits
/// the byte budget; `exact_units` solves on the sizes as given.
template <chain_like C>
constexpr solve_result solve_optimal(const C& chain_in, size_type budget,
                                     const solve_options& options = {}) {
  const chain c = to_chain(chain_in);
  return detail::solve_persistent(c, budget, options, solver::optimal,
                                  detail::dp_branches::tape_and_checkpoint);
}

}  // namespace remat
