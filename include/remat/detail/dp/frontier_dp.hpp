// MODEL.md's DP on the chain's own sizes, every budget at once: for each interval (i, l), the step
// function m -> OPT(i, l, m) kept as its breakpoints instead of a dense array over memory slots.
//
// * A frontier is a contiguous array of points (m, t), m strictly increasing (exact integer
//   memories), t strictly decreasing, with a parallel array of choices: OPT(i, l, m) is the t of the last point with
//   m_k <= m, infinite below the first. The choice (0: tape branch or base case, j - i > 0:
//   checkpoint at j, relative so that intervals can share it) is the branch that reaches t at m_k; being non-increasing in m, it stays
//   optimal up to the next point, so the schedule for any m is read back by recursing with the
//   true memory, as from the dense table (`persistent_ops`).
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
//
// Thinning (`frontier_options::epsilon` > 0) bounds the frontiers' sizes: of points within a
// relative epsilon of memory of the next one kept, only the latter stays, so a dropped point's
// budgets get a kept point's schedule (rounding memory up: a schedule never claims to fit what it
// does not). Thinned values are never below exact. A second, optimistic frontier thinned the other
// way (the kept point's time moved down to the dropped point's memory) is never above exact; the
// two bracket the exact optimum at every budget, which gives the loss bound of the result.
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/dp/model.hpp>
#include <remat/detail/dp/persistent_dp.hpp>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstddef>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace remat::detail {

// A frontier's point as the table stores it: 16 bytes, so that the merges, which read only m and
// t of the frontiers they combine (far apart in a table of up to hundreds of MB), load 4 points
// per cache line instead of 2.7; its choice is in a parallel array only the read-back reads.
struct frontier_step {
  size_type m = 0;
  double t = 0;
};

// A point with its choice: the envelope being built (`frontier::scratch`).
struct frontier_point {
  size_type m = 0;
  double t = 0;
  std::int32_t choice = 0;
};

// How the frontiers are thinned: not at all (exact), or within `epsilon` of memory, pessimistic
// (rounding memory up, the schedules' side) or optimistic (rounding it down, a lower bound).
enum class thinning : std::uint8_t { none, pessimistic, optimistic };

struct frontier_options {
  dp_branches branches = dp_branches::tape_and_checkpoint;
  double epsilon = 0;  // relative memory; 0: exact
  thinning side = thinning::pessimistic;
  unsigned threads = 1;
  // The DP stops (`frontier_table::complete` false) as soon as its work (`frontier::scratch::
  // work`) or its points, done or projected from the diagonals done, pass these.
  double max_work = std::numeric_limits<double>::infinity();
  double max_points = std::numeric_limits<double>::infinity();
  // False: the limits stop the DP on what is done only (a probe, `remat::estimate_solve`).
  bool stop_on_projection = true;
  // The root's memory (m of (0, L)) of a solve at one budget: every interval is computed up to
  // the most memory that m can leave it (`frontier::interval_cap`) only. `unreachable`: no cap,
  // every budget (the sweeps and trade-offs read the whole curve).
  size_type cap = unreachable;
};

// Every interval's frontier; intervals of the same content share one.
struct frontier_table {
  std::int32_t L = 0;
  // False when the DP stopped at its limits (`frontier_options::max_work`, `max_points`): only
  // the diagonals up to `diagonals_done` are filled.
  bool complete = true;
  std::int32_t diagonals_done = -1;
  double work = 0;    // done
  double points_done = 0;
  double projected_work = 0;    // the whole DP's, projected from the diagonals done (or done)
  double projected_points = 0;
  // The most that the limits were checked against (with `stop_on_projection`: the least work,
  // then each diagonal's projection): a DP with limits below these stops before it completes
  // (`remat::estimate_solve` tells from them whether the solve will be exact).
  double peak_projected_work = 0;
  double peak_projected_points = 0;
  // `frontier_options::cap`: the root's values are those of the whole DP at m <= cap only (each
  // interval's up to its `frontier::interval_cap`), nothing is known above.
  size_type cap = unreachable;
  std::vector<std::int32_t> kind;                  // [interval] -> index into `frontiers`
  std::vector<std::vector<frontier_step>> frontiers;  // one per distinct interval
  std::vector<std::vector<std::int32_t>> choices;     // [k][p]: the choice of frontiers[k][p]

  constexpr const std::vector<frontier_step>& of(std::int32_t i, std::int32_t l) const {
    return frontiers[static_cast<std::size_t>(kind[interval_index(L, i, l)])];
  }
  constexpr const std::vector<std::int32_t>& choices_of(std::int32_t i, std::int32_t l) const {
    return choices[static_cast<std::size_t>(kind[interval_index(L, i, l)])];
  }
  // The last point at or below m, or nullptr (infinite).
  constexpr const frontier_step* at(std::int32_t i, std::int32_t l, size_type m) const {
    const std::vector<frontier_step>& f = of(i, l);
    auto it = std::upper_bound(f.begin(), f.end(), m,
                               [](size_type v, const frontier_step& p) { return v < p.m; });
    return it == f.begin() ? nullptr : &*(it - 1);
  }
  // The choice of `p`, a point of (i, l)'s frontier (`at`).
  constexpr std::int32_t choice(std::int32_t i, std::int32_t l, const frontier_step* p) const {
    return choices_of(i, l)[static_cast<std::size_t>(p - of(i, l).data())];
  }
  constexpr double value(std::int32_t i, std::int32_t l, size_type m) const {
    const frontier_step* p = at(i, l, m);
    return p == nullptr ? infinite_time : p->t;
  }
  constexpr const std::vector<frontier_step>& root() const { return of(0, L); }
  // Points over all distinct frontiers (their storage: 20 bytes each).
  constexpr std::size_t points() const {
    std::size_t n = 0;
    for (const auto& f : frontiers) n += f.size();
    return n;
  }
};

namespace frontier {

// Gives every interval the number of its class: intervals with the same stages (sizes and times,
// MODEL.md's arrays from i to l and x[l+1]) get the same number, and no other does. A stage's
// token is its tuple (the loss's has no forward, so no interval ending at L matches another);
// an interval's class is that of (its class without stage l, token of l), numbered by sorting.
constexpr std::vector<std::int32_t> interval_classes(const model& md, std::int32_t& count) {
  const std::int32_t L = md.L;
  const auto n = static_cast<std::size_t>(L) + 1;
  struct token {
    size_type x0, x1, xb1, ft, fa, bt;
    double fw, bw;
    bool loss;
    constexpr bool operator<(const token& o) const {
      if (loss != o.loss) return loss < o.loss;
      if (x0 != o.x0) return x0 < o.x0;
      if (x1 != o.x1) return x1 < o.x1;
      if (xb1 != o.xb1) return xb1 < o.xb1;
      if (ft != o.ft) return ft < o.ft;
      if (fa != o.fa) return fa < o.fa;
      if (bt != o.bt) return bt < o.bt;
      if (fw != o.fw) return fw < o.fw;
      return bw < o.bw;
    }
  };
  std::vector<std::pair<token, std::int32_t>> tokens;
  tokens.reserve(n);
  for (std::size_t k = 0; k < n; ++k) {
    const bool loss = k == n - 1;
    tokens.push_back({{md.x[k], loss ? 0 : md.x[k + 1], loss ? 0 : md.xb[k + 1], md.ft[k], md.fa[k],
                       md.bt[k], md.fw[k], md.bw[k], loss},
                      static_cast<std::int32_t>(k)});
  }
  std::sort(tokens.begin(), tokens.end(), [](const auto& a, const auto& b) {
    if (a.first < b.first) return true;
    if (b.first < a.first) return false;
    return a.second < b.second;
  });
  std::vector<std::int32_t> tok;
  tok.assign(n, 0);
  std::int32_t next = 0;
  for (std::size_t k = 0; k < n; ++k) {
    if (k > 0 && tokens[k - 1].first < tokens[k].first) ++next;
    tok[static_cast<std::size_t>(tokens[k].second)] = next;
  }
  ++next;
  std::vector<std::int32_t> kind;
  kind.assign(interval_count(L), 0);
  for (std::int32_t i = 0; i <= L; ++i)
    kind[interval_index(L, i, i)] = tok[static_cast<std::size_t>(i)];
  std::vector<std::pair<std::pair<std::int32_t, std::int32_t>, std::int32_t>> keys;
  keys.reserve(n);
  for (std::int32_t d = 1; d <= L; ++d) {
    keys.clear();
    for (std::int32_t i = 0; i + d <= L; ++i)
      keys.push_back({{kind[interval_index(L, i, i + d - 1)], tok[static_cast<std::size_t>(i + d)]},
                      i});
    std::sort(keys.begin(), keys.end());
    for (std::size_t k = 0; k < keys.size(); ++k) {
      if (k > 0 && keys[k - 1].first != keys[k].first) ++next;
      kind[interval_index(L, keys[k].second, keys[k].second + d)] = next;
    }
    ++next;
  }
  count = next;
  return kind;
}

// The most memory at which the DP of a root capped at `cap` reads an interval starting at i (-1:
// none). A branch passes its own memory to its left part and less to the others, and the start
// moves up, from i' < i to i, only into the tape branch's rest (m - xb[i]) or a checkpoint's
// right part at i (m - x[i]): an interval starting at i > 0 is read at cap - min(x[i], xb[i]) at
// most. The DP itself reads every interval within these caps (from (i, l) at m <= its cap: the
// left part at m, the others at m - xb[i + 1] or m - x[j], below their caps), and so does the
// read-back of a schedule.
constexpr size_type interval_cap(const model& md, size_type cap, std::int32_t i) noexcept {
  if (cap == unreachable || i == 0) return cap;
  const auto at = static_cast<std::size_t>(i);
  const size_type least = std::min(md.x[at], md.xb[at]);
  return cap < least ? -1 : cap - least;
}

// The working buffers of one thread: the envelope so far and the next one.
struct scratch {
  std::vector<frontier_point> best, next, patch;
  double work = 0;  // blocks and points walked, branches tried, points copied / 8: what the
                    // DP's time follows
};

// The points of `f` from memory `from` on, the first moved up to `from` (a step function cut
// below `from`), appended to `out` with memory shifted by `shift` and time plus `add`, up to
// memory `top`.
constexpr void append_shifted(std::vector<frontier_point>& out, const std::vector<frontier_step>& f,
                              size_type shift, double add, size_type from, std::int32_t choice,
                              size_type top) {
  if (f.empty() || from > top) return;
  std::size_t k = 0;
  while (k + 1 < f.size() && f[k + 1].m + shift <= from) ++k;
  if (f[k].m + shift <= from) out.push_back({from, add + f[k++].t, choice});
  for (; k < f.size() && f[k].m + shift <= top; ++k)
    out.push_back({f[k].m + shift, add + f[k].t, choice});
}

// Points per block of the coarse walk in `merge_branch`.
inline constexpr std::size_t merge_block = 8;

// best = min(best, branch j), branch(m) = (forward + R(m - shift)) + Lf(m) for from <= m <= top
// (the dense DP's order of the sums); ties keep `best`'s point. The new envelope is built in
// `s.next`; false (and `s.next` meaningless) when the branch wins nowhere. `best` has no point
// above `top`; R and Lf hold every point up to the memories the branch reads them at (top - shift
// and top), so their last points still bound it from below.
//
// Most of a branch loses everywhere, so the walk goes by blocks of `merge_block` points of each
// of R, Lf and best: over the memories where none of the three leaves its block, the branch is at
// least its value at the blocks' last points (both non-increasing) and the envelope at most its
// value where the segment starts; where the former is not below the latter, the branch cannot win
// and the whole segment is skipped. Elsewhere the three are merged point by point until the
// branch stops winning past the segment; only the envelope's points over memories where the
// branch won somewhere are rebuilt, the rest is copied as it stands.
constexpr bool merge_branch(scratch& s, const std::vector<frontier_step>& R, size_type shift,
                            const std::vector<frontier_step>& Lf, double forward, size_type from,
                            std::int32_t j, size_type top) {
  const std::vector<frontier_point>& best = s.best;
  std::vector<frontier_point>& out = s.next;
  std::vector<frontier_point>& patch = s.patch;
  constexpr std::size_t K = merge_block;
  constexpr size_type none = unreachable;
  const std::size_t nb = best.size();
  const std::size_t nr = R.size();
  const std::size_t nl = Lf.size();
  const size_type start = std::max({R.front().m + shift, Lf.front().m, from});
  if (start > top) return false;
  // The walk ends at a memory >= stop.
  const size_type stop = top == none ? none : top + 1;
  const double least = (forward + R.back().t) + Lf.back().t;  // the branch's value from its top
  auto above = [](const auto& f, size_type m) {  // the first point above m
    return static_cast<std::size_t>(
        std::upper_bound(f.begin(), f.end(), m,
                         [](size_type v, const auto& p) { return v < p.m; }) -
        f.begin());
  };
  // ib: the first point of best at or above m (below it: settled); ir, il: a point of R, Lf at or
  // below m, in the block of the last one (the walk by blocks may leave them behind).
  std::size_t ib = above(best, start);
  s.work += 1;
  if (ib > 0 && best[ib - 1].t <= least) return false;
  if (ib > 0 && best[ib - 1].m == start) --ib;
  std::size_t ir = above(R, start - shift) - 1;
  std::size_t il = above(Lf, start) - 1;
  auto mem_r = [&](std::size_t k) { return k < nr ? R[k].m + shift : none; };
  auto mem_l = [&](std::size_t k) { return k < nl ? Lf[k].m : none; };
  auto mem_b = [&](std::size_t k) { return k < nb ? best[k].m : none; };
  std::size_t copied = 0;  // best's points before it are in `out` (once improved)
  bool improved = false;
  // A walk point by point emits at most a point per point of the three.
  if (patch.size() < nb + nr + nl + 1) patch.resize(nb + nr + nl + 1);
  frontier_point* const emitted = patch.data();
  const frontier_point none_point{};
  const frontier_point* const bp = nb > 0 ? best.data() : &none_point;
  out.clear();
  size_type m = start;
  while (true) {
    const std::size_t hr = std::min(nr, (ir / K + 1) * K);
    const std::size_t hl = std::min(nl, (il / K + 1) * K);
    const std::size_t hb = std::min(nb, (ib / K + 1) * K);
    const double ub = ib > 0 ? best[ib - 1].t : infinite_time;  // the envelope's from m - 1 on
    if (ub <= least) break;  // the branch cannot win from m on
    const size_type e = std::min({mem_r(hr), mem_l(hl), mem_b(hb)});
    s.work += 1;
    if (!((forward + R[hr - 1].t) + Lf[hl - 1].t < ub)) {  // no win below e
      if (e >= stop) break;
      m = e;
      if (mem_r(hr) == e) ir = hr;
      if (mem_l(hl) == e) il = hl;
      if (mem_b(hb) == e) ib = hb;
      continue;
    }
    // Point by point from m (nothing below it changed since best's point before it), without
    // branches on the data: which of the three moves, whether the branch wins, whether a point
    // is emitted.
    while (ir + 1 < nr && R[ir + 1].m + shift <= m) ++ir;
    while (il + 1 < nl && Lf[il + 1].m <= m) ++il;
    while (ib < nb && best[ib].m < m) ++ib;
    const std::size_t lo = ib;
    double last = lo > 0 ? best[lo - 1].t : infinite_time;  // the envelope's at m - 1
    double b = last;
    std::int32_t bc = lo > 0 ? best[lo - 1].choice : 0;
    if (ib < nb && best[ib].m == m) {
      b = best[ib].t;
      bc = best[ib].choice;
      ++ib;
    }
    bool won = false;
    bool done = false;
    std::size_t np = 0;
    while (true) {
      const double v = (forward + R[ir].t) + Lf[il].t;
      const bool wins = v < b;
      const double value = wins ? v : b;
      emitted[np] = {m, value, wins ? j : bc};
      const bool lower = value < last;
      np += lower ? 1 : 0;
      last = lower ? value : last;
      won = won || wins;
      const size_type mr = ir + 1 < nr ? R[ir + 1].m + shift : none;
      const size_type ml = il + 1 < nl ? Lf[il + 1].m : none;
      const size_type mb = ib < nb ? best[ib].m : none;
      const size_type mn = std::min({mb, mr, ml});
      s.work += 1;
      if (mn >= stop || (!wins && b <= least)) {  // nothing left to win
        done = true;
        break;
      }
      m = mn;
      ir += mr == m ? 1 : 0;
      il += ml == m ? 1 : 0;
      if (!wins && m >= e) break;  // back to blocks from m (best's point there not taken)
      const bool take = mb == m;
      const frontier_point& p = bp[take ? ib : 0];
      b = take ? p.t : b;
      bc = take ? p.choice : bc;
      ib += take ? 1 : 0;
    }
    if (won) {
      out.insert(out.end(), best.begin() + static_cast<std::ptrdiff_t>(copied),
                 best.begin() + static_cast<std::ptrdiff_t>(lo));
      out.insert(out.end(), emitted, emitted + np);
      copied = ib;
      improved = true;
    }
    if (done) break;
  }
  if (!improved) return false;
  out.insert(out.end(), best.begin() + static_cast<std::ptrdiff_t>(copied), best.end());
  s.work += static_cast<double>(out.size()) / 8;
  return true;
}

// Keeps, of points within a relative `epsilon` of memory of the next point kept, only that one
// (pessimistic: its memory stays, the dropped points' budgets get its schedule, never below
// exact) or its time at the first dropped point's memory (optimistic: never above exact). The
// first and last points always stay.
constexpr void thin(std::vector<frontier_point>& f, double epsilon, thinning side) {
  if (f.size() <= 2) return;
  std::size_t out = 1;
  std::size_t k = 1;
  while (k + 1 < f.size()) {
    // Points k .. e-1 go when f[e] (the next kept) is within epsilon of f[k]'s memory.
    const auto limit = static_cast<double>(f[k].m) * (1 + epsilon);
    std::size_t e = k + 1;
    while (e + 1 < f.size() && static_cast<double>(f[e + 1].m) <= limit) ++e;
    if (static_cast<double>(f[e].m) > limit) {  // nothing within epsilon: k stays
      f[out++] = f[k++];
      continue;
    }
    frontier_point kept = f[e];
    if (side == thinning::optimistic) kept.m = f[k].m;
    f[out++] = kept;
    k = e + 1;
  }
  if (k < f.size()) f[out++] = f[k];
  f.resize(out);
}

}  // namespace frontier

// The frontier of interval (i, l) from those of shorter intervals (`t`, filled up to l - i - 1),
// up to memory `top` (the cap of its class: `frontier::plan::cap`).
constexpr void frontier_cell(const model& md, const interval_bounds& bounds, frontier_table& t,
                             std::int32_t i, std::int32_t l, size_type top,
                             const frontier_options& o, frontier::scratch& s,
                             std::vector<frontier_step>& result,
                             std::vector<std::int32_t>& result_choices) {
  auto at = [](std::int32_t k) { return static_cast<std::size_t>(k); };
  result.clear();
  result_choices.clear();
  if (i == md.L || i == l) {
    const size_type m = i == md.L ? md.x[at(md.L)] + md.bt[at(md.L)] : tape_ops_memory(md, i, l);
    if (m <= top) {
      result.push_back({m, i == md.L ? md.bw[at(md.L)] : md.fw[at(i)] + md.bw[at(i)]});
      result_choices.push_back(0);
    }
    return;
  }
  const size_type tape_ops = tape_ops_memory(md, i, l);
  const size_type mmin = necessary_memory(md, i, l);
  s.best.clear();
  if (o.branches == dp_branches::tape_and_checkpoint) {
    const std::vector<frontier_step>& rest = t.of(i + 1, l);
    if (!rest.empty())
      frontier::append_shifted(s.best, rest, md.xb[at(i + 1)], md.fw[at(i)] + md.bw[at(i)],
                               std::max(tape_ops, mmin), 0, top);
  }
  double forward = 0;
  size_type forwards = 0;  // checkpoint_forward_table's forwards(i, j)
  for (std::int32_t j = i + 1; j <= l; ++j) {
    forward += md.fw[at(j - 1)];
    forwards = j == i + 1 ? md.x[at(i + 1)] + md.ft[at(i)]
                          : std::max(forwards, md.x[at(j - 1)] + md.x[at(j)] + md.ft[at(j - 1)]);
    const std::vector<frontier_step>& R = t.of(j, l);
    const std::vector<frontier_step>& Lf = t.of(i, j - 1);
    if (!std::is_constant_evaluated() && j < l) {
      // The next branch's frontiers lie far apart in the table: start loading the points its
      // merge reads first (both ends of each) while this one merges.
      const std::vector<frontier_step>& Rn = t.of(j + 1, l);
      const std::vector<frontier_step>& Ln = t.of(i, j);
      if (!Rn.empty() && !Ln.empty()) {
        __builtin_prefetch(Rn.data());
        __builtin_prefetch(&Rn.back());
        __builtin_prefetch(Ln.data());
        __builtin_prefetch(&Ln.back());
      }
    }
    if (R.empty() || Lf.empty()) continue;
    // The branch's floor: mmin, and its own forwards (docs/recording-overhead.md).
    const size_type floor = std::max(mmin, md.x[at(l + 1)] + forwards);
    if (frontier::merge_branch(s, R, md.x[at(j)], Lf, forward, floor, j - i, top))
      std::swap(s.best, s.next);
  }
  if (!md.exact_sums && !s.best.empty()) {
    // The dense DP's rules where sums round (`optimal_cell`): values >= S, and S from store on.
    const std::size_t c = interval_index(md.L, i, l);
    std::size_t out = 0;
    for (const frontier_point& p : s.best) {
      if (bounds.store[c] != unreachable && p.m >= bounds.store[c]) break;
      const double v = std::max(bounds.S[c], p.t);
      if (out > 0 && !(v < s.best[out - 1].t)) continue;
      s.best[out++] = {p.m, v, p.choice};
    }
    s.best.resize(out);
    if (bounds.store[c] != unreachable && (out == 0 || bounds.S[c] < s.best[out - 1].t))
      s.best.push_back({bounds.store[c], bounds.S[c], 0});
  }
  if (o.epsilon > 0 && o.side != thinning::none) frontier::thin(s.best, o.epsilon, o.side);
  // (push_back, not resize: clang 14 refuses libstdc++'s resize of ints in constant evaluation)
  result.reserve(s.best.size());
  result_choices.reserve(s.best.size());
  for (const frontier_point& p : s.best) {
    result.push_back({p.m, p.t});
    result_choices.push_back(p.choice);
  }
}

namespace frontier {

// The order of the work: per diagonal, the first interval of each class (the one computed), and
// what the diagonals done cost, to stop at the limits.
struct plan {
  std::vector<std::vector<std::int32_t>> todo;  // [d]: the i of the intervals (i, i + d) computed
  std::vector<double> work, points;             // [d], once done
  std::vector<size_type> cap;  // [class]: the most of its intervals' `interval_cap`s

  // After diagonal d: the totals done and projected, and whether they are within the limits.
  // Per interval, the work and the points of diagonal d' > d are projected as those of d times
  // (d' / d)^p, p fitted between d / 2 and d (from 0 to 4): frontiers grow with the interval.
  constexpr bool within(frontier_table& t, std::int32_t d, const frontier_options& o) const {
    t.diagonals_done = d;
    t.work = 0;
    t.points_done = 0;
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
  p.work.assign(n, 0);
  p.points.assign(n, 0);
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

// `frontier_dp` with `workers` threads: they take each diagonal's intervals from a counter; the
// last to arrive at the barrier checks the limits.
inline frontier_table threaded(const model& md, const interval_bounds& bounds,
                               const frontier_options& o, frontier_table t, plan& p,
                               unsigned workers) {
  const std::int32_t L = md.L;
  std::int32_t d = 0;
  bool go = true;
  std::atomic<std::size_t> next{0};
  std::vector<double> work(workers, 0);
  std::barrier sync(static_cast<std::ptrdiff_t>(workers), [&]() noexcept {
    double w = 0;
    for (double& x : work) w += std::exchange(x, 0);
    double points = 0;
    for (const std::int32_t i : p.todo[static_cast<std::size_t>(d)])
      points += static_cast<double>(t.of(i, i + d).size());
    p.work[static_cast<std::size_t>(d)] = w;
    p.points[static_cast<std::size_t>(d)] = points;
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

}  // namespace frontier

// Every interval's frontier. `bounds` are `make_interval_bounds` of the model (only the store
// and S of chains whose sums are not exact are read). Stops early at the limits of `o`.
constexpr frontier_table frontier_dp(const model& md, const interval_bounds& bounds,
                                     const frontier_options& o = {}) {
  frontier_table t;
  t.L = md.L;
  std::int32_t count = 0;
  t.kind = frontier::interval_classes(md, count);
  t.frontiers.resize(static_cast<std::size_t>(count));
  t.choices.resize(static_cast<std::size_t>(count));
  // Where sums round, the dense DP's rules put S at store in every interval with a point anywhere,
  // which a capped frontier cannot tell: those chains get the whole frontiers.
  t.cap = md.exact_sums ? o.cap : unreachable;
  frontier::plan p = frontier::make_plan(t, md);
  // The least work: every interval computed tries each split point.
  double least = 0;
  for (std::size_t d = 0; d < p.todo.size(); ++d)
    least += static_cast<double>(p.todo[d].size()) * static_cast<double>(d + 1);
  t.peak_projected_work = least;
  if (o.stop_on_projection && least > o.max_work) {  // (a probe runs what it can)
    t.complete = false;
    t.projected_work = least;
    return t;
  }
  unsigned workers = 1;
  if (!std::is_constant_evaluated()) workers = std::max(1U, o.threads);
  if (workers > 1 && md.L > 0) return frontier::threaded(md, bounds, o, std::move(t), p, workers);
  frontier::scratch s;
  for (std::int32_t d = 0; d <= md.L; ++d) {
    double points = 0;
    for (const std::int32_t i : p.todo[static_cast<std::size_t>(d)]) {
      const auto k = static_cast<std::size_t>(t.kind[interval_index(md.L, i, i + d)]);
      frontier_cell(md, bounds, t, i, i + d, p.cap[k], o, s, t.frontiers[k], t.choices[k]);
      points += static_cast<double>(t.frontiers[k].size());
    }
    p.work[static_cast<std::size_t>(d)] = std::exchange(s.work, 0);
    p.points[static_cast<std::size_t>(d)] = points;
    if (!p.within(t, d, o)) break;
  }
  return t;
}

// The schedule of (i, l) at memory m (finite there) from a frontier table.
constexpr std::vector<op> frontier_ops(const model& md, const frontier_table& t, std::int32_t i,
                                       std::int32_t l, size_type m) {
  return persistent_ops(md, i, l, m, [&](std::int32_t ci, std::int32_t cl, size_type cm) {
    const frontier_step* p = t.at(ci, cl, cm);
    if (p == nullptr)
      throw std::logic_error("remat internal error: a frontier's schedule reads an infeasible "
                             "interval");
    const std::int32_t choice = t.choice(ci, cl, p);
    return choice == 0 ? 0 : ci + choice;
  });
}

}  // namespace remat::detail
