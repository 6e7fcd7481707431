// Block options (docs/graphs.md, "Options from a block's insides"): what letting each block of a
// zoo graph keep fewer of its saved values, and recompute the others in its backward, gains over
// plain autograd blocks. For each graph (remat-zoo --graph's U-Net, DenseNet-121, ResNet-50,
// GPT-2 small, default sizes): the blocks and how many list options; the least feasible budget
// without and with options; the optimal solver's makespan over store-all's at 30% and 50% of
// store-all's peak (that of the chain without options), without and with options, each schedule
// replayed node by node by solve_graph; and linearize's time without and with options.
//
// Run: build/release/benchmarks/bench_block_options (results: benchmarks/results/block_options.txt).
#include <remat/linearize.hpp>
#include <remat/solve_graph.hpp>
#include <remat/zoo/graphs.hpp>

#include "store_all.hpp"

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <string>

namespace {

struct timed_lin {
  remat::linearization lin;
  double ms = 0;
};

timed_lin linearize_timed(const remat::graph& g, const remat::linearize_options& o) {
  const auto start = std::chrono::steady_clock::now();
  timed_lin t{remat::linearize(g, o), 0};
  t.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return t;
}

std::string ratio(const remat::graph& g, const remat::linearization& lin, remat::size_type budget,
                  double reference) {
  const remat::graph_solve_result r = remat::solve_graph(g, lin, budget);
  if (!r.result.feasible) return "  -  ";
  char text[16];
  std::snprintf(text, sizeof text, "%.3f", r.result.schedule.makespan / reference);
  return text;
}

}  // namespace

int main() {
  std::printf("%-12s %6s %7s %10s %8s %8s %11s %11s %11s %11s %8s %8s\n", "graph", "blocks",
              "w/opts", "options", "least", "least+o", "30% plain", "30% +opts", "50% plain",
              "50% +opts", "lin ms", "lin+o ms");
  for (const char* model : {"unet", "densenet121", "resnet50", "gpt2-small"}) {
    const remat::graph g = remat::zoo::build_graph(model, {}).graph;
    const timed_lin plain = linearize_timed(g, {});
    const timed_lin with = linearize_timed(g, {.block_options = true});
    std::size_t listing = 0, total = 0;
    for (const remat::stage& s : with.lin.chain.stages) {
      total += remat::option_count(s);
      if (!s.options.empty()) ++listing;
    }
    const remat::size_type peak = bench::store_all_peak(plain.lin.chain);
    const double reference = bench::store_all_time(plain.lin.chain);
    const remat::size_type least = remat::solve(plain.lin.chain, 0).min_feasible_budget;
    const remat::size_type least_o = remat::solve(with.lin.chain, 0).min_feasible_budget;
    const auto at = [&](int percent) {
      return static_cast<remat::size_type>(static_cast<double>(peak) * percent / 100.0);
    };
    std::printf("%-12s %6zu %7zu %10zu %7.1f%% %7.1f%% %11s %11s %11s %11s %8.1f %8.1f\n", model,
                plain.lin.blocks.size(), listing, total,
                100.0 * static_cast<double>(least) / static_cast<double>(peak),
                100.0 * static_cast<double>(least_o) / static_cast<double>(peak),
                ratio(g, plain.lin, at(30), reference).c_str(),
                ratio(g, with.lin, at(30), reference).c_str(),
                ratio(g, plain.lin, at(50), reference).c_str(),
                ratio(g, with.lin, at(50), reference).c_str(), plain.ms, with.ms);
  }
  std::printf("\nleast: least feasible budget over store-all's peak (plain blocks); 30%%/50%%: the "
              "optimal makespan over store-all's at that share of store-all's peak ('-': "
              "infeasible); options: stage options in all (1 per stage without).\n");
  return 0;
}
