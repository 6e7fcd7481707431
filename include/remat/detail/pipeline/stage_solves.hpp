// The solves a pipeline split reads: one per (first stage, end, micro-batches in flight), each
// on the stage's own chain, run once and shared by every split that has that stage.
#pragma once

#include <remat/chain.hpp>
#include <remat/solve.hpp>

#include <algorithm>
#include <cstddef>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace remat::detail {

// `remat::stage_chain` (pipeline.hpp).
inline chain cut_stage_chain(const chain& c, std::size_t first, std::size_t end) {
  if (!(first < end && end <= c.length()))
    throw std::invalid_argument("stage_chain: stages [" + std::to_string(first) + ", " +
                                std::to_string(end) + ") are not a non-empty run of the " +
                                std::to_string(c.length()) + " stages");
  chain out;
  const auto at = [](std::size_t k) { return static_cast<std::ptrdiff_t>(k); };
  out.stages.assign(c.stages.begin() + at(first), c.stages.begin() + at(end));
  out.input_size = first == 0 ? c.input_size : c.stages[first - 1].output_size;
  if (end == c.length()) {
    out.loss_time = c.loss_time;
    out.loss_overhead = c.loss_overhead;
  }
  out.transfer = c.transfer;
  return out;
}

// The least makespan any schedule of stages [first, end) of `c` can have: each stage runs one
// recording forward and one backward, of its fastest option, and the last rank runs the loss.
class makespan_floor {
 public:
  explicit makespan_floor(const chain& c) : prefix_(c.length() + 1, 0), loss_(c.loss_time) {
    for (std::size_t k = 0; k < c.length(); ++k) {
      double least = 0;
      for (std::size_t o = 0; o < option_count(c.stages[k]); ++o) {
        const stage_option opt = option_at(c.stages[k], o);
        const double t = opt.forward_time + opt.backward_time;
        least = o == 0 ? t : std::min(least, t);
      }
      prefix_[k + 1] = prefix_[k] + least;
    }
  }
  [[nodiscard]] double operator()(std::size_t first, std::size_t end) const {
    return prefix_[end] - prefix_[first] + (end + 1 == prefix_.size() ? loss_ : 0.0);
  }

 private:
  std::vector<double> prefix_;
  double loss_;
};

// Solves of stage runs of one chain at one budget, memoized by (first, end, K).
class stage_solves {
 public:
  stage_solves(const chain& c, size_type budget, const solve_options& options)
      : chain_(c), budget_(budget), options_(options) {}

  const solve_result& at(std::size_t first, std::size_t end, std::size_t in_flight) {
    const auto key = std::tuple{first, end, in_flight};
    if (const auto it = cache_.find(key); it != cache_.end()) return it->second;
    solve_options o = options_;
    o.in_flight = in_flight;
    try {
      return cache_.emplace(key, solve(cut_stage_chain(chain_, first, end), budget_, o))
          .first->second;
    } catch (const solver_error& e) {
      throw_solver_error("pipeline stage of stages [" + std::to_string(first) + ", " +
                         std::to_string(end) + ") with " + std::to_string(in_flight) +
                         " in flight: " + e.what());
    }
  }
  [[nodiscard]] std::size_t count() const noexcept { return cache_.size(); }
  [[nodiscard]] const chain& whole() const noexcept { return chain_; }
  [[nodiscard]] size_type budget() const noexcept { return budget_; }

 private:
  const chain& chain_;
  size_type budget_;
  solve_options options_;
  std::map<std::tuple<std::size_t, std::size_t, std::size_t>, solve_result> cache_;
};

}  // namespace remat::detail
