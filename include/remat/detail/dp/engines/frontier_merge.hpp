// One interval's frontier from those of shorter intervals: every branch of the recurrence merged
// into the lower envelope so far, only over the memories where it can win.
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/dp/branches.hpp>
#include <remat/detail/dp/engines/frontier_table.hpp>
#include <remat/detail/dp/intervals.hpp>
#include <remat/detail/dp/model.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

namespace remat::detail {

namespace frontier {

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

// The index of the first point of `f` above memory m.
template <class Points>
constexpr std::size_t first_above(const Points& f, size_type m) {
  return static_cast<std::size_t>(
      std::upper_bound(f.begin(), f.end(), m, [](size_type v, const auto& p) { return v < p.m; }) -
      f.begin());
}

// One branch merged into the envelope `best` (`merge_branch`): its parts, and where the walk
// stands in each of R, Lf and best.
struct branch_walk {
  const std::vector<frontier_point>& best;
  const std::vector<frontier_step>& R;
  const std::vector<frontier_step>& Lf;
  size_type shift;
  double forward;
  std::int32_t j;
  size_type stop;  // the walk ends at a memory >= stop
  double least;    // the branch's value from its top
  std::size_t nb = best.size();
  std::size_t nr = R.size();
  std::size_t nl = Lf.size();
  // ib: the first point of best at or above m (below it: settled); ir, il: a point of R, Lf at or
  // below m, in the block of the last one (the walk by blocks may leave them behind).
  std::size_t ib = 0;
  std::size_t ir = 0;
  std::size_t il = 0;
  size_type m = 0;

  static constexpr size_type none = unreachable;
  constexpr size_type mem_r(std::size_t k) const { return k < nr ? R[k].m + shift : none; }
  constexpr size_type mem_l(std::size_t k) const { return k < nl ? Lf[k].m : none; }
  constexpr size_type mem_b(std::size_t k) const { return k < nb ? best[k].m : none; }
};

// What a walk point by point left: best's points from `lo` on were replaced by `np` points of
// `emitted` when the branch `won` somewhere; `done` when nothing is left to win past it.
struct merged_points {
  std::size_t lo = 0;
  std::size_t np = 0;
  bool won = false;
  bool done = false;
};

// The walk point by point from w.m (nothing below it changed since best's point before it), up
// to where the branch stops winning at or past `e` (the end of the blocks it may win in), without
// branches on the data: which of the three moves, whether the branch wins, whether a point is
// emitted.
constexpr merged_points merge_points(branch_walk& w, size_type e, frontier_point* emitted,
                                     double& work) {
  constexpr size_type none = branch_walk::none;
  const std::vector<frontier_point>& best = w.best;
  const std::vector<frontier_step>& R = w.R;
  const std::vector<frontier_step>& Lf = w.Lf;
  const std::size_t nb = w.nb;
  const std::size_t nr = w.nr;
  const std::size_t nl = w.nl;
  // In locals, kept in registers through the loop (the work counter too: the same additions).
  const size_type shift = w.shift;
  const size_type stop = w.stop;
  const double forward = w.forward;
  const double least = w.least;
  const std::int32_t j = w.j;
  std::size_t ir = w.ir;
  std::size_t il = w.il;
  std::size_t ib = w.ib;
  size_type m = w.m;
  while (ir + 1 < nr && R[ir + 1].m + shift <= m) ++ir;
  while (il + 1 < nl && Lf[il + 1].m <= m) ++il;
  while (ib < nb && best[ib].m < m) ++ib;
  merged_points r;
  r.lo = ib;
  double last = r.lo > 0 ? best[r.lo - 1].t : infinite_time;  // the envelope's at m - 1
  double b = last;
  std::int32_t bc = r.lo > 0 ? best[r.lo - 1].choice : 0;
  if (ib < nb && best[ib].m == m) {
    b = best[ib].t;
    bc = best[ib].choice;
    ++ib;
  }
  const frontier_point none_point{};
  const frontier_point* const bp = nb > 0 ? best.data() : &none_point;
  std::size_t np = 0;
  bool won = false;
  double steps = work;
  while (true) {
    const double v = checkpoint_value(forward, R[ir].t, Lf[il].t);
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
    steps += 1;
    if (mn >= stop || (!wins && b <= least)) {  // nothing left to win
      r.done = true;
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
  r.np = np;
  r.won = won;
  work = steps;
  w.ir = ir;
  w.il = il;
  w.ib = ib;
  w.m = m;
  return r;
}

// best = min(best, branch j), branch(m) = `checkpoint_value`(forward, R(m - shift), Lf(m)) for
// from <= m <= top (every engine's order of the sums); ties keep `best`'s point. The new envelope
// is built in `s.next`; false (and `s.next` meaningless) when the branch wins nowhere. `best` has
// no point above `top`; R and Lf hold every point up to the memories the branch reads them at
// (top - shift and top), so their last points still bound it from below.
//
// Most of a branch loses everywhere, so the walk goes by blocks of `merge_block` points of each
// of R, Lf and best: over the memories where none of the three leaves its block, the branch is at
// least its value at the blocks' last points (both non-increasing) and the envelope at most its
// value where the segment starts; where the former is not below the latter, the branch cannot win
// and the whole segment is skipped. Elsewhere the three are merged point by point
// (`merge_points`) until the branch stops winning past the segment; only the envelope's points
// over memories where the branch won somewhere are rebuilt, the rest is copied as it stands.
constexpr bool merge_branch(scratch& s, const std::vector<frontier_step>& R, size_type shift,
                            const std::vector<frontier_step>& Lf, double forward, size_type from,
                            std::int32_t j, size_type top) {
  constexpr std::size_t K = merge_block;
  const std::vector<frontier_point>& best = s.best;
  std::vector<frontier_point>& out = s.next;
  const size_type start = std::max({R.front().m + shift, Lf.front().m, from});
  if (start > top) return false;
  branch_walk w{best,
                R,
                Lf,
                shift,
                forward,
                j,
                top == unreachable ? unreachable : top + 1,
                checkpoint_value(forward, R.back().t, Lf.back().t)};
  const std::size_t nb = w.nb;
  const std::size_t nr = w.nr;
  const std::size_t nl = w.nl;
  w.ib = first_above(best, start);
  s.work += 1;
  if (w.ib > 0 && best[w.ib - 1].t <= w.least) return false;
  if (w.ib > 0 && best[w.ib - 1].m == start) --w.ib;
  w.ir = first_above(R, start - shift) - 1;
  w.il = first_above(Lf, start) - 1;
  std::size_t copied = 0;  // best's points before it are in `out` (once improved)
  bool improved = false;
  // A walk point by point emits at most a point per point of the three.
  if (s.patch.size() < nb + nr + nl + 1) s.patch.resize(nb + nr + nl + 1);
  frontier_point* const emitted = s.patch.data();
  out.clear();
  w.m = start;
  while (true) {
    const std::size_t hr = std::min(nr, (w.ir / K + 1) * K);
    const std::size_t hl = std::min(nl, (w.il / K + 1) * K);
    const std::size_t hb = std::min(nb, (w.ib / K + 1) * K);
    const double ub = w.ib > 0 ? best[w.ib - 1].t : infinite_time;  // the envelope's from m - 1 on
    if (ub <= w.least) break;  // the branch cannot win from m on
    const size_type e = std::min({w.mem_r(hr), w.mem_l(hl), w.mem_b(hb)});
    s.work += 1;
    if (!(checkpoint_value(forward, R[hr - 1].t, Lf[hl - 1].t) < ub)) {  // no win below e
      if (e >= w.stop) break;
      w.m = e;
      if (w.mem_r(hr) == e) w.ir = hr;
      if (w.mem_l(hl) == e) w.il = hl;
      if (w.mem_b(hb) == e) w.ib = hb;
      continue;
    }
    const merged_points r = merge_points(w, e, emitted, s.work);
    if (r.won) {
      out.insert(out.end(), best.begin() + static_cast<std::ptrdiff_t>(copied),
                 best.begin() + static_cast<std::ptrdiff_t>(r.lo));
      out.insert(out.end(), emitted, emitted + r.np);
      copied = w.ib;
      improved = true;
    }
    if (r.done) break;
  }
  if (!improved) return false;
  out.insert(out.end(), best.begin() + static_cast<std::ptrdiff_t>(copied), best.end());
  s.work += static_cast<double>(out.size()) / 8;
  return true;
}

// The frontier of the loss cell (L, L): one point, where it fits under `top`.
constexpr void loss_cell(const model& md, size_type top, std::vector<frontier_step>& result,
                         std::vector<std::int32_t>& result_choices) {
  const size_type m = loss_need(md);
  if (m <= top) {
    result.push_back({m, md.loss_time});
    result_choices.push_back(0);
  }
}

// The frontier of a base case (i, i): the least fw_o + bw_o over the options that fit, by memory:
// the options' points in order of their tape ops (then of position), each kept where it is below
// the last.
constexpr void diagonal_cell(const model& md, std::int32_t i, size_type top, scratch& s,
                             std::vector<frontier_step>& result,
                             std::vector<std::int32_t>& result_choices) {
  const std::span<const tape_option> options = md.options(i);
  s.best.clear();
  for (std::size_t p = 0; p < options.size(); ++p) {
    const tape_branch base = tape_branch_of(md, i, i, options[p]);
    if (base.own <= top) s.best.push_back({base.own, base.time, tape_choice(p)});
  }
  std::sort(s.best.begin(), s.best.end(), [](const frontier_point& a, const frontier_point& b) {
    if (a.m != b.m) return a.m < b.m;
    if (a.t != b.t) return a.t < b.t;
    return option_of_choice(a.choice) < option_of_choice(b.choice);
  });
  for (const frontier_point& p : s.best)
    if (result.empty() || p.t < result.back().t) {
      result.push_back({p.m, p.t});
      result_choices.push_back(p.choice);
    }
}

// The tape branches of (i, l), one per option, into `s.best` (empty before): their values from
// the rest's frontier shifted by the tape, from their own ops' memory and `mmin` on.
constexpr void merge_tape_branches(const model& md, const frontier_table& t, std::int32_t i,
                                   std::int32_t l, size_type mmin, size_type top, scratch& s) {
  const std::vector<frontier_step>& rest = t.of(i + 1, l);  // every option's `tape_branch::rest`
  if (rest.empty()) return;
  // The first option's branch is the envelope so far; the others merge into it as a branch
  // (time + rest(m - held)) + 0: the same sum, ties to the earlier option.
  const std::span<const tape_option> options = md.options(i);
  const std::vector<frontier_step> zero{{0, 0.0}};
  for (std::size_t p = 0; p < options.size(); ++p) {
    const tape_branch b = tape_branch_of(md, i, l, options[p]);
    const size_type from = std::max(b.own, mmin);
    if (p == 0) {
      append_shifted(s.best, rest, b.held, b.time, from, 0, top);
    } else if (s.best.empty()) {
      append_shifted(s.best, rest, b.held, b.time, from, tape_choice(p), top);
    } else if (merge_branch(s, rest, b.held, zero, b.time, from, tape_choice(p), top)) {
      std::swap(s.best, s.next);
    }
  }
}

// The checkpoint branches of (i, l), j = i + 1 .. l, merged into `s.best` in order.
constexpr void merge_checkpoint_branches(const model& md, const frontier_table& t, std::int32_t i,
                                         std::int32_t l, size_type mmin, size_type top,
                                         scratch& s) {
  for (checkpoint_walk w(md, i, l); !w.done(); w.next()) {
    const branch_part right = w->right();
    const branch_part left = w->left();
    const std::vector<frontier_step>& R = t.of(right.i, right.l);
    const std::vector<frontier_step>& Lf = t.of(left.i, left.l);
    if (!std::is_constant_evaluated() && w->j < l) {
      // The next branch's frontiers lie far apart in the table: start loading the points its
      // merge reads first (both ends of each) while this one merges.
      const std::vector<frontier_step>& Rn = t.of(right.i + 1, right.l);
      const std::vector<frontier_step>& Ln = t.of(left.i, left.l + 1);
      if (!Rn.empty() && !Ln.empty()) {
        __builtin_prefetch(Rn.data());
        __builtin_prefetch(&Rn.back());
        __builtin_prefetch(Ln.data());
        __builtin_prefetch(&Ln.back());
      }
    }
    if (R.empty() || Lf.empty()) continue;
    // The branch's floor: mmin, and its own forwards.
    const size_type floor = std::max(mmin, w->own);
    if (merge_branch(s, R, right.held, Lf, w->forward, floor, w->j - i, top))
      std::swap(s.best, s.next);
  }
}

// The dense DP's rules where sums round (`reference_cell`), on the envelope `s.best` of cell c:
// values >= S, and S from store on.
constexpr void clamp_as_dense(const model& md, const interval_bounds& bounds, std::int32_t i,
                              std::size_t c, scratch& s) {
  std::size_t out = 0;
  for (const frontier_point& p : s.best) {
    if (bounds.store[c] != unreachable && p.m >= bounds.store[c]) break;
    const double v = std::max(bounds.S[c], p.t);
    if (out > 0 && !(v < s.best[out - 1].t)) continue;
    s.best[out++] = {p.m, v, p.choice};
  }
  s.best.resize(out);
  if (bounds.store[c] != unreachable && (out == 0 || bounds.S[c] < s.best[out - 1].t))
    s.best.push_back(
        {bounds.store[c], bounds.S[c], tape_choice(md.fastest[static_cast<std::size_t>(i)])});
}

}  // namespace frontier

// The frontier of interval (i, l) from those of shorter intervals (`t`, filled up to l - i - 1),
// up to memory `top` (the cap of its class: `frontier::plan::cap`).
constexpr void frontier_cell(const model& md, const interval_bounds& bounds, frontier_table& t,
                             std::int32_t i, std::int32_t l, size_type top,
                             const frontier_options& o, frontier::scratch& s,
                             std::vector<frontier_step>& result,
                             std::vector<std::int32_t>& result_choices) {
  result.clear();
  result_choices.clear();
  if (i == md.L) return frontier::loss_cell(md, top, result, result_choices);
  if (i == l) return frontier::diagonal_cell(md, i, top, s, result, result_choices);
  const size_type mmin = necessary_memory(md, i, l);
  s.best.clear();
  if (o.branches == dp_branches::tape_and_checkpoint)
    frontier::merge_tape_branches(md, t, i, l, mmin, top, s);
  frontier::merge_checkpoint_branches(md, t, i, l, mmin, top, s);
  if (!md.exact_sums && !s.best.empty())
    frontier::clamp_as_dense(md, bounds, i, interval_index(md.L, i, l), s);
  // (push_back, not resize: clang 14 refuses libstdc++'s resize of ints in constant evaluation)
  result.reserve(s.best.size());
  result_choices.reserve(s.best.size());
  for (const frontier_point& p : s.best) {
    result.push_back({p.m, p.t});
    result_choices.push_back(p.choice);
  }
}

}  // namespace remat::detail
