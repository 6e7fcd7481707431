// docs/model.md's DP on the chain's own sizes, every budget at once: for each interval (i, l), the
// step function m -> OPT(i, l, m) kept as its breakpoints instead of a dense array over memory
// slots.
//
// * A frontier is a contiguous array of points (m, t), m strictly increasing (exact integer
//   memories), t strictly decreasing, with a parallel array of choices: OPT(i, l, m) is the t of
//   the last point with m_k <= m, infinite below the first. The choice (0: tape branch or base
//   case, j - i > 0: checkpoint at j, relative so that intervals can share it) is the branch that
//   reaches t at m_k; OPT being non-increasing in m, it stays optimal up to the next point, so the
//   schedule for any m is read back by recursing with the true memory, as from the dense table
//   (`persistent_ops`).
// * The recurrence becomes operations on frontiers: the tape branch is the frontier of (i+1, l)
//   shifted by xb[i+1] plus a constant; a checkpoint branch at j is the sum of two step functions,
//   (j, l) shifted by x[j] and (i, j-1), plus the forward time; each is cut below its own
//   requirement and mmin; the cell's frontier is their lower envelope, built branch by branch in
//   the dense DP's order (tape first, then j up), so ties go the same way. A branch is one
//   merge into the envelope so far (`merge_branch`), only over the memories where it can win:
//   between its first point and where the envelope reaches the branch's least value (its last
//   point's), by blocks of a few points, skipping the blocks where the branch's least is not
//   below the envelope's greatest; the envelope is rebuilt (into a second buffer, no allocation
//   once the buffers have grown) only when the branch wins somewhere, and then only the points
//   around where it wins are merged, the rest copied whole.
// * Sums are those of the dense DP, in the same order: on the time grid of `quantize_times` they
//   are exact, so the values equal the dense DP's in exact units bit for bit.
// * Intervals that pose the same problem (the same stages, sizes and times, from i to l) have the
//   same frontier: it is computed once. Chains of repeated blocks (transformer layers, residual
//   blocks) have a few distinct intervals per length instead of L.
// * Threads share each diagonal's distinct intervals (every interval reads shorter ones only).
//
// A solve at one budget needs each interval only up to the memory that budget can leave it
// (`frontier_options::cap`, `frontier::interval_cap`): points above are neither computed nor kept,
// and the values at or below the cap are those of the whole frontier, bit for bit.
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/dp/engines/frontier_merge.hpp>
#include <remat/detail/dp/engines/frontier_table.hpp>
#include <remat/detail/dp/intervals.hpp>
#include <remat/detail/dp/model.hpp>
#include <remat/detail/dp/read_back.hpp>
#include <remat/schedule.hpp>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace remat::detail {

namespace frontier {

// The order of the work: per diagonal, the first interval of each class (the one computed); what
// the diagonals done cost is kept in the table (`frontier_table::diagonal_work`), to stop at the
// limits and to resume.
struct plan {
  std::vector<std::vector<std::int32_t>> todo;  // [d]: the i of the intervals (i, i + d) computed
  std::vector<size_type> cap;  // [class]: the most of its intervals' `interval_cap`s

  // After diagonal d: the totals done and projected, and whether they are within the limits.
  // Per interval, the work and the points of diagonal d' > d are projected as those of d times
  // (d' / d)^p, p fitted between d / 2 and d (from 0 to 4): frontiers grow with the interval.
  constexpr bool within(frontier_table& t, std::int32_t d, const frontier_options& o) const {
    t.diagonals_done = d;
    t.work = 0;
    t.points_done = 0;
    const std::vector<double>& work = t.diagonal_work;
    const std::vector<double>& points = t.diagonal_points;
    for (std::int32_t k = 0; k <= d; ++k) {
      t.work += work[static_cast<std::size_t>(k)];
      t.points_done += points[static_cast<std::size_t>(k)];
    }
    t.projected_work = t.work;
    t.projected_points = t.points_done;
    const auto L = static_cast<std::int32_t>(todo.size()) - 1;
    if (d >= 4 && d < L && !std::is_constant_evaluated()) {
      auto per = [&](const std::vector<double>& v, std::int32_t k) {
        const auto n = static_cast<double>(todo[static_cast<std::size_t>(k)].size());
        return n > 0 ? v[static_cast<std::size_t>(k)] / n : 0.0;
      };
      auto exponent = [&](const std::vector<double>& v) {
        const double now = per(v, d);
        const double half = per(v, d / 2);
        if (!(now > 0) || !(half > 0)) return 2.0;
        const double p = std::log(now / half) / std::log(static_cast<double>(d) / (d / 2));
        return std::clamp(p, 0.0, 4.0);
      };
      const double pw = exponent(work);
      const double pp = exponent(points);
      const double w = per(work, d);
      const double q = per(points, d);
      for (std::int32_t k = d + 1; k <= L; ++k) {
        const auto n = static_cast<double>(todo[static_cast<std::size_t>(k)].size());
        const double r = static_cast<double>(k) / d;
        t.projected_work += n * w * std::pow(r, pw);
        t.projected_points += n * q * std::pow(r, pp);
      }
    }
    t.peak_projected_work = std::max(t.peak_projected_work, t.projected_work);
    t.peak_projected_points = std::max(t.peak_projected_points, t.projected_points);
    const bool within = o.stop_on_projection
                            ? t.projected_work <= o.max_work && t.projected_points <= o.max_points
                            : t.work <= o.max_work && t.points_done <= o.max_points;
    t.complete = within && d == L;
    return within;
  }
};

constexpr plan make_plan(const frontier_table& t, const model& md) {
  plan p;
  const auto n = static_cast<std::size_t>(t.L) + 1;
  p.todo.resize(n);
  p.cap.assign(t.frontiers.size(), -1);
  std::vector<char> seen;
  seen.assign(t.frontiers.size(), 0);
  for (std::int32_t d = 0; d <= t.L; ++d)
    for (std::int32_t i = 0; i + d <= t.L; ++i) {
      const auto k = static_cast<std::size_t>(t.kind[interval_index(t.L, i, i + d)]);
      p.cap[k] = std::max(p.cap[k], interval_cap(md, t.cap, i));
      if (!seen[k]) {
        seen[k] = 1;
        p.todo[static_cast<std::size_t>(d)].push_back(i);
      }
    }
  return p;
}

// `frontier_dp` from diagonal `d` on with `workers` threads: they take each diagonal's intervals
// from a counter; the last to arrive at the barrier checks the limits.
inline frontier_table threaded(const model& md, const interval_bounds& bounds,
                               const frontier_options& o, frontier_table t, plan& p,
                               unsigned workers, std::int32_t d) {
  const std::int32_t L = md.L;
  bool go = true;
  std::atomic<std::size_t> next{0};
  std::vector<double> work(workers, 0);
  std::barrier sync(static_cast<std::ptrdiff_t>(workers), [&]() noexcept {
    double w = 0;
    for (double& x : work) w += std::exchange(x, 0);
    double points = 0;
    for (const std::int32_t i : p.todo[static_cast<std::size_t>(d)])
      points += static_cast<double>(t.of(i, i + d).size());
    t.diagonal_work[static_cast<std::size_t>(d)] = w;
    t.diagonal_points[static_cast<std::size_t>(d)] = points;
    go = p.within(t, d, o) && d < L;
    ++d;
    next.store(0, std::memory_order_relaxed);
  });
  auto run = [&](unsigned w) {
    scratch s;
    while (go) {
      const std::vector<std::int32_t>& todo = p.todo[static_cast<std::size_t>(d)];
      for (std::size_t k = next.fetch_add(1); k < todo.size(); k = next.fetch_add(1)) {
        const std::int32_t i = todo[k];
        const auto c = static_cast<std::size_t>(t.kind[interval_index(L, i, i + d)]);
        frontier_cell(md, bounds, t, i, i + d, p.cap[c], o, s, t.frontiers[c], t.choices[c]);
      }
      work[w] = std::exchange(s.work, 0);
      sync.arrive_and_wait();
    }
  };
  {
    std::vector<std::jthread> pool;
    for (unsigned w = 1; w < workers; ++w) pool.emplace_back(run, w);
    run(0);
  }
  return t;
}

// The diagonals of `t` after those done, until the last or the limits of `o`.
constexpr frontier_table run_diagonals(const model& md, const interval_bounds& bounds,
                                       const frontier_options& o, frontier_table t) {
  plan p = make_plan(t, md);
  const std::int32_t start = t.diagonals_done + 1;
  unsigned workers = 1;
  if (!std::is_constant_evaluated()) workers = std::max(1U, o.threads);
  if (workers > 1 && md.L > 0 && start <= md.L)
    return threaded(md, bounds, o, std::move(t), p, workers, start);
  scratch s;
  for (std::int32_t d = start; d <= md.L; ++d) {
    double points = 0;
    for (const std::int32_t i : p.todo[static_cast<std::size_t>(d)]) {
      const auto k = static_cast<std::size_t>(t.kind[interval_index(md.L, i, i + d)]);
      frontier_cell(md, bounds, t, i, i + d, p.cap[k], o, s, t.frontiers[k], t.choices[k]);
      points += static_cast<double>(t.frontiers[k].size());
    }
    t.diagonal_work[static_cast<std::size_t>(d)] = std::exchange(s.work, 0);
    t.diagonal_points[static_cast<std::size_t>(d)] = points;
    if (!p.within(t, d, o)) break;
  }
  return t;
}

}  // namespace frontier

// Every interval's frontier. `bounds` are `make_interval_bounds` of the model (only the store
// and S of chains whose sums are not exact are read). Stops early at the limits of `o`; a table
// stopped so can be resumed (`frontier_dp_resume`).
constexpr frontier_table frontier_dp(const model& md, const interval_bounds& bounds,
                                     const frontier_options& o = {}) {
  frontier_table t;
  t.L = md.L;
  t.branches = o.branches;
  std::int32_t count = 0;
  t.kind = frontier::interval_classes(md, count);
  t.frontiers.resize(static_cast<std::size_t>(count));
  t.choices.resize(static_cast<std::size_t>(count));
  t.diagonal_work.assign(static_cast<std::size_t>(md.L) + 1, 0);
  t.diagonal_points.assign(static_cast<std::size_t>(md.L) + 1, 0);
  // Where sums round, the dense DP's rules put S at store in every interval with a point anywhere,
  // which a capped frontier cannot tell: those chains get the whole frontiers.
  t.cap = md.exact_sums ? o.cap : unreachable;
  // The least work: every interval computed tries each split point.
  double least = 0;
  const frontier::plan p = frontier::make_plan(t, md);
  for (std::size_t d = 0; d < p.todo.size(); ++d)
    least += static_cast<double>(p.todo[d].size()) * static_cast<double>(d + 1);
  t.peak_projected_work = least;
  if (o.stop_on_projection && least > o.max_work) {  // (a probe runs what it can)
    t.complete = false;
    t.projected_work = least;
    return t;
  }
  return frontier::run_diagonals(md, bounds, o, std::move(t));
}

// `t`, a table of `frontier_dp` on `md` stopped at its limits, carried on from the diagonals it
// finished under the limits of `o` (counted from the start: `max_work` includes the work done),
// with the table's own branches and cap. The result is the table `frontier_dp` gives under `o`.
inline frontier_table frontier_dp_resume(const model& md, const interval_bounds& bounds,
                                         frontier_options o, frontier_table t) {
  o.branches = t.branches;
  o.cap = t.cap;
  t.complete = true;
  return frontier::run_diagonals(md, bounds, o, std::move(t));
}

// The choice of cell (i, l, m) (finite there) of a frontier table: the dense DP's where sums are
// exact (`dense_choice`), else the frontier's own.
constexpr std::int32_t frontier_choice(const model& md, const frontier_table& t, std::int32_t i,
                                       std::int32_t l, size_type m) {
  const frontier_step* p = t.at(i, l, m);
  if (p == nullptr)
    throw std::logic_error(
        "remat internal error: a frontier's schedule reads an infeasible "
        "interval");
  if (md.exact_sums) {
    const std::int32_t dense =
        dense_choice(md, t.branches, i, l, m,
                     [&](std::int32_t a, std::int32_t b, size_type k) { return t.value(a, b, k); });
    if (dense >= 0) return dense;
  }
  const std::int32_t choice = t.choice(i, l, p);
  return is_tape_choice(choice) ? choice : i + choice;
}

// The schedule of (i, l) at memory m (finite there) from a frontier table, read back with
// `frontier_choice`.
constexpr std::vector<op> frontier_ops(const model& md, const frontier_table& t, std::int32_t i,
                                       std::int32_t l, size_type m) {
  return persistent_ops(md, i, l, m, [&](std::int32_t ci, std::int32_t cl, size_type cm) {
    return frontier_choice(md, t, ci, cl, cm);
  });
}

}  // namespace remat::detail
