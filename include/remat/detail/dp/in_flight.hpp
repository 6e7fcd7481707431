// The optimal persistent schedule with K micro-batches in flight (docs/pipelines.md): the least
// makespan among the schedules the DP of docs/model.md considers with
//
//   peak(s) + (K - 1) * retained(s) <= budget,
//
// `retained(s)` being the memory held right before the loss op.
//
// Why the search takes this form. In a persistent schedule the memory held at the loss is the
// input a_0 and what the "spine" (the cells (i, L) that contain the loss) holds on the way down:
// each tape branch of a spine cell holds its stage's tape, each checkpoint branch at j holds a_j,
// and nothing else is held when the loss runs. The DP passes each spine cell the memory m left to
// it, so the loss cell receives m_L = M' - retained, where M' is the root's budget. Asking for
// retained <= R is therefore one more condition on the loss cell, m_L >= M' - R (a floor), and
// for every R:
//
//   g(R) = the DP at M' = budget - (K - 1) R with the loss cell's floor M' - R
//
// is the fastest persistent schedule with peak <= M' and retained <= R; every such schedule
// meets the constraint, and the optimum, whose retained is some R*, is among those g(R*) ranges
// over. So the answer is the least g(R) over the values `retained` can take (the sums a spine can
// hold: `spine_retained`), taken in increasing order and replaced only by a strictly faster one:
// among equally fast schedules, the least retained (docs/pipelines.md's tie rule).
//
// Only the spine depends on R: the cells (i, l < L) are read from one frontier table of the DP
// (engines/frontier.hpp), and each g(R) is a memoized walk over the spine cells its root
// reaches. g(R) >= the unconstrained DP at M', which grows with R: the walk stops there once that
// bound reaches the best found, and at the first R whose floor no longer binds.
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/dp/branches.hpp>
#include <remat/detail/dp/choose.hpp>
#include <remat/detail/dp/cost.hpp>
#include <remat/detail/dp/discretize.hpp>
#include <remat/detail/dp/engines/frontier.hpp>
#include <remat/detail/dp/frontier_solve.hpp>
#include <remat/detail/dp/intervals.hpp>
#include <remat/detail/dp/least_memory.hpp>
#include <remat/detail/dp/model.hpp>
#include <remat/detail/dp/read_back.hpp>
#include <remat/detail/verify/finish.hpp>
#include <remat/schedule.hpp>
#include <remat/simulate.hpp>
#include <remat/solver_options.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace remat::detail {

// `a * b` for sizes, saturating at `unreachable`.
constexpr size_type times_or_unreachable(size_type a, size_type b) noexcept {
  if (a == 0 || b == 0) return 0;
  if (a == unreachable || b == unreachable || a > unreachable / b) return unreachable;
  return a * b;
}

// The values the memory a spine cell (i, L) holds inside its m at the loss can take, for i = 0:
// each tape branch adds its stage's tape (xb of an option), each checkpoint branch at j adds x[j].
// Sorted, without duplicates, at most `cap`; refused past `limit` values.
inline std::vector<size_type> spine_retained(const model& md, dp_branches branches, size_type cap,
                                             std::size_t limit, std::string_view solver_name) {
  auto at = [](std::int32_t k) { return static_cast<std::size_t>(k); };
  const std::int32_t L = md.L;
  std::vector<std::vector<size_type>> sums(at(L) + 1);
  sums[at(L)] = {0};
  for (std::int32_t i = L - 1; i >= 0; --i) {
    std::vector<size_type>& s = sums[at(i)];
    auto add = [&](size_type held, const std::vector<size_type>& below) {
      for (const size_type v : below) {
        if (held > cap || v > cap - held) break;  // `below` is sorted
        s.push_back(held + v);
      }
    };
    if (branches == dp_branches::tape_and_checkpoint)
      for (const tape_option& o : md.options(i)) add(o.xb, sums[at(i + 1)]);
    for (std::int32_t j = i + 1; j <= L; ++j) add(md.x[at(j)], sums[at(j)]);
    std::sort(s.begin(), s.end());
    s.erase(std::unique(s.begin(), s.end()), s.end());
    if (s.size() > limit)
      throw_solver_error(std::string(solver_name) + ": refused: with micro-batches in flight the " +
                         "memory held at the loss can take more than " + std::to_string(limit) +
                         " values on this chain; use slots (--slots N) or coarser stages");
  }
  return std::move(sums[0]);
}

// The least budget at which a persistent schedule exists with K in flight: the least
// x[0] + need + (K - 1) (x[0] + r) over the spine's Pareto pairs (need: the least m of the
// spine cell, r: what it holds at the loss), built from the least-memory DP's needs of the
// intervals below the spine. `unreachable` where none exists.
inline size_type in_flight_least_budget(const model& md, dp_branches branches, size_type K) {
  auto at = [](std::int32_t k) { return static_cast<std::size_t>(k); };
  const std::int32_t L = md.L;
  const std::vector<size_type> need = persistent_need(md, branches);
  using pair = std::pair<size_type, size_type>;  // (need, retained inside)
  std::vector<std::vector<pair>> spine(at(L) + 1);
  spine[at(L)] = {{loss_need(md), 0}};
  for (std::int32_t i = L - 1; i >= 0; --i) {
    std::vector<pair> p;
    // Each branch of spine cell (i, L) over the pairs of the spine cell it reads (its rest, or
    // its right part), holding what it holds beside it; a checkpoint branch's left part is below
    // the spine.
    if (branches == dp_branches::tape_and_checkpoint)
      for (const tape_option& o : md.options(i)) {
        const tape_branch b = tape_branch_of(md, i, L, o);
        for (const auto& [n, r] : spine[at(b.rest().i)])
          p.emplace_back(b.need(n), add_or_unreachable(b.held, r));
      }
    for (checkpoint_walk w(md, i, L); !w.done(); w.next()) {
      const branch_part left = w->left();
      const size_type left_need = need[interval_index(L, left.i, left.l)];
      if (left_need == unreachable) continue;
      for (const auto& [n, r] : spine[at(w->right().i)])
        p.emplace_back(w->need(n, left_need), add_or_unreachable(w->held, r));
    }
    std::sort(p.begin(), p.end());
    std::vector<pair>& front = spine[at(i)];
    for (const pair& q : p)
      if (q.first != unreachable && (front.empty() || q.second < front.back().second))
        front.push_back(q);
  }
  size_type least = unreachable;
  for (const auto& [n, r] : spine[0]) {
    const size_type peak = add_or_unreachable(md.x[0], n);
    const size_type held = times_or_unreachable(K - 1, add_or_unreachable(md.x[0], r));
    least = std::min(least, add_or_unreachable(peak, held));
  }
  return least;
}

// The spine cells (i, L, m) of the DP whose loss cell needs m >= `floor`, memoized over the cells
// a root reaches; the cells below the spine are read from a frontier table of the same model.
class in_flight_spine {
 public:
  in_flight_spine(const model& md, const frontier_table& t, dp_branches branches)
      : md_(md), t_(t), branches_(branches), memo_(static_cast<std::size_t>(md.L) + 1) {
    mmin_.assign(static_cast<std::size_t>(md.L) + 1, 0);
    for (std::int32_t i = 0; i < md.L; ++i)
      mmin_[static_cast<std::size_t>(i)] = necessary_memory(md, i, md.L);
  }

  // OPT(0, L, m) with the loss cell's floor.
  double value(size_type m, size_type floor) {
    for (auto& cells : memo_) cells.clear();
    floor_ = floor;
    return cell(0, m).value;
  }

  // The choice of spine cell (i, L, m) of the last `value`'s walk (the encoding of
  // `reference_table::choice`).
  [[nodiscard]] std::int32_t choice(std::int32_t i, size_type m) const {
    return memo_[static_cast<std::size_t>(i)].at(m).choice;
  }

 private:
  struct entry {
    double value = infinite_time;
    std::int32_t choice = -1;
  };

  // reference_cell's branches for l = L, in their order and with their tie rule, with the spine
  // below read from this memo and the intervals below the spine from the frontier table. (Its own
  // loops rather than `least_branch_within`: a cell recurses from inside them, and the walks are
  // about 8% faster so, bench_in_flight.)
  entry cell(std::int32_t i, size_type m) {
    auto& cells = memo_[static_cast<std::size_t>(i)];
    if (auto it = cells.find(m); it != cells.end()) return it->second;
    entry e;
    const std::int32_t L = md_.L;
    auto consider = [&e](double v, std::int32_t choice) {
      if (v < e.value) e = {v, choice};
    };
    if (i == L) {
      if (m >= std::max(loss_need(md_), floor_)) e = {md_.loss_time, 0};
    } else if (m >= mmin_[static_cast<std::size_t>(i)]) {
      const std::span<const tape_option> options = md_.options(i);
      if (branches_ == dp_branches::tape_and_checkpoint)
        for (std::size_t p = 0; p < options.size(); ++p) {
          const tape_branch b = tape_branch_of(md_, i, L, options[p]);
          if (m < b.own) continue;
          const double rest = cell(b.rest().i, b.rest().memory(m)).value;
          if (rest < infinite_time) consider(b.value(rest), tape_choice(p));
        }
      for (checkpoint_walk w(md_, i, L); !w.done() && m >= w->own; w.next()) {
        const branch_part left = w->left();
        const double left_value = t_.value(left.i, left.l, left.memory(m));
        if (!(left_value < infinite_time)) continue;
        const double right_value = cell(w->right().i, w->right().memory(m)).value;
        if (right_value < infinite_time) consider(w->value(right_value, left_value), w->j);
      }
    }
    cells.emplace(m, e);
    return e;
  }

  const model& md_;
  const frontier_table& t_;
  dp_branches branches_;
  size_type floor_ = 0;
  std::vector<size_type> mmin_;
  std::vector<std::unordered_map<size_type, entry>> memo_;  // [i]: m -> cell
};

// What the schedule of the frontier table at root memory m holds at the loss (the model's units):
// x[0] and each hold of its spine.
inline size_type frontier_retained(const model& md, const frontier_table& t, size_type m) {
  size_type held = md.x[0];
  std::int32_t i = 0;
  while (i < md.L) {
    const std::int32_t c = frontier_choice(md, t, i, md.L, m);
    const size_type h = is_tape_choice(c) ? md.options(i)[option_of_choice(c)].xb
                                          : md.x[static_cast<std::size_t>(c)];
    held += h;
    m -= h;
    i = is_tape_choice(c) ? i + 1 : c;
  }
  return held;
}

// A lower bound of g(R) that grows as R falls: the least time of a persistent schedule holding at
// most R - x[0] inside the root at the loss, whatever its peak (each interval below the spine at
// its least time, `interval_bounds::S`). From the spine's Pareto pairs (held, time).
class least_times_by_retained {
 public:
  least_times_by_retained(const model& md, dp_branches branches) {
    auto at = [](std::int32_t k) { return static_cast<std::size_t>(k); };
    const std::int32_t L = md.L;
    const interval_bounds b = make_interval_bounds(md, {}, branches);
    using pair = std::pair<size_type, double>;
    std::vector<std::vector<pair>> spine(at(L) + 1);
    spine[at(L)] = {{0, md.loss_time}};
    for (std::int32_t i = L - 1; i >= 0; --i) {
      std::vector<pair> p;
      // Each branch over the pairs of the spine cell it reads, the left part at its least time.
      if (branches == dp_branches::tape_and_checkpoint)
        for (const tape_option& o : md.options(i)) {
          const tape_branch tb = tape_branch_of(md, i, L, o);
          for (const auto& [h, v] : spine[at(tb.rest().i)])
            p.emplace_back(add_or_unreachable(tb.held, h), tb.value(v));
        }
      for (checkpoint_walk w(md, i, L); !w.done(); w.next()) {
        const branch_part left = w->left();
        const double left_time = b.S[interval_index(L, left.i, left.l)];
        for (const auto& [h, v] : spine[at(w->right().i)])
          p.emplace_back(add_or_unreachable(w->held, h), w->value(v, left_time));
      }
      std::sort(p.begin(), p.end());
      for (const pair& q : p)
        if (spine[at(i)].empty() || q.second < spine[at(i)].back().second)
          spine[at(i)].push_back(q);
    }
    front_ = std::move(spine[0]);
  }

  // The least time holding at most `held` (infinite below the least).
  [[nodiscard]] double at(size_type held) const {
    auto it = std::upper_bound(front_.begin(), front_.end(), held,
                               [](size_type v, const std::pair<size_type, double>& p) {
                                 return v < p.first;
                               });
    return it == front_.begin() ? infinite_time : std::prev(it)->second;
  }

 private:
  std::vector<std::pair<size_type, double>> front_;  // held ascending, time descending
};

// The frontier table of `md` up to the root memory `root`, within the limits of `options`
// (refused past them when `refuse`; else returned incomplete).
inline frontier_table in_flight_table(const chain& c, const model& md, size_type root,
                                      dp_branches branches, const solve_options& options,
                                      solver which, bool refuse) {
  const frontier_limits limits = frontier_limits_of(md.L, options);
  if (limits.fixed.bytes > static_cast<double>(limits.byte_limit) ||
      limits.fixed.seconds > options.max_estimated_seconds) {
    if (refuse)
      refuse_frontier(name(which), c, limits.fixed.seconds, limits.fixed.bytes, options,
                      limits.byte_limit);
    frontier_table t;
    t.complete = false;
    return t;
  }
  frontier_options fo{.branches = branches, .cap = root};
  fo.threads = limits.threads;
  fo.max_work = (options.max_estimated_seconds - limits.fixed.seconds) * limits.rate;
  fo.max_points = limits.max_points();
  interval_bounds bounds;
  if (!md.exact_sums) bounds = make_interval_bounds(md, {}, branches);
  frontier_table t = frontier_dp(md, bounds, fo);
  if (!t.complete && refuse)
    refuse_frontier(name(which), c, limits.fixed.seconds + t.projected_work / limits.rate,
                    limits.fixed.bytes + t.projected_points * frontier_point_bytes, options,
                    limits.byte_limit);
  return t;
}

// The most values of `retained` the search tries (each a walk over the spine), and the most the
// default tries on the chain's own sizes before it takes `rotor_slots` slots (at most that many
// values): bench_in_flight, where the zoo's chains up to ResNet-152 have at most about 700 and
// DenseNet-121 about 20000, whose walks take minutes.
inline constexpr std::size_t in_flight_max_candidates = std::size_t{1} << 20;
inline constexpr std::size_t in_flight_auto_candidates = 2000;

// `which` (optimal, checkpoint-only) on `c` at `budget` with `options.in_flight` = K > 1
// micro-batches in flight. The unit: the chain's own sizes for `exact_units`, N slots of the
// budget for N, and by default the chain's own sizes where the frontier DP finishes within the
// limits and the candidates are at most `in_flight_auto_candidates`, else `rotor_slots` slots
// (sizes rounded up: the schedule keeps the constraint; `exact` false).
inline solve_result solve_in_flight(const chain& c, size_type budget, const solve_options& options,
                                    solver which) {
  if (budget < 0) throw_solver_error("the budget must be >= 0");
  const auto K = static_cast<size_type>(options.in_flight);
  const dp_branches branches = branches_of(which);
  solve_result out;
  out.budget = budget;
  const size_type least = in_flight_least_budget(make_model(c, 1), branches, K);
  out.min_feasible_budget = least == unreachable ? solve_result::no_budget : least;
  if (least == unreachable || budget < least) return out;

  const dp_mode mode = mode_of(options.slots);
  size_type unit = mode == dp_mode::slots ? discretize(budget, options.slots).unit : 1;
  model md;
  size_type M = 0;
  frontier_table t;
  std::vector<size_type> sums;  // the values retained - x[0] can take, at most M / K - x[0]
  // The table and the candidates in `unit`; false where the default should rather take slots
  // (the table past the limits, or more candidates than `in_flight_auto_candidates`).
  auto prepare = [&](bool refuse) {
    md = make_model(c, unit);
    M = budget / unit;
    sums.clear();
    if (M < md.x[0]) return true;
    t = in_flight_table(c, md, M - md.x[0], branches, options, which, refuse);
    if (!t.complete) return false;
    const size_type top = M / K;  // retained <= M / K: peak >= retained
    if (top >= md.x[0])
      sums = spine_retained(md, branches, top - md.x[0], in_flight_max_candidates, name(which));
    return refuse || sums.size() <= in_flight_auto_candidates;
  };
  if (!prepare(mode != dp_mode::automatic)) {
    unit = discretize(budget, rotor_slots).unit;
    prepare(true);
  }
  out.unit = unit;
  if (M < md.x[0] || t.frontiers.empty() || t.root().empty()) return out;

  const size_type x0 = md.x[0];
  in_flight_spine spine(md, t, branches);
  const least_times_by_retained bound_below(md, branches);
  // The candidates that fit, and the first whose unconstrained schedule at Mp already holds at
  // most R at the loss (or whose floor binds nowhere): g = the table's value there, and no larger
  // R does better (the bound grows with R).
  std::size_t n = 0;
  while (n < sums.size() && (K - 1) * (x0 + sums[n]) <= M - x0) ++n;
  double best = infinite_time;
  size_type best_R = -1;
  bool best_plain = false;  // the table's own schedule
  std::size_t k = 0;
  for (; k < n; ++k) {
    const size_type R = x0 + sums[k];
    const size_type Mp = M - (K - 1) * R;
    const double bound = t.value(0, md.L, Mp - x0);
    if (!(bound < infinite_time)) break;
    if (Mp - R <= loss_need(md) || frontier_retained(md, t, Mp - x0) <= R) {
      best = bound;
      best_R = R;
      best_plain = true;
      break;
    }
  }
  // Below it, from the largest R down (the optimum is mostly near it): the walk where neither
  // bound rules R out; a tie goes to the smaller R.
  for (std::size_t q = k; q-- > 0;) {
    const size_type R = x0 + sums[q];
    if (bound_below.at(R - x0) > best) break;  // grows as R falls
    const size_type Mp = M - (K - 1) * R;
    if (t.value(0, md.L, Mp - x0) > best) continue;
    const double v = spine.value(Mp - x0, Mp - R);
    if (v <= best && v < infinite_time) {
      best = v;
      best_R = R;
      best_plain = false;
    }
  }
  if (!(best < infinite_time)) return out;

  const size_type Mp = M - (K - 1) * best_R;
  const size_type root = Mp - x0;
  std::vector<op> ops;
  if (best_plain) {
    ops = frontier_ops(md, t, 0, md.L, root);
  } else {
    spine.value(root, Mp - best_R);
    ops = persistent_ops(md, 0, md.L, root, [&](std::int32_t i, std::int32_t l, size_type m) {
      return l == md.L ? spine.choice(i, m) : frontier_choice(md, t, i, l, m);
    });
  }
  const replay_result r = replay(c, ops);
  if (r.valid() && r.peak_memory + (K - 1) * r.retained > budget)
    throw_internal_error(name(which), "breaks the in-flight constraint (peak " +
                                          std::to_string(r.peak_memory) + " + " +
                                          std::to_string(K - 1) + " x retained " +
                                          std::to_string(r.retained) + " > " +
                                          std::to_string(budget) + ")");
  solve_result s = finish(c, which, budget, std::move(ops), best);
  s.min_feasible_budget = out.min_feasible_budget;
  s.unit = unit;
  s.exact = unit == 1;
  return s;
}

// `min-memory` with K > 1 in flight: the least budget at which a persistent schedule keeps the
// constraint (`in_flight_least_budget`, exact), and the fastest schedule there, exact (refused past
// the limits), when that budget is within `budget`.
inline solve_result solve_min_memory_in_flight(const chain& c, size_type budget,
                                               const solve_options& options) {
  if (budget < 0) throw_solver_error("the budget must be >= 0");
  const size_type least = in_flight_least_budget(
      make_model(c, 1), dp_branches::tape_and_checkpoint, static_cast<size_type>(options.in_flight));
  solve_result r;
  if (least == unreachable || budget < least) {
    r.budget = budget;
    r.min_feasible_budget = least == unreachable ? solve_result::no_budget : least;
    return r;
  }
  solve_options exact = options;
  exact.slots = exact_units;
  r = solve_in_flight(c, least, exact, solver::min_memory);
  r.budget = budget;
  return r;
}

}  // namespace remat::detail
