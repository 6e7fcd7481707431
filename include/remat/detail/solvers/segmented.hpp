// What the knob-based baselines (sequential, chen-sqrt, chen-greedy, revolve) share: the
// segmented schedule, and the search that replays every candidate on the chain's byte sizes and
// keeps the one a user tuning the knob would keep.
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/verify/finish.hpp>
#include <remat/schedule.hpp>
#include <remat/simulate.hpp>
#include <remat/solver_options.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace remat::detail {

// The schedule of a chain of `length` stages cut into runs, run r covering stages
// starts[r] .. starts[r+1]-1 (the last run ends at the chain's end); starts[0] must be 0 and the
// starts increasing. Every run but the last is run forward without tapes keeping only its input
// (F_ck at its first stage, F_none at the others); the last run records its tapes (F_all), then
// comes the loss and the last run's backward. Each earlier run, latest first, is then recomputed
// from its kept input with tapes (F_all) and backpropagated (B, last stage first).
constexpr std::vector<op> segmented_ops(std::int32_t length,
                                        const std::vector<std::int32_t>& starts) {
  std::vector<op> ops;
  const std::size_t runs = starts.size();
  auto end_of = [&](std::size_t r) { return r + 1 < runs ? starts[r + 1] : length; };
  for (std::size_t r = 0; r + 1 < runs; ++r) {
    ops.push_back(f_ck(starts[r]));
    for (std::int32_t k = starts[r] + 1; k < end_of(r); ++k) ops.push_back(f_none(k));
  }
  for (std::int32_t k = starts[runs - 1]; k < length; ++k) ops.push_back(f_all(k));
  ops.push_back(loss_op(length));
  for (std::size_t r = runs; r-- > 0;) {
    if (r + 1 < runs)
      for (std::int32_t k = starts[r]; k < end_of(r); ++k) ops.push_back(f_all(k));
    for (std::int32_t k = end_of(r); k-- > starts[r];) ops.push_back(backward(k));
  }
  return ops;
}

// Which candidate a knob search keeps.
enum class keep_rule : std::uint8_t {
  fastest,    // the least makespan among those that fit; ties to the lower peak, then the first
  first_fit,  // the first offered that fits (the caller offers its preferred knob values first)
};

// Replays every candidate schedule on the byte-sized chain. Keeps one by `keep_rule`, and the
// least peak of all candidates: the smallest budget at which the search finds a schedule.
class knob_search {
 public:
  constexpr knob_search(const chain& c, size_type budget, solver which, keep_rule rule)
      : c_(c), budget_(budget), which_(which), rule_(rule) {
    if (budget < 0) throw_solver_error("the budget must be >= 0");
  }

  constexpr void offer(std::vector<op> ops) {
    const replay_result r = replay(c_, ops);
    if (!r.valid()) throw_internal_error(name(which_), "is invalid (" + describe(r, ops) + ")");
    if (r.peak_memory < min_peak_) min_peak_ = r.peak_memory;
    if (r.peak_memory > budget_) return;
    const bool better =
        !found_ || (rule_ == keep_rule::fastest &&
                    (r.makespan < makespan_ || (r.makespan == makespan_ && r.peak_memory < peak_)));
    if (!better) return;
    found_ = true;
    ops_ = std::move(ops);
    makespan_ = r.makespan;
    peak_ = r.peak_memory;
  }

  // The kept schedule, replay-verified by `finish`, or an infeasible result.
  constexpr solve_result result() && {
    const size_type min_budget = min_peak_ == unset ? solve_result::no_budget : min_peak_;
    if (!found_) {
      solve_result out;
      out.budget = budget_;
      out.min_feasible_budget = min_budget;
      return out;
    }
    solve_result out = finish(c_, which_, budget_, std::move(ops_), makespan_);
    out.min_feasible_budget = min_budget;
    return out;
  }

 private:
  static constexpr size_type unset = std::numeric_limits<size_type>::max();
  const chain& c_;
  size_type budget_;
  solver which_;
  keep_rule rule_;
  bool found_ = false;
  std::vector<op> ops_;
  double makespan_ = 0;
  size_type peak_ = 0;
  size_type min_peak_ = unset;
};

}  // namespace remat::detail
