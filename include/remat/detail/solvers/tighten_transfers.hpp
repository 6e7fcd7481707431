// A local improvement of a schedule with transfers (docs/offload.md, "Tightening"): the spine
// DP's class makes a cell wait for its copy before the cell below starts and prefetches during
// the last op of the cell below only; where memory allows a copy to keep running, or a prefetch
// to start earlier, the schedule moved so is faster and outside that class. Every candidate is
// replayed by docs/offload.md's rules and kept only if it is valid, fits the budget and is
// strictly faster, so the result is never slower than the schedule given and never invalid.
#pragma once

#include <remat/chain.hpp>
#include <remat/schedule.hpp>
#include <remat/simulate.hpp>

#include <algorithm>
#include <cstddef>
#include <limits>
#include <span>
#include <utility>
#include <vector>

namespace remat::detail {

// How far one move may carry an op, in positions: a bound on the work (each candidate is one
// replay) that still reaches across a few stages' ops.
inline constexpr std::size_t tighten_window = 32;

// `ops` (valid within `budget`) made faster by moving transfer ops, greedily, until no move helps
// or `passes` rounds have run: each wait `W` is dropped, or else issued as late as helps; each
// prefetch `P` is issued as early as helps. Returns `ops` unchanged where nothing helps.
inline std::vector<op> tighten_transfers(const chain& c, size_type budget, std::vector<op> ops,
                                         int passes = 4) {
  constexpr double does_not_fit = std::numeric_limits<double>::infinity();
  double current = replay(c, ops).makespan;
  std::vector<op> candidate;
  // The makespan of `s` if it is valid within the budget, else `does_not_fit`.
  auto makespan_of = [&](const std::vector<op>& s) {
    const replay_result r = replay(c, std::span<const op>(s));
    return r.fits(budget) ? r.makespan : does_not_fit;
  };
  // Moves the op at `from` to position `to` (in the sequence without it) in `candidate`.
  auto moved = [&](std::size_t from, std::size_t to) {
    candidate = ops;
    const op o = candidate[from];
    candidate.erase(candidate.begin() + static_cast<std::ptrdiff_t>(from));
    candidate.insert(candidate.begin() + static_cast<std::ptrdiff_t>(to), o);
  };
  // The fastest position for the op at `i` among the next `tighten_window` ones later (or
  // earlier), scanning until a candidate no longer fits: `i` and `current` where none is faster.
  auto best_position = [&](std::size_t i, bool later) {
    std::pair<std::size_t, double> best{i, current};
    for (std::size_t k = 1; k <= tighten_window && (later ? i + k < ops.size() : k <= i); ++k) {
      const std::size_t to = later ? i + k : i - k;
      moved(i, to);
      const double t = makespan_of(candidate);
      if (t == does_not_fit) break;
      if (t < best.second) best = {to, t};
    }
    return best;
  };
  for (int pass = 0; pass < passes; ++pass) {
    bool improved = false;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const bool wait = ops[i].kind == op_kind::wait;
      if (!wait && ops[i].kind != op_kind::prefetch) continue;
      if (wait) {
        candidate = ops;
        candidate.erase(candidate.begin() + static_cast<std::ptrdiff_t>(i));
        if (const double t = makespan_of(candidate); t < current) {
          ops = std::move(candidate);
          current = t;
          improved = true;
          --i;  // the next op is at i now
          continue;
        }
      }
      // A wait later (the compute stream runs further before it waits), a prefetch earlier (the
      // copy starts with an earlier compute op).
      const auto [to, t] = best_position(i, wait);
      if (to != i) {
        moved(i, to);
        ops = std::move(candidate);
        current = t;
        improved = true;
      }
    }
    if (!improved) break;
  }
  return ops;
}

}  // namespace remat::detail
