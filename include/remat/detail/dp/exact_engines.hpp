// The exact engines at one budget, weighed before any runs: the frontier DP capped at the budget
// is probed (the same probe whether the solve runs or is costed, its length in work units so that
// it does the same work each time), and each engine estimated from it, from its lower bounds'
// plan, or from its triples. `dispatch` (dispatch.hpp) then tries them cheapest first.
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/dp/choose.hpp>
#include <remat/detail/dp/cost.hpp>
#include <remat/detail/dp/engines/dense.hpp>
#include <remat/detail/dp/engines/frontier.hpp>
#include <remat/detail/dp/engines/search.hpp>
#include <remat/detail/dp/engines/search_bounds.hpp>
#include <remat/detail/dp/frontier_solve.hpp>
#include <remat/detail/dp/intervals.hpp>
#include <remat/detail/dp/tuning.hpp>
#include <remat/solver_options.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

namespace remat::detail {

enum class exact_engine : std::uint8_t { frontier, search, dense };

// An exact engine and what it is estimated to cost at the budget.
struct exact_candidate {
  exact_engine engine = exact_engine::frontier;
  double seconds = 0;
  double bytes = 0;
};

// The exact engines' attempt at one budget, as it goes.
struct exact_attempt {
  frontier_table probe;                     // the frontier DP run for `probe_seconds`: the answer
                                            // where it finished, else where the frontier resumes
  std::optional<lower_bound_plan> bounds;   // the search's lower bounds, where it has any
  std::vector<exact_candidate> candidates;  // cheapest first (ties: frontier, search, dense)
  // The estimates as they stood when each engine stopped (the frontier DP's projection then; the
  // search without one where it gave up): what a refusal reports.
  std::vector<exact_candidate> weighed;
  std::optional<lower_bound_table> lower_bounds;  // the search's, where it ran
  double spent = 0;                               // seconds at the estimates' rates

  void weigh(exact_engine engine, double seconds, double bytes) {
    for (exact_candidate& w : weighed)
      if (w.engine == engine) w = {engine, seconds, bytes};
  }
};

// How long the frontier DP runs before the exact engines are weighed (it resumes from there).
constexpr double probe_seconds_of(const engines_step& e) noexcept {
  return std::min(tuning.frontier_probe_share * e.allowance, tuning.frontier_probe_seconds);
}

// The probe, and the engines' estimates at the budget: the frontier DP capped there, projected
// from the probe; branch and bound from its lower bounds' DP (where `search_plan` gives bounds);
// the dense DP on the chain's own units from its triples.
inline exact_attempt start_exact(const dp_choice& d, const engines_step& e) {
  const model& md = d.md;
  const dp_request& r = d.request;
  const size_type m = r.budget - md.x[0];
  const frontier_limits& limits = e.limits;
  exact_attempt a;
  a.probe = frontier_dp(md, {},
                        {.branches = r.branches,
                         .threads = limits.threads,
                         .max_work = probe_seconds_of(e) * limits.rate,
                         .max_points = limits.max_points(),
                         .stop_on_projection = false,
                         .cap = m});
  a.spent = a.probe.work / limits.rate;
  // Exact asked for, the frontier DP stops as soon as a projection made as it goes passes its
  // limit, and from the first diagonals that can be above the whole: the most of them. The
  // default runs it to its limit of work instead, and weighs it on the projection.
  const frontier_table& t = a.probe;
  const bool stops = r.mode != dp_mode::automatic;
  const double work = t.complete ? t.work
                      : stops    ? std::max(t.projected_work, t.peak_projected_work)
                                 : t.projected_work;
  const double points = t.complete ? t.points_done
                        : stops    ? std::max(t.projected_points, t.peak_projected_points)
                                   : t.projected_points;
  // The frontier DP resumes from the probe: what is left of its work (the classes are done).
  a.candidates.push_back({exact_engine::frontier, std::max(0.0, work - t.work) / limits.rate,
                          limits.fixed.bytes + points * frontier_point_bytes});
  a.bounds = search_plan(md, m, r.branches, r.threads);
  if (a.bounds)
    a.candidates.push_back(
        {exact_engine::search, tuning.search_cost_factor * a.bounds->seconds, 2 * a.bounds->bytes});
  const interval_bounds b = make_interval_bounds(md, d.least.need, r.branches);
  a.candidates.push_back({exact_engine::dense, main_dp_seconds(b, md.L, m, r.branches, r.threads),
                          dense_table_bytes(make_dense_layout(b, md.L, m), md.L, m, r.threads)});
  // Ties in the order frontier, search, dense. (No stable_sort: it allocates a buffer.)
  std::sort(a.candidates.begin(), a.candidates.end(),
            [](const exact_candidate& x, const exact_candidate& y) {
              return x.seconds < y.seconds || (x.seconds == y.seconds && x.engine < y.engine);
            });
  a.weighed = a.candidates;
  return a;
}

// What is left of the allowance.
inline double left_for(const engines_step& e, const exact_attempt& a) {
  return e.allowance - a.spent;
}

// Whether `x` fits what is left of the allowance and the table limit.
inline bool affordable(const engines_step& e, const exact_attempt& a, const exact_candidate& x) {
  return !(x.seconds > left_for(e, a)) && !(x.bytes > static_cast<double>(e.limits.byte_limit));
}

// The refusal of an exact solve no engine finished within the limits, with the estimate of the
// engine that came nearest: the fastest of those whose table fits, else the smallest table.
[[noreturn]] inline void refuse_exact(const chain& c, const dp_choice& d, const engines_step& e,
                                      const solve_options& options,
                                      const std::vector<exact_candidate>& weighed) {
  const auto byte_limit = static_cast<double>(e.limits.byte_limit);
  const exact_candidate* nearest = nullptr;
  for (const exact_candidate& x : weighed) {
    if (!(x.seconds < infinite_time)) continue;
    const bool fits = !(x.bytes > byte_limit);
    const bool nearest_fits = nearest != nullptr && !(nearest->bytes > byte_limit);
    if (nearest == nullptr || (fits && (!nearest_fits || x.seconds < nearest->seconds)) ||
        (!fits && !nearest_fits && x.bytes < nearest->bytes))
      nearest = &x;
  }
  const exact_candidate none{exact_engine::frontier, infinite_time, 0};
  if (nearest == nullptr) nearest = &none;
  refuse_frontier(name(d.request.which), c, nearest->seconds, nearest->bytes, options,
                  e.limits.byte_limit);
}

}  // namespace remat::detail
