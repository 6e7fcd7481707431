// remat-solve's --sweep (a table of every solver over evenly spaced budgets, with --csv and
// --plot files) and --frontier (the whole trade-off curve).
#pragma once

#include "solve_report.hpp"
#include "sweep_output.hpp"

#include <remat/io/chain_json.hpp>
#include <remat/sweep.hpp>
#include <remat/trade_off.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <new>
#include <optional>
#include <ostream>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace remat::tools {

inline std::vector<remat::solver> sweep_solvers(const solve_request& req, const chain& c,
                                                std::string& note) {
  if (!req.solvers.empty()) return req.solvers;
  std::vector<remat::solver> out;
  const bool transfers = c.transfer.offload_bandwidth > 0 || c.transfer.prefetch_bandwidth > 0;
  for (const remat::solver s : all_solvers) {
    const solver_info& i = info(s);
    // Without a link to host memory, offload is optimal: the same row twice.
    if (i.uses_link && !c.transfer.available()) continue;
    // Offloading with micro-batches in flight is not modelled (the solvers refuse it).
    if (req.in_flight > 1 && i.uses_link && s != remat::solver::exhaustive) continue;
    const std::size_t limit =
        transfers && i.max_link_stages != 0 ? i.max_link_stages : i.max_stages;
    if (limit != 0 && c.length() > limit) {
      note = "remat-solve: --sweep leaves out " + std::string(i.name) + ": the chain has " +
             std::to_string(c.length()) + " stages, more than its limit of " +
             std::to_string(limit) + (transfers ? " with transfers" : "") + "\n";
      continue;
    }
    out.push_back(s);
  }
  return out;
}

/// The sweep as a table: one row per budget and solver, then each solver's least budget.
inline std::string format_sweep(const io::chain_file& f, const sweep_result& s, size_type slots) {
  using detail::format_memory;
  const std::string& mu = f.memory_unit;
  const std::string& tu = f.time_unit;
  std::string out;
  const auto line = [&](std::string_view key, const std::string& text) {
    std::string l(key);
    l.resize(11, ' ');
    out += l + text + '\n';
  };
  const auto fraction = [&](size_type b) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f%%", 100 * memory_fraction(s, b));
    return std::string(buf);
  };
  line("chain", detail::chain_line(f));
  line("store-all", "makespan " + detail::format_time(s.store_all_makespan, tu) + ", peak " +
                        format_memory(s.store_all_memory, mu));
  line("budgets", std::to_string(s.budgets.size()) + ", evenly spaced from " +
                      format_memory(s.budgets.front(), mu) + ", " + fraction(s.budgets.front()) +
                      " of store-all,");
  line("", "the least for optimal with " + detail::least_slots_text(slots) + ", to " +
               format_memory(s.budgets.back(), mu));
  std::string curves;
  for (const sweep_series& series : s.series) {
    if (series.curve.empty()) continue;
    curves += (curves.empty() ? "" : ", ") + std::string(name(series.solver)) + " " +
              std::to_string(series.curve.size()) +
              (series.curve.size() == 1 ? " point" : " points");
  }
  if (!curves.empty()) {
    line("curves", curves + ": every budget");
    line("", "where the makespan drops, in --csv and --plot");
  }
  out += '\n';

  using row = std::vector<std::string>;
  std::vector<row> rows;
  const std::string time_head =
      tu.empty() ? "makespan" : "makespan (" + detail::printable(tu) + ")";
  const std::string memory_head = mu.empty() ? "" : " (" + detail::printable(mu) + ")";
  rows.push_back(
      {"budget" + memory_head, "of store-all", "solver", time_head, "ratio", "peak" + memory_head});
  for (std::size_t k = 0; k < s.budgets.size(); ++k) {
    for (std::size_t n = 0; n < s.series.size(); ++n) {
      const sweep_series& series = s.series[n];
      const solve_result& r = series.results[k];
      row cells;
      cells.push_back(n == 0 ? std::to_string(s.budgets[k]) : "");
      cells.push_back(n == 0 ? fraction(s.budgets[k]) : "");
      cells.emplace_back(name(series.solver));
      if (r.feasible) {
        const double ratio = time_ratio(s, r.schedule.makespan);
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.4f", ratio);
        cells.push_back(detail::format_time(r.schedule.makespan, ""));
        cells.emplace_back(std::isnan(ratio) ? "-" : buf);
        cells.push_back(std::to_string(r.schedule.peak_memory));
      } else {
        cells.insert(cells.end(), {"infeasible", "-", "-"});
      }
      rows.push_back(std::move(cells));
    }
  }
  // Numbers right-aligned, the solver name left-aligned.
  std::vector<std::size_t> width(rows.front().size(), 0);
  for (const row& r : rows)
    for (std::size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  for (std::size_t k = 0; k < rows.size(); ++k) {
    std::string text;
    for (std::size_t c = 0; c < rows[k].size(); ++c) {
      const std::string& cell = rows[k][c];
      const std::string pad(width[c] - cell.size(), ' ');
      text += (c == 0 ? "" : "  ") + (c == 2 ? cell + pad : pad + cell);
    }
    while (text.ends_with(' ')) text.pop_back();
    out += text + '\n';
    if (k + 1 < rows.size() && k > 0 && k % s.series.size() == 0 && s.series.size() > 1)
      out += '\n';
  }

  out += "\nleast budget of each solver (" + detail::least_slots_text(slots) +
         " for the DP solvers):\n";
  std::size_t name_width = 0;
  for (const sweep_series& series : s.series)
    name_width = std::max(name_width, name(series.solver).size());
  for (const sweep_series& series : s.series) {
    std::string n(name(series.solver));
    n.resize(name_width, ' ');
    out += "  " + n + "  " +
           (series.min_feasible_budget == solve_result::no_budget
                ? std::string("none")
                : format_memory(series.min_feasible_budget, mu) + ", " +
                      fraction(series.min_feasible_budget) + " of store-all") +
           '\n';
  }
  return out;
}

/// An output file that cannot be written; the message names it.
class output_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {

// An output file, opened (truncated) before the work that fills it, so that a bad path fails at
// once; removed again unless `commit` wrote it completely.
class output_file {
 public:
  explicit output_file(std::string path) : path_(std::move(path)) {
    file_ = std::fopen(path_.c_str(), "wb");
    if (file_ == nullptr)
      throw output_error("cannot write '" + path_ + "': " + std::strerror(errno));
  }
  output_file(const output_file&) = delete;
  output_file& operator=(const output_file&) = delete;
  ~output_file() {
    if (file_ == nullptr) return;
    std::fclose(file_);
    std::remove(path_.c_str());
  }
  void commit(const std::string& text) {
    const bool written = std::fwrite(text.data(), 1, text.size(), file_) == text.size();
    const bool closed = std::fclose(file_) == 0;
    file_ = nullptr;
    if (!written || !closed) {
      std::remove(path_.c_str());
      throw output_error("cannot write '" + path_ + "'");
    }
  }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace detail

/// `--sweep`: the table for `out`, the CSV and SVG files when asked; with `show_progress`, progress
/// on `err` when the sweep takes more than a second.
inline std::string run_sweep(const io::chain_file& file, const solve_request& req,
                             std::ostream& err, bool show_progress) {
  std::string note;
  sweep_options options;
  options.solvers = sweep_solvers(req, file.chain, note);
  options.points = req.points ? static_cast<std::size_t>(*req.points) : 20;
  options.slots = req.slots;
  options.threads = 0;  // every hardware thread, as for one budget
  options.in_flight = req.in_flight;
  std::optional<detail::output_file> csv_file, plot_file;
  if (req.csv) csv_file.emplace(*req.csv);
  if (req.plot) plot_file.emplace(*req.plot);
  err << note;

  using clock = std::chrono::steady_clock;
  const clock::time_point start = clock::now();
  clock::time_point shown{};
  bool showing = false;
  if (show_progress)
    options.progress = [&](std::size_t done, std::size_t total) {
      const clock::time_point now = clock::now();
      if (now - start < std::chrono::seconds(1)) return;
      if (showing && done < total && now - shown < std::chrono::milliseconds(250)) return;
      err << "\rremat-solve: sweep: " << done << "/" << total << " solves" << std::flush;
      showing = true;
      shown = now;
    };
  sweep_result s;
  try {
    s = remat::sweep(file.chain, options);
  } catch (...) {
    if (showing) err << '\n';
    throw;
  }
  if (showing) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " in %.1f s\n",
                  std::chrono::duration<double>(clock::now() - start).count());
    err << buf;
  }

  if (req.csv) {
    std::string csv(sweep_csv_header);
    csv += '\n';
    csv += sweep_csv_rows(s);
    csv_file->commit(csv);
  }
  if (req.plot) {
    const std::string title =
        (file.name.empty() ? std::string("chain") : detail::printable(file.name)) +
        ": makespan against memory budget";
    std::string subtitle = std::to_string(file.chain.length()) + " stages; store-all: makespan " +
                           detail::format_time(s.store_all_makespan, file.time_unit) + ", peak " +
                           detail::format_memory(s.store_all_memory, file.memory_unit) + "; " +
                           detail::slots_text(req.slots) + " for the DP solvers";
    plot_file->commit(svg::render(sweep_chart(s, title, subtitle)));
  }
  return format_sweep(file, s, req.slots);
}

/// `--frontier`: the curve of `remat::trade_off`, one point per line (budget, makespan), or with
/// `--json` one object `{"solver", "epsilon", "points": [{"budget", "makespan"}, ...]}`.
inline std::string format_frontier(const io::chain_file& file, const solve_request& req) {
  const solver which = req.solvers.empty() ? solver::optimal : req.solvers.front();
  const trade_off_result curve = trade_off(file.chain, {.solver = which, .threads = 0});
  if (req.json) {
    nlohmann::ordered_json j;
    j["solver"] = std::string(name(which));
    j["epsilon"] = 0.0;  // the curve is exact (the contract's key)
    nlohmann::ordered_json points = nlohmann::ordered_json::array();
    for (const trade_off_point& p : curve.points)
      points.push_back({{"budget", p.budget}, {"makespan", p.makespan}});
    j["points"] = std::move(points);
    return j.dump() + '\n';
  }
  std::string text = "chain      " + file.name + " (" + std::to_string(file.chain.length()) +
                     " stages)\nsolver     " + std::string(name(which)) + ", " +
                     std::to_string(curve.points.size()) +
                     (curve.points.size() == 1 ? " point" : " points");
  text += "\n\n        budget        makespan\n";
  for (const trade_off_point& p : curve.points) {
    char line[96];
    std::snprintf(line, sizeof line, "%14lld  %14.6g\n", static_cast<long long>(p.budget),
                  p.makespan);
    text += line;
  }
  return text;
}

}  // namespace remat::tools
