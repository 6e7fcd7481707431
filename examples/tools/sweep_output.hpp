// What remat-solve --sweep and the quality benchmark make of a `remat::sweep_result`: ratios to
// store-all, CSV rows, and the chart. Private to remat's tools and benchmarks.
#pragma once

#include "svg_chart.hpp"

#include <remat/sweep.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace remat::tools {

/// `budget` as a fraction of the store-all peak (1 when that peak is 0).
inline double memory_fraction(const sweep_result& s, size_type budget) {
  if (s.store_all_memory == 0) return 1;
  return static_cast<double>(budget) / static_cast<double>(s.store_all_memory);
}

/// A makespan over the store-all makespan (NaN when that is 0: every time is 0).
inline double time_ratio(const sweep_result& s, double makespan) {
  if (!(s.store_all_makespan > 0)) return std::numeric_limits<double>::quiet_NaN();
  return makespan / s.store_all_makespan;
}

/// Shortest decimal form that reads back as the same double (%.17g trimmed), for CSV.
inline std::string exact_number(double v) {
  char buf[40];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

/// A CSV field: quoted when it holds a comma, a quote or a line break.
inline std::string csv_field(std::string_view s) {
  if (s.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(s);
  std::string q = "\"";
  for (const char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return q + "\"";
}

inline constexpr std::string_view sweep_csv_header =
    "budget,budget_fraction,solver,feasible,makespan,makespan_ratio,peak_memory,"
    "min_feasible_budget,retained";

namespace detail {

// The results of one series in increasing budget: those at the sweep's budgets and, for a solver
// with a curve, those at its points (one result per budget).
inline std::vector<const solve_result*> series_points(const sweep_result& s,
                                                      const sweep_series& series) {
  std::vector<const solve_result*> out;
  std::size_t k = 0, n = 0;
  while (k < series.results.size() || n < series.curve.size()) {
    const solve_result* next = nullptr;
    if (n == series.curve.size() ||
        (k < series.results.size() && s.budgets[k] <= series.curve[n].budget)) {
      next = &series.results[k];
      if (n < series.curve.size() && series.curve[n].budget == s.budgets[k]) ++n;
      ++k;
    } else {
      next = &series.curve[n++];
    }
    out.push_back(next);
  }
  return out;
}

}  // namespace detail

/// One CSV line per (budget, solver), budgets outer, in `sweep_csv_header`'s columns: every
/// solver at the sweep's budgets, and a solver with a curve (`sweep_series::curve`) also at each
/// of its points. An infeasible point has `feasible` false and empty makespan, ratio, peak and
/// retained (the memory held at the loss, docs/pipelines.md); a
/// solver with no feasible budget at all has an empty `min_feasible_budget`. Each line starts
/// with `prefix`.
inline std::string sweep_csv_rows(const sweep_result& s, std::string_view prefix = {}) {
  std::vector<std::vector<const solve_result*>> points;
  std::vector<size_type> budgets;
  for (const sweep_series& series : s.series) {
    points.push_back(detail::series_points(s, series));
    for (const solve_result* r : points.back()) budgets.push_back(r->budget);
  }
  std::sort(budgets.begin(), budgets.end());
  budgets.erase(std::unique(budgets.begin(), budgets.end()), budgets.end());
  std::vector<std::size_t> next(s.series.size(), 0);
  std::string out;
  for (const size_type budget : budgets) {
    for (std::size_t n = 0; n < s.series.size(); ++n) {
      const sweep_series& series = s.series[n];
      if (next[n] == points[n].size() || points[n][next[n]]->budget != budget) continue;
      const solve_result& r = *points[n][next[n]++];
      out += std::string(prefix) + std::to_string(budget) + "," +
             exact_number(memory_fraction(s, budget)) + "," + std::string(name(series.solver)) +
             "," + (r.feasible ? "true" : "false") + ",";
      if (r.feasible) {
        const double ratio = time_ratio(s, r.schedule.makespan);
        out += exact_number(r.schedule.makespan) + "," +
               (std::isnan(ratio) ? std::string() : exact_number(ratio)) + "," +
               std::to_string(r.schedule.peak_memory);
      } else {
        out += ",,";
      }
      out += ",";
      if (series.min_feasible_budget != solve_result::no_budget)
        out += std::to_string(series.min_feasible_budget);
      out += ",";
      if (r.feasible) out += std::to_string(r.retained);
      out += "\n";
    }
  }
  return out;
}

/// The chart of a sweep: budget over the store-all peak against makespan over the store-all
/// makespan, one line per solver (its feasible budgets only), `optimal` emphasized. A solver with
/// a curve is drawn as the step function it is, through every point of its curve, up to the
/// sweep's last budget.
inline svg::chart sweep_chart(const sweep_result& s, const std::string& title,
                              const std::string& subtitle) {
  svg::chart c;
  c.title = title;
  c.subtitle = subtitle;
  c.x_label = "memory budget / store-all peak memory";
  c.y_label = "makespan / store-all makespan";
  c.empty_note = "no schedule in this range";
  c.always_show = {{memory_fraction(s, s.budgets.front()), 1.0}, {1.0, 1.0}};
  for (const sweep_series& series : s.series) {
    svg::series line;
    line.label = std::string(name(series.solver));
    line.emphasized = series.solver == solver::optimal;
    const bool curve = !series.curve.empty();
    for (const solve_result& r : curve ? series.curve : series.results) {
      const double ratio = time_ratio(s, r.schedule.makespan);
      if (r.feasible && !std::isnan(ratio))
        line.points.push_back({memory_fraction(s, r.budget), ratio});
    }
    if (curve) {
      line.steps = true;
      line.steps_until = memory_fraction(s, s.budgets.back());
    }
    c.lines.push_back(std::move(line));
  }
  // A baseline far off (revolve near the least budget can be 5x slower, min-memory 10x on long
  // chains) would flatten the others: the axis stops at 2, or 1.5x the optimal solver's median
  // ratio if that is higher, and the points beyond are drawn at the edge with their values.
  std::vector<double> optimal_ratios;
  double worst = 1;
  for (const svg::series& line : c.lines)
    for (const svg::point& p : line.points) {
      worst = std::max(worst, p.y);
      if (line.emphasized) optimal_ratios.push_back(p.y);
    }
  double median = 1;
  if (!optimal_ratios.empty()) {
    std::sort(optimal_ratios.begin(), optimal_ratios.end());
    median = optimal_ratios[optimal_ratios.size() / 2];
  }
  const double cap = std::max(2.0, 1.5 * median);
  if (worst > cap) c.y_max = cap;
  return c;
}

}  // namespace remat::tools
