// docs/model.md's DP at one budget, exact, by a memoized top-down search that skips the branches a
// lower bound shows cannot win (branch and bound), instead of every interval's whole frontier.
//
// * Lower bounds. The model with every size rounded *down* to whole units of u, about m / slots
//   (`floor_model`) has a dense DP (engines/dense.hpp, about `slots` memories a cell)
//   whose value at floor(m' / u) is never above OPT(i, l, m') on the exact sizes: every condition
//   of the DP is m' >= a sum or a max of sizes, and floor(m'/u) >= floor(a/u) + floor(b/u) where
//   m' >= a + b; a child's memory m' - x becomes floor(m'/u) - floor(x/u) >= floor((m' - x)/u),
//   and OPT is non-increasing in memory; the times are the same. With S(i, l) (nothing runs
//   twice) it gives LB(i, l, m'). Any u gives bounds; one that divides the chain's common sizes
//   (`lower_bound_unit`) loses nothing on them, and gives far tighter ones.
// * Search. OPT(i, l, m') is computed with a limit: the exact value where it is below the limit,
//   else a lower bound at or above it. A cell's branches are searched from the least bound (its
//   own time plus its parts' LB) up; a branch whose bound reaches min(limit, best so far) is
//   skipped, and its parts are searched with what is left of that bound. A branch replaces the
//   best when faster, or as fast and before it in the dense DP's order (tape, then j up: such a
//   branch is searched up to the best's value inclusive), so the value and the choice are the
//   dense DP's in exact units, bit for bit: on the time grid of `quantize_times` every sum and
//   difference is exact, and the limits are kept on that grid.
// * Iterative deepening. The root's limit starts just above its LB (the bounds are usually within
//   a fraction of a percent) and grows fourfold, from the new lower bound, each time the search
//   fails. Every cell's exact value and best lower bound are kept (a hash table keyed by interval
//   and memory) across the rounds.
// * Work. Each branch looked at is one unit; past `max_work` the search stops and reports
//   incomplete, and the dispatch goes on to its next engine. How much work a budget takes
//   depends on how tight the bounds are there, not on the frontiers' sizes: it pays on chains
//   whose frontiers grow large but whose sizes share a unit (DenseNet's concatenations), and
//   does not finish on chains of random sizes, whose bounds are loose.
// * Step. Most branches are never searched: a branch whose bound is at or above the cell's limit
//   only lowers the cell's own bound, and is not listed or sorted; the lookups read one row per
//   interval.
//
// Needs `model::exact_sums` (the dispatch does not search otherwise) and recurses once per
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/dp/branches.hpp>
#include <remat/detail/dp/engines/search_bounds.hpp>
#include <remat/detail/dp/engines/search_memo.hpp>
#include <remat/detail/dp/intervals.hpp>
#include <remat/detail/dp/model.hpp>
#include <remat/detail/dp/read_back.hpp>
#include <remat/detail/dp/tuning.hpp>
#include <remat/schedule.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <limits>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

namespace remat::detail {

namespace search {

// A cell's value under a limit: below the limit it is exact; at or above, a lower bound (`exact`
// says which: base cases and cells already solved give their value whatever the limit).
struct bounded {
  double value;
  bool exact;
};

class engine {
 public:
  engine(const model& md, const interval_bounds& b, dp_branches branches)
      : md_(at_most_int16_stages(md)),
        b_(b),
        branches_(branches),
        mmin_(necessary_memory_table(md)),
        forwards_(checkpoint_forward_table(md)) {}

  // New lower bounds (made for the memory searched or more) and a new cap on the work: the cells
  // solved and the bounds found so far stay (they hold whatever the lower bounds).
  void restart(const lower_bound_table& lb, double max_work,
               std::size_t max_cells = static_cast<std::size_t>(-1)) {
    lb_ = &lb;
    max_work_ = max_work;
    max_cells_ = max_cells;
    stopped_ = false;
    inverse_unit_ = 1.0 / static_cast<double>(lb.unit);
    // What `lower` reads of an interval, in one place: a cell's branches look up intervals far
    // apart in the tables (the right parts (j, l) stride across rows).
    const dense_table& d = lb.dense;
    rows_.resize(b_.need.size());
    for (std::size_t c = 0; c < rows_.size(); ++c) {
      row& r = rows_[c];
      r.need = b_.need[c];
      r.store = b_.store[c];
      r.S = b_.S[c];
      r.lb_need = d.bounds.need[c];
      r.lb_store = d.bounds.store[c];
      r.lb_S = std::max(b_.S[c], d.bounds.S[c]);
      r.values = r.lb_need < r.lb_store ? d.value.data() + d.offset[c] : nullptr;
    }
  }

  bool stopped() const noexcept { return stopped_; }
  double work() const noexcept { return work_; }
  std::size_t cells() const noexcept { return memo_.size(); }

  // max(S, LB) of cell c at m, infinite below its need.
  double lower(std::size_t c, size_type m) const noexcept {
    const row& r = rows_[c];
    if (m < r.need) return infinite_time;
    if (m >= r.store) return r.S;
    const size_type u = units(m);
    if (u < r.lb_need) return infinite_time;
    if (u >= r.lb_store) return r.lb_S;
    return std::max(r.S, r.values[u - r.lb_need]);
  }

  bounded value(std::int32_t i, std::int32_t l, size_type m, double limit) {
    const std::size_t c = interval_index(md_.L, i, l);
    if (m < b_.need[c]) return {infinite_time, true};
    // Base cases (i == l, i == L) end here, but those whose options trade memory for time.
    if (m >= b_.store[c]) return {b_.S[c], true};
    const double floor_value = lower(c, m);
    if (floor_value >= limit) return {floor_value, false};
    if (const entry* e = memo_.find(c, m)) {
      if (e->exact) return {e->value, true};
      if (e->value >= limit) return {e->value, false};
    }
    if (stopped_) return {limit, false};
    // The branches that can be finite, with their lower bounds, searched from the least bound:
    // a good schedule early bounds the others tightly.
    const std::size_t base = candidates_.size();
    double skipped = infinite_time;  // the least lower bound of the branches not searched
    list_branches(i, l, m, c, limit, skipped);
    if (stopped_) {
      candidates_.resize(base);
      return {limit, false};
    }
    std::sort(candidates_.begin() + static_cast<std::ptrdiff_t>(base), candidates_.end(),
              [](const candidate& a, const candidate& b) {
                return a.floor < b.floor || (a.floor == b.floor && a.j < b.j);
              });
    const searched found = search_branches(i, l, m, base, limit, skipped);
    candidates_.resize(base);
    if (stopped_) return {limit, false};
    return record(c, m, found, limit, std::max(floor_value, skipped));
  }

  // The choice of a cell the search computed exactly, or of a base case.
  std::int32_t choice(std::int32_t i, std::int32_t l, size_type m) {
    const std::size_t c = interval_index(md_.L, i, l);
    if (i == md_.L) return 0;
    if (m >= b_.store[c]) return tape_choice(md_.fastest[at(i)]);
    const entry* e = memo_.find(c, m);
    if (e == nullptr || !e->exact)
      throw std::logic_error("remat: branch and bound: a chosen cell was not solved exactly");
    return e->choice;
  }

 private:
  static constexpr std::size_t at(std::int32_t k) noexcept { return static_cast<std::size_t>(k); }

  // A cell's choice is kept in 16 bits (`entry`); checked before the tables are made.
  static const model& at_most_int16_stages(const model& md) {
    if (md.L > std::numeric_limits<std::int16_t>::max())
      throw std::invalid_argument("remat: branch and bound: more than 32767 stages");
    for (std::int32_t k = 0; k < md.L; ++k)
      if (md.options(k).size() > 32767)
        throw std::invalid_argument("remat: branch and bound: a stage with more than 32767 options");
    return md;
  }

  // A candidate's order among a cell's branches (the dense DP's: the tape branch's options in
  // their order, then the split points j up): option p of the tape branch (or base case) is
  // p - tape_orders, below every j >= 1.
  static constexpr std::int32_t tape_orders = std::int32_t{1} << 16;
  static constexpr std::int32_t tape_order(std::size_t p) noexcept {
    return static_cast<std::int32_t>(p) - tape_orders;
  }

  // A branch of a cell: its lower bound, its own time (the forwards, or F_all and B of the tape
  // branch), its left part's lower bound, and j (`tape_order(p)` < 0: the tape branch with
  // option p). Cells push theirs on one
  // stack, as they recurse.
  struct candidate {
    double floor;
    double own;
    double floor_left;
    std::int32_t j;
  };
  // A branch to search, or (its bound at or above the limit: no schedule through it can be
  // below `win`, which never passes the limit) only its bound, in `skipped`.
  void push(const candidate& cand, double limit, double& skipped) {
    if (cand.floor < limit)
      candidates_.push_back(cand);
    else
      skipped = std::min(skipped, cand.floor);
  }

  // floor(m / unit) without a division. The product is within one of it: the bounds are asked
  // at most at the memory they were made for, so the quotient is at most about their slots, and
  // the product's relative error (a few 2^-53) is far below one unit there.
  size_type units(size_type m) const noexcept {
    const size_type unit = lb_->unit;
    auto u = static_cast<size_type>(static_cast<double>(m) * inverse_unit_);
    if (u * unit > m)
      --u;
    else if ((u + 1) * unit <= m)
      ++u;
    return u;
  }

  // The branches of cell (i, l) at m that can be finite, with their lower bounds: those below
  // the limit onto the stack, the least bound of the others in `skipped`.
  void list_branches(std::int32_t i, std::int32_t l, size_type m, std::size_t c, double limit,
                     double& skipped) {
    if (i == l) {
      const std::span<const tape_option> options = md_.options(i);
      for (std::size_t p = 0; p < options.size(); ++p) {
        const tape_branch base = tape_branch_of(md_, i, i, options[p]);
        if (m < base.own) continue;
        push({base.time, base.time, 0, tape_order(p)}, limit, skipped);
        spend();
      }
    } else if (m >= mmin_[c]) {
      auto lower_of = [&](const branch_part& p) {
        return lower(interval_index(md_.L, p.i, p.l), p.memory(m));
      };
      for_each_branch_within(
          md_, branches_, i, l, m,
          [&](std::size_t p, const tape_branch& b) {
            push({b.value(lower_of(b.rest())), b.time, 0, tape_order(p)}, limit, skipped);
            spend();
            return true;
          },
          [&](const checkpoint_branch& b) {
            const double floor_left = lower_of(b.left());
            push({b.value(lower_of(b.right()), floor_left), b.forward, floor_left, b.j}, limit,
                 skipped);
            spend();
            return true;
          });
    }
  }

  // The best branch found below the limit (`best` infinite: none) and its candidate's j.
  struct searched {
    double best = infinite_time;
    std::int32_t choice = -1;
  };

  // The candidates of cell (i, l) at m from `base` on, sorted by bound, each searched with what
  // is left of min(limit, best so far); those skipped lower `skipped`.
  searched search_branches(std::int32_t i, std::int32_t l, size_type m, std::size_t base,
                           double limit, double& skipped) {
    const std::span<const tape_option> options = md_.options(i);
    searched r;  // r.best is below the limit once set
    const std::size_t end = candidates_.size();
    for (std::size_t k = base; k < end; ++k) {
      const candidate cand = candidates_[k];
      // Ties go to the dense DP's first branch (tape, then j up): a branch before the best may
      // still win by equalling it (on the grid, v < best + q).
      const double bound = std::min(limit, r.best);
      const double win = r.best < limit && cand.j < r.choice ? r.best + md_.time_quantum : bound;
      if (cand.floor >= win) {
        skipped = std::min(skipped, cand.floor);
        if (cand.floor >= bound + md_.time_quantum) break;  // and so are all after it
        continue;
      }
      double v = 0;
      if (cand.j < 0 && i == l) {
        v = cand.own;
      } else if (cand.j < 0) {
        const tape_branch b = tape_branch_of(md_, i, l, options[at(cand.j + tape_orders)]);
        const branch_part p = b.rest();
        v = b.value(value(p.i, p.l, p.memory(m), win - cand.own).value);
      } else {
        const checkpoint_branch b = checkpoint_branch_at(md_, forwards_, i, l, cand.j, cand.own);
        const branch_part pr = b.right();
        const bounded right = value(pr.i, pr.l, pr.memory(m), win - cand.own - cand.floor_left);
        if (stopped_) break;
        v = b.value(right.value, cand.floor_left);
        if (v < win) {
          const branch_part pl = b.left();
          v = b.value(right.value,
                      value(pl.i, pl.l, pl.memory(m), win - cand.own - right.value).value);
        }
      }
      if (stopped_) break;
      // Below `win` the parts were exact (a bound is at or above its limit).
      if (v < win) {
        r.best = v;
        r.choice = cand.j;
      } else {
        skipped = std::min(skipped, v);
      }
    }
    return r;
  }

  // Cell c at m into the memo: exact where a branch was found below the limit; otherwise every
  // branch was skipped at or above the limit (or has no finite value, which m >= need rules out
  // for at least one), and `floor`, the least of their bounds and the cell's own, bounds it.
  bounded record(std::size_t c, size_type m, const searched& found, double limit, double floor) {
    entry& e = memo_.insert(c, m);
    if (found.best < limit) {
      e.value = std::max(b_.S[c], found.best);
      e.choice = static_cast<std::int16_t>(
          found.choice < 0 ? tape_choice(static_cast<std::size_t>(found.choice + tape_orders))
                           : found.choice);
      e.exact = true;
      return {e.value, true};
    }
    e.value = std::max(e.value, floor);
    return {floor, false};
  }

  // One more branch looked at; past the cap, the search stops.
  void spend() noexcept {
    work_ += 1;
    if (work_ > max_work_ || memo_.size() > max_cells_) stopped_ = true;
  }

  const model& md_;
  const interval_bounds& b_;
  dp_branches branches_;
  const lower_bound_table* lb_ = nullptr;
  // Per interval: its need, store and S (`b_`), and its lower bounds' (the dense table's need,
  // store, max(S, S of the floor model), and where its values start).
  struct row {
    size_type need;
    size_type store;
    double S;
    size_type lb_need;
    size_type lb_store;
    double lb_S;
    const double* values;
  };
  std::vector<row> rows_;
  double inverse_unit_ = 1;
  double max_work_ = 0;
  std::size_t max_cells_ = 0;
  std::vector<size_type> mmin_;      // necessary_memory_table
  std::vector<size_type> forwards_;  // checkpoint_forward_table, for `checkpoint_branch_at`
  std::vector<candidate> candidates_;
  memo memo_;
  double work_ = 0;
  bool stopped_ = false;
};

}  // namespace search

struct search_result {
  bool complete = false;  // false: stopped at its cap on work
  double value = infinite_time;
  std::vector<op> ops;  // the schedule of (0, L, m) where its value is finite
  double work = 0;      // branches looked at, in all
  std::size_t cells = 0;
};

// OPT(0, L, m) and its schedule by the search `s` with its lower bounds, exactly as the dense DP
// in exact units would give them (incomplete where the search passes its cap).
inline search_result search_dp(const model& md, search::engine& s, size_type m) {
  search_result out;
  const std::size_t root = interval_index(md.L, 0, md.L);
  double floor = s.lower(root, m);
  if (!(floor < infinite_time)) {
    out.complete = true;
    return out;
  }
  // Limits on the time grid, so that the children's (limit - sums) are exact.
  const double q = md.time_quantum;
  auto on_grid = [q](double t) { return std::ceil(t / q) * q; };
  double gap = std::max(floor * 0.002, q);
  for (;;) {
    // Past the grid's exact range (or far above the bound) the last round has no limit.
    const double limit = gap > floor ? infinite_time : on_grid(floor + gap);
    const search::bounded v = s.value(0, md.L, m, limit);
    out.work = s.work();
    out.cells = s.cells();
    if (s.stopped()) return out;
    if (v.exact) {
      out.complete = true;
      out.value = v.value;
      if (v.value < infinite_time)
        out.ops = persistent_ops(md, 0, md.L, m, [&](std::int32_t i, std::int32_t l, size_type cm) {
          return s.choice(i, l, cm);
        });
      return out;
    }
    floor = std::max(floor, v.value);
    gap *= 4;
  }
}

// The same with lower bounds from `slots` memories and no cap on the work (tests, benchmarks).
inline search_result search_dp(const model& md, const interval_bounds& b, size_type m,
                               size_type slots, dp_branches branches) {
  const lower_bound_table lb =
      make_lower_bounds(plan_lower_bounds(md, m, slots, branches, 1), branches, 1);
  search::engine s(md, b, branches);
  s.restart(lb, infinite_time);
  return search_dp(md, s, m);
}

// What a searched cell holds in memory, its share of the hash table included.
inline constexpr double search_cell_bytes = 2.0 * sizeof(search::entry);

// The lower bounds of a search at memory `m` where one is worth trying: none where the chain is
// too long for its recursion (about 200 bytes of stack a stage), its sums are not exact, or
// rounding to the unit loses more than `tuning.search_max_rounding_loss` of m: the bounds are
// then too loose for the search to finish.
inline std::optional<lower_bound_plan> search_plan(const model& md, size_type m,
                                                   dp_branches branches, unsigned threads) {
  if (md.L > tuning.search_max_stages || !md.exact_sums) return std::nullopt;
  const size_type unit = lower_bound_unit(md, m, tuning.search_slots);
  if (rounding_loss(md, unit) > tuning.search_max_rounding_loss * static_cast<double>(m))
    return std::nullopt;
  return plan_lower_bounds_on(md, m, unit, branches, threads);
}

// The search at memory m on the bounds of `plan` within `max_seconds` (their DP, estimated,
// included) and `max_bytes` (their table and the cells searched): incomplete where it would pass
// them, having spent nothing where the lower bounds' DP alone would take half of them. `keep`
// (if not null) receives the lower bounds.
inline search_result search_dp_within(const model& md, const interval_bounds& b,
                                      lower_bound_plan plan, size_type m, dp_branches branches,
                                      unsigned threads, double max_seconds, double max_bytes,
                                      std::optional<lower_bound_table>* keep = nullptr) {
  if (plan.bytes > max_bytes / 2 || plan.seconds > max_seconds / 2) return {};
  const double max_work = (max_seconds - plan.seconds) * tuning.search_work_per_second;
  // Where the search holds many memories an interval, its bounds are too loose for it to finish
  // soon: it stops there (chains of random sizes; the zoo's need 1 to 11 an interval).
  const auto max_cells = static_cast<std::size_t>(
      std::min((max_bytes - plan.bytes) / search_cell_bytes,
               tuning.search_cells_per_interval * static_cast<double>(interval_count(md.L))));
  lower_bound_table lb = make_lower_bounds(std::move(plan), branches, threads);
  search_result r;
  {
    search::engine s(md, b, branches);
    s.restart(lb, max_work, max_cells);
    r = search_dp(md, s, m);
  }
  if (keep != nullptr) *keep = std::move(lb);
  return r;
}

// The same on `search_plan`'s bounds (incomplete, having spent nothing, where there are none).
inline search_result search_dp_within(const model& md, const interval_bounds& b, size_type m,
                                      dp_branches branches, unsigned threads, double max_seconds,
                                      double max_bytes) {
  std::optional<lower_bound_plan> plan = search_plan(md, m, branches, threads);
  if (!plan) return {};
  return search_dp_within(md, b, std::move(*plan), m, branches, threads, max_seconds, max_bytes);
}

}  // namespace remat::detail
