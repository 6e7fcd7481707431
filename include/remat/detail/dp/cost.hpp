// What the DP engines will cost, estimated before they run: the dispatch weighs the engines by
// these estimates, and a solve estimated past the limits (`solve_options::max_estimated_seconds`,
// `max_table_bytes`) is refused at once with the estimate and what to change, instead of running
// for hours.
//
// Work is counted in (interval, split) pairs for the least-memory DP, in (interval, m, split)
// triples for the dense DP before its pruning (the sums behind docs/model.md's O(L^3) and
// O(L^3 M)), and in the frontier DP's own work units; the rates of detail/dp/tuning.hpp turn them
// into seconds.
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/dp/intervals.hpp>
#include <remat/detail/dp/platform.hpp>
#include <remat/detail/dp/tuning.hpp>
#include <remat/solver_options.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <thread>

namespace remat::detail {

// (interval, split) pairs of one least-memory DP: the sum over 0 <= i < l <= L of l - i.
constexpr double need_dp_pairs(std::int32_t L) noexcept {
  const auto n = static_cast<double>(L);
  return n * (n + 1) * (n + 2) / 6;
}

// Bytes of one least-memory DP run: a triangle of needs and a square copy
// (persistent_need_in_doubles), or the least_peak_dp's three triangles.
constexpr double need_dp_bytes(std::int32_t L) noexcept {
  const auto n = static_cast<double>(L) + 1;
  return 8 * (n * n + n * (n + 1));
}

// What a DP costs: seconds and the most bytes of its tables.
struct dp_cost {
  double seconds = 0;
  double bytes = 0;
};

// Whether a cost stays within `max_estimated_seconds` and `max_table_bytes`.
inline bool fits_limits(double seconds, double bytes, const solve_options& options) {
  const auto limit = static_cast<double>(options.max_table_bytes.value_or(default_table_limit()));
  return !(seconds > options.max_estimated_seconds) && !(bytes > limit);
}

// The least-memory DP's rate (pairs a second) on a chain whose sizes sum to `total`: the DP in
// doubles while the sum stays below 2^52 (need_in_doubles), the exact one otherwise.
constexpr double need_pairs_rate(double total) noexcept {
  return total < 4503599627370496.0 ? tuning.need_pairs_per_second
                                    : tuning.exact_need_pairs_per_second;
}

// The least-peak DP (min-memory's own schedule, its fallback): exact arithmetic, one run.
constexpr dp_cost least_peak_cost(std::int32_t L) noexcept {
  return {need_dp_pairs(L) / tuning.exact_need_pairs_per_second, need_dp_bytes(L)};
}

// The least-memory DPs of `slots_min_budget` with slots: three (one of them on the exact sizes),
// and one per step of its bisection over units up to the largest size.
constexpr double slots_need_dp_runs(std::uint64_t largest) noexcept {
  return 5 + static_cast<double>(std::bit_width(largest));
}

// The seconds of `runs` least-memory DPs of a chain (`need_pairs_rate` of its sizes' sum).
inline double need_dp_seconds(const chain& c, double runs) {
  double total = static_cast<double>(c.input_size) + static_cast<double>(c.loss_overhead);
  for (const stage& s : c.stages)
    total += static_cast<double>(s.output_size) + static_cast<double>(s.tape_size) +
             static_cast<double>(s.forward_overhead) + static_cast<double>(s.backward_overhead) +
             static_cast<double>(s.recording_overhead.value_or(0));
  for (const stage& s : c.stages)
    for (const stage_option& o : s.options)
      total += static_cast<double>(o.tape_size) + static_cast<double>(o.forward_overhead) +
               static_cast<double>(o.backward_overhead);
  return runs * need_dp_pairs(static_cast<std::int32_t>(c.length())) / need_pairs_rate(total);
}

// How many least-memory DPs a solve runs: one at the budget's unit and, with slots, those of
// `slots_min_budget` (`slots_need_dp_runs`).
inline double need_dp_runs(const chain& c, size_type slots) noexcept {
  if (slots == exact_units) return 1;
  size_type largest = std::max(c.input_size, c.loss_overhead);
  for (const stage& s : c.stages) {
    largest = std::max({largest, s.tape_size, s.forward_overhead, s.backward_overhead,
                        s.recording_overhead.value_or(0)});
    for (const stage_option& o : s.options)
      largest = std::max({largest, o.tape_size, o.forward_overhead, o.backward_overhead});
  }
  return slots_need_dp_runs(static_cast<std::uint64_t>(largest));
}

// The main DP's (interval, m, split) triples, m over each interval's stored range (from its need
// to its store, at most M).
inline double main_dp_triples(const interval_bounds& b, std::int32_t L, size_type M) {
  double triples = 0;
  for (std::int32_t i = 0; i < L; ++i)
    for (std::int32_t l = i + 1; l <= L; ++l) {
      const std::size_t c = interval_index(L, i, l);
      const size_type top = stored_top(b, c, M);
      if (top >= b.need[c]) triples += (static_cast<double>(top - b.need[c]) + 1) * (l - i);
    }
  return triples;
}

// The dense DP's rate for a chain of L stages, triples per second on one core: it grows with the
// chain, as its window answers more of the cells' values in O(1); without the tape branch the
// window gives only the split point j = i + 1 its values, and the rate levels off.
inline double main_triples_per_second(std::int32_t L, dp_branches branches) noexcept {
  const double growth = std::sqrt(std::max(1.0, static_cast<double>(L) / 100));
  return tuning.dense_triples_per_second *
         std::min(growth, branches == dp_branches::tape_and_checkpoint
                              ? tuning.dense_growth_cap
                              : tuning.dense_growth_cap_checkpoint_only);
}

// The seconds of `triples` of the dense DP, with `threads` threads on as many cores as there are.
inline double dense_dp_seconds(double triples, std::int32_t L, dp_branches branches,
                               unsigned threads) {
  const unsigned cores = std::max(1U, std::thread::hardware_concurrency());
  return triples / (main_triples_per_second(L, branches) * std::min(threads, cores));
}

// The dense DP's seconds on the bounds `b` up to M.
inline double main_dp_seconds(const interval_bounds& b, std::int32_t L, size_type M,
                              dp_branches branches, unsigned threads) {
  return dense_dp_seconds(main_dp_triples(b, L, M), L, branches, threads);
}

// The default's fallback past its exact engines' allowance: the 500-slot dense DP and then its
// bound's dense DP on `auto_bound_slots` memories, as a multiple of the first.
inline constexpr double fallback_dense_factor =
    1 + static_cast<double>(tuning.auto_bound_slots) / rotor_slots;

inline std::string readable_seconds(double s) {
  char text[48];
  if (s < 120)
    std::snprintf(text, sizeof text, "%.1f s", s);
  else if (s < 7200)
    std::snprintf(text, sizeof text, "%.0f min", s / 60);
  else if (s < 172800)
    std::snprintf(text, sizeof text, "%.1f hours", s / 3600);
  else
    std::snprintf(text, sizeof text, "%.3g days", s / 86400);
  return text;
}

inline std::string readable_bytes(double n) {
  char text[48];
  if (n >= 1073741824.0)
    std::snprintf(text, sizeof text, "%.1f GiB", n / 1073741824.0);
  else if (n >= 1048576.0)
    std::snprintf(text, sizeof text, "%.0f MiB", n / 1048576.0);
  else if (n >= 1024.0)
    std::snprintf(text, sizeof text, "%.0f KiB", n / 1024.0);
  else
    std::snprintf(text, sizeof text, "%.0f bytes", n);
  return text;
}

// Throws the refusal when `seconds` passes the limit. `slots` is that of the request (or
// exact_units); `what` says which part of the work the estimate covers.
inline void check_dp_seconds(std::string_view solver_name, const chain& c, size_type slots,
                             double seconds, double bytes, const solve_options& options,
                             std::string_view what) {
  if (!(seconds > options.max_estimated_seconds)) return;
  std::string text(solver_name);
  text += ": refused before starting: " + std::string(what) + " for " + std::to_string(c.length()) +
          " stages" +
          (slots == exact_units ? std::string(" in exact units")
                                : " and " + std::to_string(slots) + " slots") +
          " is estimated at up to " + readable_seconds(seconds) + " and " + readable_bytes(bytes) +
          " (limit " + readable_seconds(options.max_estimated_seconds) +
          ", max_estimated_seconds). Use fewer slots (--slots N), coarser stages (merge "
          "consecutive stages into one), or another solver (chen-greedy, revolve and sequential "
          "answer long chains in seconds)";
  throw_solver_error(text);
}

[[noreturn]] inline void throw_table_too_large(std::int32_t L, size_type M, double bytes,
                                               std::size_t limit,
                                               std::string_view solver_name = "optimal") {
  auto readable = [](double n, char* out, std::size_t size) {
    if (n >= 1073741824.0)
      std::snprintf(out, size, "%.1f GiB", n / 1073741824.0);
    else if (n >= 1048576.0)
      std::snprintf(out, size, "%.1f MiB", n / 1048576.0);
    else
      std::snprintf(out, size, "%.0f bytes", n);
  };
  char need[32];
  char cap[32];
  readable(bytes, need, sizeof need);
  readable(static_cast<double>(limit), cap, sizeof cap);
  char text[320];
  std::snprintf(text, sizeof text,
                "%.*s: the DP table for %d stages and %lld memory units would need %s (limit %s, "
                "max_table_bytes); use fewer slots (--slots N), coarser stages, or raise the limit",
                static_cast<int>(solver_name.size()), solver_name.data(), static_cast<int>(L),
                static_cast<long long>(M), need, cap);
  throw_solver_error(text);
}

// What a frontier's point takes in the table.
inline constexpr double frontier_point_bytes =
    sizeof(double) * 2 + sizeof(std::int32_t);  // a frontier_step and its choice

// What the frontier DP spends on a chain of L stages before any frontier: the intervals' classes
// (`frontier::interval_classes`), 16 bytes and about 20 work units (a sort per diagonal) per
// interval, on one thread.
struct frontier_fixed_cost {
  double bytes = 0;
  double seconds = 0;
};
constexpr frontier_fixed_cost frontier_classes_cost(std::int32_t L) noexcept {
  const auto intervals = static_cast<double>(interval_count(L));
  return {16 * intervals, 20 * intervals / tuning.frontier_work_per_second};
}

// The least work of the frontier DP on a chain of L stages, whatever its frontiers: every interval
// tries each of its split points once (an upper bound on that least where intervals repeat).
constexpr double frontier_least_work(std::int32_t L) noexcept {
  return need_dp_pairs(L);
}

// Throws the refusal of an exact solve estimated over the limits, saying what to change.
[[noreturn]] inline void refuse_frontier(std::string_view solver_name, const chain& c,
                                         double seconds, double bytes, const solve_options& options,
                                         std::size_t byte_limit) {
  std::string text(solver_name);
  text +=
      ": refused: the exact DP for " + std::to_string(c.length()) +
      " stages is estimated at up to " + readable_seconds(seconds) + " and " +
      readable_bytes(bytes) + " (limit " + readable_seconds(options.max_estimated_seconds) +
      ", max_estimated_seconds, and " + readable_bytes(static_cast<double>(byte_limit)) +
      ", max_table_bytes). Use the default solve (exact within about 10 s and 2 GiB, within a "
      "stated bound of it past them), slots (--slots N), coarser stages (merge consecutive stages "
      "into one), or another solver (chen-greedy, revolve and sequential answer long chains "
      "in seconds)";
  throw_solver_error(text);
}

}  // namespace remat::detail
