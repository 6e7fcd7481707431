// Schedule quality, not speed: for zoo chains, how much slower than storing everything each
// solver's schedule is, at budgets from the least feasible to the store-all peak.
//
//   bench_quality OUT_DIR [--points N] [--slots N] [--threads N] [--only NAME]
//
// Writes OUT_DIR/quality.csv (every chain, budget and solver), OUT_DIR/<chain>.svg (one chart per
// chain) and OUT_DIR/quality.md (overheads at 50% and 30% of the store-all peak, and each
// solver's least budget). Progress and run times go to stderr.
#include "sweep_output.hpp"

#include <remat/solve.hpp>
#include <remat/sweep.hpp>
#include <remat/zoo.hpp>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <string_view>
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

// The solvers compared: all but exhaustive (a handful of stages only) and store-all (the
// reference itself, feasible only at 100%).
std::vector<remat::solver> compared() {
  std::vector<remat::solver> out;
  for (const remat::solver s : remat::all_solvers)
    if (s != remat::solver::exhaustive && s != remat::solver::store_all) out.push_back(s);
  return out;
}

std::string percent(double v, int decimals = 1) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f%%", decimals, 100 * v);
  return buf;
}

// The overhead over store-all at budget `fraction` of its peak: "+12.3%" or "infeasible".
std::string overhead_at(const remat::chain& c, const remat::sweep_result& s, remat::solver which,
                        double fraction, const remat::sweep_options& o) {
  const auto budget =
      static_cast<remat::size_type>(fraction * static_cast<double>(s.store_all_memory));
  remat::solve_options so;
  so.solver = which;
  so.slots = o.slots;
  so.threads = o.threads;
  const remat::solve_result r = remat::solve(c, budget, so);
  if (!r.feasible) return "infeasible";
  return "+" + percent(remat::tools::time_ratio(s, r.plan.makespan) - 1);
}

int usage() {
  std::cerr << "usage: bench_quality OUT_DIR [--points N] [--slots N] [--threads N] [--only "
               "NAME]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 2) return usage();
    const std::filesystem::path dir = argv[1];
    remat::sweep_options options;
    options.solvers = compared();
    options.solvers.insert(options.solvers.begin() + 1, remat::solver::store_all);
    options.threads = 0;
    std::string only;
    for (int k = 2; k + 1 < argc; k += 2) {
      const std::string_view flag = argv[k];
      const std::string value = argv[k + 1];
      if (flag == "--points")
        options.points = static_cast<std::size_t>(std::stoul(value));
      else if (flag == "--slots")
        options.slots = std::stoll(value);
      else if (flag == "--threads")
        options.threads = static_cast<unsigned>(std::stoul(value));
      else if (flag == "--only")
        only = value;
      else
        return usage();
    }
    if (argc % 2 != 0) return usage();
    std::filesystem::create_directories(dir);

    using clock = std::chrono::steady_clock;
    const clock::time_point start = clock::now();
    std::string csv = "chain,stages," + std::string(remat::tools::sweep_csv_header) + "\n";
    const std::vector<remat::solver> table_solvers = compared();
    std::string head = "| chain | stages |", rule = "|---|---:|";
    for (const remat::solver s : table_solvers) {
      head += " " + std::string(remat::name(s)) + " |";
      rule += "---:|";
    }
    std::string at50 = head + "\n" + rule + "\n", at30 = at50, least = at50;
    std::string times = "| chain | stages | sweep time |\n|---|---:|---:|\n";

    for (const chain_spec& spec : chains()) {
      const remat::zoo::network net = remat::zoo::build(spec.model, spec.options);
      if (!only.empty() && net.name.find(only) == std::string::npos) continue;
      const std::string L = std::to_string(net.chain.length());
      std::cerr << net.name << " (" << L << " stages): " << std::flush;
      const clock::time_point t0 = clock::now();
      const remat::sweep_result s = remat::sweep(net.chain, options);
      const double seconds = std::chrono::duration<double>(clock::now() - t0).count();
      std::fprintf(stderr, "%.1f s\n", seconds);

      csv += remat::tools::sweep_csv_rows(s, net.name + "," + L + ",");
      char subtitle[256];
      std::snprintf(subtitle, sizeof subtitle,
                    "%s stages; store-all: makespan %.1f ms, peak %.2f GiB; --slots %lld for the "
                    "DP solvers",
                    L.c_str(), s.store_all_makespan,
                    static_cast<double>(s.store_all_memory) / 1073741824.0,
                    static_cast<long long>(options.slots));
      std::ofstream(dir / (net.name + ".svg")) << remat::tools::svg::render(
          remat::tools::sweep_chart(s, net.name + ": makespan against memory budget", subtitle));

      std::string r50 = "| " + net.name + " | " + L + " |", r30 = r50, rl = r50;
      for (const remat::solver which : table_solvers) {
        r50 += " " + overhead_at(net.chain, s, which, 0.5, options) + " |";
        r30 += " " + overhead_at(net.chain, s, which, 0.3, options) + " |";
        for (const remat::sweep_series& series : s.series)
          if (series.solver == which)
            rl += " " +
                  (series.min_feasible_budget == remat::solve_result::no_budget
                       ? std::string("none")
                       : percent(remat::tools::memory_fraction(s, series.min_feasible_budget))) +
                  " |";
      }
      at50 += r50 + "\n";
      at30 += r30 + "\n";
      least += rl + "\n";
      char t[64];
      std::snprintf(t, sizeof t, "%.1f s", seconds);
      times += "| " + net.name + " | " + L + " | " + t + " |\n";
    }

    std::ofstream(dir / "quality.csv") << csv;
    std::ofstream md(dir / "quality.md");
    md << "### Makespan overhead over store-all at 50% of its peak memory\n\n"
       << at50 << "\n### Makespan overhead over store-all at 30% of its peak memory\n\n"
       << at30 << "\n### Least feasible budget, as a fraction of the store-all peak\n\n"
       << least << "\n### Sweep times (" << options.points << " budgets x "
       << options.solvers.size() << " solvers per chain)\n\n"
       << times;
    std::fprintf(stderr, "total %.1f s\n",
                 std::chrono::duration<double>(clock::now() - start).count());
    return md ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "bench_quality: " << e.what() << '\n';
    return 1;
  }
}
