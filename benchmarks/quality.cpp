// Schedule quality, not speed: for zoo chains, how much slower than storing everything each
// solver's schedule is, at budgets from the least feasible to the store-all peak.
//
//   bench_quality OUT_DIR [--points N] [--slots N] [--threads N] [--only NAME]
//
// Every solver runs on exact sizes (`optimal` and `checkpoint-only` with their whole curve), and
// `optimal` once more with N slots (default 500, Rotor's DP) at the same budgets. Writes
// OUT_DIR/quality.csv (every chain, budget and solver; the slots DP as "optimal-N-slots"),
// OUT_DIR/<chain>.svg (one chart per chain) and OUT_DIR/quality.md (overheads at 50% and 30% of
// the store-all peak, each solver's least budget, the exact DP's gain over the slots DP).
//
// It checks what the exact DP promises: at every budget of every chain, `optimal` is at least as
// fast as every other solver (the slots DP included) and fits every budget one of them fits.
// Each violation is a line "VIOLATION: ..." on stderr and in quality.md, and the exit status 1.
// Progress and run times go to stderr.
#include "sweep_output.hpp"

#include <remat/solve.hpp>
#include <remat/sweep.hpp>
#include <remat/zoo.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

struct chain_spec {
  std::string_view model;
  remat::zoo::options options;
};

// Two settings per network. Batch alone would not do: the zoo's costs scale linearly with it,
// sizes and (roofline) times alike, so every ratio below would repeat. Larger images or longer
// sequences change the shape of the chain (early layers grow, attention grows as s^2).
std::vector<chain_spec> chains() {
  using remat::size_type;
  const auto cnn = [](size_type batch, size_type image) {
    remat::zoo::options o;
    o.batch = batch;
    o.image_size = image;
    return o;
  };
  const auto gpt = [](size_type batch, size_type sequence) {
    remat::zoo::options o;
    o.batch = batch;
    o.sequence_length = sequence;
    return o;
  };
  return {
      {"resnet101", cnn(32, 224)},   {"resnet101", cnn(16, 320)},   {"resnet152", cnn(32, 224)},
      {"resnet152", cnn(16, 320)},   {"resnet1001", cnn(32, 32)},   {"resnet1001", cnn(16, 64)},
      {"densenet121", cnn(32, 224)}, {"densenet121", cnn(16, 320)}, {"vgg19", cnn(32, 224)},
      {"vgg19", cnn(16, 320)},       {"gpt2-medium", gpt(8, 1024)}, {"gpt2-medium", gpt(4, 2048)},
      {"gpt2-xl", gpt(4, 1024)},     {"gpt2-xl", gpt(2, 2048)}};
}

// The solvers compared: all but exhaustive (a handful of stages only), store-all (the reference
// itself, feasible only at 100%) and the offloading solvers (the zoo's chains have no link here:
// bench_offload_quality compares those).
std::vector<remat::solver> compared() {
  std::vector<remat::solver> out;
  for (const remat::solver s : remat::all_solvers)
    if (s != remat::solver::exhaustive && s != remat::solver::store_all &&
        s != remat::solver::offload && !remat::needs_link(s))
      out.push_back(s);
  return out;
}

std::string percent(double v, int decimals = 1) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f%%", decimals, 100 * v);
  return buf;
}

// The makespan of `which` at `budget`: from its curve where it has one (the makespan of the last
// point at or below the budget, what `solve` returns there), from the sweep for min-memory (one
// schedule at every budget), else solved. NaN when infeasible.
double makespan_at(const remat::chain& c, const remat::sweep_result& s, remat::solver which,
                   remat::size_type slots, remat::size_type budget, unsigned threads) {
  constexpr double none = std::numeric_limits<double>::quiet_NaN();
  if (slots == remat::exact_units)
    for (const remat::sweep_series& series : s.series)
      if (series.solver == which && !series.curve.empty()) {
        double t = none;
        for (const remat::solve_result& r : series.curve)
          if (r.budget <= budget) t = r.schedule.makespan;
        return t;
      }
  // Min-memory returns one schedule wherever it fits.
  if (which == remat::solver::min_memory)
    for (const remat::sweep_series& series : s.series)
      if (series.solver == which && series.results.back().feasible)
        return budget >= series.min_feasible_budget ? series.results.back().schedule.makespan
                                                    : none;
  remat::solve_options so;
  so.solver = which;
  so.slots = slots;
  so.threads = threads;
  so.max_estimated_seconds = 1e9;
  const remat::solve_result r = remat::solve(c, budget, so);
  return r.feasible ? r.schedule.makespan : none;
}

// "+12.3%" over store-all, or "infeasible".
std::string overhead(const remat::sweep_result& s, double makespan) {
  if (std::isnan(makespan)) return "infeasible";
  return "+" + percent(remat::tools::time_ratio(s, makespan) - 1);
}

// Exact `optimal` is the fastest persistent schedule, and every compared solver's schedule is
// persistent: none may beat it, with a margin for sums taken in another order.
bool beats(double other, double exact) {
  if (std::isnan(other)) return false;
  if (std::isnan(exact)) return true;
  return other < exact * (1 - 1e-9);
}

int usage() {
  std::cerr << "usage: bench_quality OUT_DIR [--points N] [--slots N] [--threads N] [--only "
               "NAME]\n";
  return 2;
}

struct gap_stats {
  double worst = 0;
  double sum = 0;
  int count = 0;
  int only_exact = 0;  // budgets the exact DP fits and the slots DP does not
};

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 2) return usage();
    const std::filesystem::path dir = argv[1];
    remat::sweep_options options;
    options.solvers = compared();
    options.solvers.insert(options.solvers.begin() + 1, remat::solver::store_all);
    options.threads = 0;
    options.slots = remat::exact_units;
    // Exact means exact: no thinning, however long the frontier DP takes (a chain whose estimate
    // passes the default 60 s would be thinned, as ResNet-1001 once was).
    options.max_estimated_seconds = 1e9;
    remat::size_type slots = remat::rotor_slots;
    std::string only;
    for (int k = 2; k + 1 < argc; k += 2) {
      const std::string_view flag = argv[k];
      const std::string value = argv[k + 1];
      if (flag == "--points")
        options.points = static_cast<std::size_t>(std::stoul(value));
      else if (flag == "--slots")
        slots = std::stoll(value);
      else if (flag == "--threads")
        options.threads = static_cast<unsigned>(std::stoul(value));
      else if (flag == "--only")
        only = value;
      else
        return usage();
    }
    if (argc % 2 != 0 || slots <= 0) return usage();
    std::filesystem::create_directories(dir);
    const std::string slots_name = "optimal-" + std::to_string(slots) + "-slots";

    using clock = std::chrono::steady_clock;
    const clock::time_point start = clock::now();
    std::string csv = "chain,stages," + std::string(remat::tools::sweep_csv_header) + "\n";
    // The table's columns: exact optimal, the slots DP, then the other solvers.
    std::vector<std::pair<std::string, remat::size_type>> columns = {
        {"optimal (exact)", remat::exact_units},
        {"optimal (" + std::to_string(slots) + " slots)", slots}};
    std::vector<remat::solver> column_solver = {remat::solver::optimal, remat::solver::optimal};
    for (const remat::solver s : compared())
      if (s != remat::solver::optimal) {
        columns.emplace_back(std::string(remat::name(s)), remat::exact_units);
        column_solver.push_back(s);
      }
    std::string head = "| chain | stages |", rule = "|---|---:|";
    for (const auto& [label, unused] : columns) {
      head += " " + label + " |";
      rule += "---:|";
    }
    std::string at50 = head + "\n" + rule + "\n", at30 = at50, least = at50;
    std::string gaps =
        "| chain | stages | curve points | budgets compared | worst gap | mean gap | only exact "
        "fits |\n|---|---:|---:|---:|---:|---:|---:|\n";
    std::string times = "| chain | stages | exact sweep | slots DP |\n|---|---:|---:|---:|\n";
    std::vector<std::string> violations;
    gap_stats all_gaps;
    const auto violation = [&](const std::string& what) {
      violations.push_back("VIOLATION: " + what);
      std::cerr << "\n" << violations.back() << '\n';
    };

    for (const chain_spec& spec : chains()) {
      const remat::zoo::network net = remat::zoo::build(spec.model, spec.options);
      if (!only.empty() && net.name.find(only) == std::string::npos) continue;
      const std::string L = std::to_string(net.chain.length());
      std::cerr << net.name << " (" << L << " stages): " << std::flush;
      const clock::time_point t0 = clock::now();
      const remat::sweep_result s = remat::sweep(net.chain, options);
      const double seconds = std::chrono::duration<double>(clock::now() - t0).count();
      // The slots DP at the same budgets.
      const clock::time_point t1 = clock::now();
      remat::sweep_result with_slots = s;
      with_slots.series.assign(1, {});
      remat::sweep_series& rounded = with_slots.series.front();
      for (const remat::size_type b : s.budgets)
        rounded.results.push_back(
            remat::solve(net.chain, b,
                         {.solver = remat::solver::optimal,
                          .slots = slots,
                          .threads = options.threads,
                          .max_estimated_seconds = options.max_estimated_seconds}));
      rounded.min_feasible_budget = rounded.results.front().min_feasible_budget;
      const double slot_seconds = std::chrono::duration<double>(clock::now() - t1).count();
      std::fprintf(stderr, "%.1f s exact sweep, %.1f s slots\n", seconds, slot_seconds);

      csv += remat::tools::sweep_csv_rows(s, net.name + "," + L + ",");
      {
        std::string rows = remat::tools::sweep_csv_rows(with_slots, net.name + "," + L + ",");
        for (std::size_t at = rows.find(",optimal,"); at != std::string::npos;
             at = rows.find(",optimal,", at + 1))
          rows.replace(at, 9, "," + slots_name + ",");
        csv += rows;
      }
      char subtitle[256];
      std::snprintf(subtitle, sizeof subtitle,
                    "%s stages; store-all: makespan %.1f ms, peak %.2f GiB; exact sizes, and "
                    "optimal with %lld slots",
                    L.c_str(), s.store_all_makespan,
                    static_cast<double>(s.store_all_memory) / 1073741824.0,
                    static_cast<long long>(slots));
      remat::tools::svg::chart chart =
          remat::tools::sweep_chart(s, net.name + ": makespan against memory budget", subtitle);
      {
        remat::tools::svg::series line;
        line.label = "optimal, " + std::to_string(slots) + " slots";
        for (const remat::solve_result& r : rounded.results)
          if (r.feasible)
            line.points.push_back({remat::tools::memory_fraction(s, r.budget),
                                   remat::tools::time_ratio(s, r.schedule.makespan)});
        chart.lines.insert(chart.lines.begin() + 1, std::move(line));
      }
      std::ofstream(dir / (net.name + ".svg")) << remat::tools::svg::render(chart);

      // The checks, at every budget of the sweep.
      const remat::sweep_series& exact = s.series.front();
      if (exact.solver != remat::solver::optimal) throw std::logic_error("optimal comes first");
      const auto makespan = [](const remat::solve_result& r) {
        return r.feasible ? r.schedule.makespan : std::numeric_limits<double>::quiet_NaN();
      };
      for (const remat::solve_result& r : exact.results)
        if (!r.exact)
          violation(net.name + ": optimal at budget " + std::to_string(r.budget) +
                    " is not exact");
      gap_stats g;
      for (std::size_t k = 0; k < s.budgets.size(); ++k) {
        const double best = makespan(exact.results[k]);
        const std::string where = net.name + " at budget " + std::to_string(s.budgets[k]) + ": ";
        for (const remat::sweep_series& other : s.series)
          if (beats(makespan(other.results[k]), best))
            violation(where + std::string(remat::name(other.solver)) + " " +
                      std::to_string(makespan(other.results[k])) + " < optimal " +
                      std::to_string(best));
        const double r = makespan(rounded.results[k]);
        if (beats(r, best))
          violation(where + slots_name + " " + std::to_string(r) + " < optimal " +
                    std::to_string(best));
        if (std::isnan(best)) continue;
        if (std::isnan(r)) {
          ++g.only_exact;
          continue;
        }
        const double gap = r / best - 1;
        g.worst = std::max(g.worst, gap);
        g.sum += gap;
        ++g.count;
      }
      for (const remat::sweep_series& other : s.series)
        if (other.min_feasible_budget != remat::solve_result::no_budget &&
            (exact.min_feasible_budget == remat::solve_result::no_budget ||
             other.min_feasible_budget < exact.min_feasible_budget))
          violation(net.name + ": " + std::string(remat::name(other.solver)) + " fits " +
                    std::to_string(other.min_feasible_budget) + " < optimal's least budget " +
                    std::to_string(exact.min_feasible_budget));
      all_gaps.worst = std::max(all_gaps.worst, g.worst);
      all_gaps.sum += g.sum;
      all_gaps.count += g.count;
      all_gaps.only_exact += g.only_exact;

      std::string r50 = "| " + net.name + " | " + L + " |", r30 = r50, rl = r50;
      const auto at = [&](double fraction) {
        return static_cast<remat::size_type>(fraction * static_cast<double>(s.store_all_memory));
      };
      for (const double fraction : {0.5, 0.3}) {
        const remat::size_type b = at(fraction);
        std::vector<double> t;
        for (std::size_t n = 0; n < columns.size(); ++n)
          t.push_back(
              makespan_at(net.chain, s, column_solver[n], columns[n].second, b, options.threads));
        for (std::size_t n = 1; n < columns.size(); ++n)
          if (beats(t[n], t[0]))
            violation(net.name + " at " + percent(fraction, 0) + ": " + columns[n].first + " " +
                      std::to_string(t[n]) + " < optimal " + std::to_string(t[0]));
        std::string& row = fraction == 0.5 ? r50 : r30;
        for (const double v : t) row += " " + overhead(s, v) + " |";
      }
      const auto least_text = [&](remat::size_type b) {
        return b == remat::solve_result::no_budget ? std::string("none")
                                                   : percent(remat::tools::memory_fraction(s, b));
      };
      rl += " " + least_text(exact.min_feasible_budget) + " | " +
            least_text(rounded.min_feasible_budget) + " |";
      for (std::size_t n = 2; n < columns.size(); ++n)
        for (const remat::sweep_series& series : s.series)
          if (series.solver == column_solver[n])
            rl += " " + least_text(series.min_feasible_budget) + " |";
      at50 += r50 + "\n";
      at30 += r30 + "\n";
      least += rl + "\n";
      char line[256];
      std::snprintf(line, sizeof line, "| %s | %s | %zu | %d | %s | %s | %d |\n", net.name.c_str(),
                    L.c_str(), exact.curve.size(), g.count, percent(g.worst, 2).c_str(),
                    percent(g.count > 0 ? g.sum / g.count : 0, 2).c_str(), g.only_exact);
      gaps += line;
      std::snprintf(line, sizeof line, "| %s | %s | %.1f s | %.1f s |\n", net.name.c_str(),
                    L.c_str(), seconds, slot_seconds);
      times += line;
    }

    std::ofstream(dir / "quality.csv") << csv;
    std::ofstream md(dir / "quality.md");
    char total_gap[160];
    std::snprintf(total_gap, sizeof total_gap, "| all | | | %d | %s | %s | %d |\n", all_gaps.count,
                  percent(all_gaps.worst, 2).c_str(),
                  percent(all_gaps.count > 0 ? all_gaps.sum / all_gaps.count : 0, 2).c_str(),
                  all_gaps.only_exact);
    md << "### Makespan overhead over store-all at 50% of its peak memory\n\n"
       << at50 << "\n### Makespan overhead over store-all at 30% of its peak memory\n\n"
       << at30 << "\n### Least feasible budget, as a fraction of the store-all peak\n\n"
       << least << "\n### The exact DP against " << slots
       << " slots: how much slower the slots DP's schedule is, at the sweep's budgets\n\n"
       << gaps << total_gap << "\n### Checks\n\n";
    if (violations.empty())
      md << "No violation: at every budget of every sweep and at 50% and 30%, `optimal` (exact) "
            "is at least as fast as every other solver, the slots DP included, and its least "
            "budget is the least.\n";
    for (const std::string& v : violations) md << "* " << v << "\n";
    md << "\n### Run times (" << options.points << " budgets x " << options.solvers.size()
       << " solvers on exact sizes, then optimal with " << slots
       << " slots at the same budgets)\n\n"
       << times;
    std::fprintf(stderr, "total %.1f s\n",
                 std::chrono::duration<double>(clock::now() - start).count());
    if (!violations.empty()) {
      std::fprintf(stderr, "%zu violations\n", violations.size());
      return 1;
    }
    return md ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "bench_quality: " << e.what() << '\n';
    return 1;
  }
}
