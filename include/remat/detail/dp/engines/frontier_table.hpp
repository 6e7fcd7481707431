// The frontier DP's table: for every interval, the step function m -> OPT(i, l, m) as its
// breakpoints (m, t), with the choice that reaches each; intervals that pose the same problem
// share one frontier (`frontier::interval_classes`).
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/dp/intervals.hpp>
#include <remat/detail/dp/model.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <limits>
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

struct frontier_options {
  dp_branches branches = dp_branches::tape_and_checkpoint;
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
  dp_branches branches = dp_branches::tape_and_checkpoint;
  // False when the DP stopped at its limits (`frontier_options::max_work`, `max_points`): only
  // the diagonals up to `diagonals_done` are filled.
  bool complete = true;
  std::int32_t diagonals_done = -1;
  double work = 0;  // done
  double points_done = 0;
  double projected_work = 0;  // the whole DP's, projected from the diagonals done (or done)
  double projected_points = 0;
  // The most that the limits were checked against (with `stop_on_projection`: the least work,
  // then each diagonal's projection): a DP with limits below these stops before it completes
  // (`remat::estimate_solve` tells from them whether the solve will be exact).
  double peak_projected_work = 0;
  double peak_projected_points = 0;
  // `frontier_options::cap`: the root's values are those of the whole DP at m <= cap only (each
  // interval's up to its `frontier::interval_cap`), nothing is known above.
  size_type cap = unreachable;
  std::vector<double> diagonal_work, diagonal_points;  // [d], once done
  std::vector<std::int32_t> kind;                      // [interval] -> index into `frontiers`
  std::vector<std::vector<frontier_step>> frontiers;   // one per distinct interval
  std::vector<std::vector<std::int32_t>> choices;      // [k][p]: the choice of frontiers[k][p]

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

// A stage's token: its sizes, times and options (the first's figures in the order of a stage
// without options, then the others'); the loss's bw[L], bt[L] in the first's place.
struct stage_token {
  size_type x0, x1, xb1, ft, fa, bt;
  double fw, bw;
  bool loss;
  std::span<const tape_option> more;  // the options past the first
  constexpr bool operator<(const stage_token& o) const {
    if (loss != o.loss) return loss < o.loss;
    if (x0 != o.x0) return x0 < o.x0;
    if (x1 != o.x1) return x1 < o.x1;
    if (xb1 != o.xb1) return xb1 < o.xb1;
    if (ft != o.ft) return ft < o.ft;
    if (fa != o.fa) return fa < o.fa;
    if (bt != o.bt) return bt < o.bt;
    if (fw != o.fw) return fw < o.fw;
    if (bw != o.bw) return bw < o.bw;
    if (more.size() != o.more.size()) return more.size() < o.more.size();
    for (std::size_t k = 0; k < more.size(); ++k) {
      const tape_option& a = more[k];
      const tape_option& b = o.more[k];
      if (a.xb != b.xb) return a.xb < b.xb;
      if (a.fa != b.fa) return a.fa < b.fa;
      if (a.bt != b.bt) return a.bt < b.bt;
      if (a.fw != b.fw) return a.fw < b.fw;
      if (a.bw != b.bw) return a.bw < b.bw;
    }
    return false;
  }
};

// Every stage's token as a number (the loss's at L), equal where the tokens are; `count`: how
// many numbers.
constexpr std::vector<std::int32_t> stage_tokens(const model& md, std::int32_t& count) {
  const auto n = static_cast<std::size_t>(md.L) + 1;
  std::vector<std::pair<stage_token, std::int32_t>> tokens;
  tokens.reserve(n);
  for (std::size_t k = 0; k < n; ++k) {
    const bool loss = k == n - 1;
    if (loss) {
      tokens.push_back({{md.x[k], 0, 0, md.ft[k], 0, md.loss_overhead, md.fw[k], md.loss_time,
                         true, {}},
                        static_cast<std::int32_t>(k)});
      continue;
    }
    const std::span<const tape_option> options = md.options(static_cast<std::int32_t>(k));
    const tape_option& o = options[0];
    tokens.push_back(
        {{md.x[k], md.x[k + 1], o.xb, md.ft[k], o.fa, o.bt, md.fw[k], o.bw, false,
          options.subspan(1)},
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
  count = next + 1;
  return tok;
}

// Gives every interval the number of its class: intervals with the same stages (sizes and times,
// docs/model.md's arrays from i to l and x[l+1]) get the same number, and no other does. A stage's
// token is its tuple (the loss's has no forward, so no interval ending at L matches another);
// an interval's class is that of (its class without stage l, token of l), numbered by sorting.
constexpr std::vector<std::int32_t> interval_classes(const model& md, std::int32_t& count) {
  const std::int32_t L = md.L;
  const auto n = static_cast<std::size_t>(L) + 1;
  std::int32_t next = 0;
  const std::vector<std::int32_t> tok = stage_tokens(md, next);
  std::vector<std::int32_t> kind;
  kind.assign(interval_count(L), 0);
  for (std::int32_t i = 0; i <= L; ++i)
    kind[interval_index(L, i, i)] = tok[static_cast<std::size_t>(i)];
  std::vector<std::pair<std::pair<std::int32_t, std::int32_t>, std::int32_t>> keys;
  keys.reserve(n);
  for (std::int32_t d = 1; d <= L; ++d) {
    keys.clear();
    for (std::int32_t i = 0; i + d <= L; ++i)
      keys.push_back(
          {{kind[interval_index(L, i, i + d - 1)], tok[static_cast<std::size_t>(i + d)]}, i});
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
// right part at i (m - x[i]): an interval starting at i > 0 is read at cap - min(x[i], xb_o[i]) at
// most. The DP itself reads every interval within these caps (from (i, l) at m <= its cap: the
// left part at m, the others at m - xb[i + 1] or m - x[j], below their caps), and so does the
// read-back of a schedule.
constexpr size_type interval_cap(const model& md, size_type cap, std::int32_t i) noexcept {
  if (cap == unreachable || i == 0) return cap;
  const auto at = static_cast<std::size_t>(i);
  size_type least = md.x[at];
  for (const tape_option& o : md.options(i - 1)) least = std::min(least, o.xb);
  return cap < least ? -1 : cap - least;
}

}  // namespace frontier

}  // namespace remat::detail
