// Graphs against hand-cut chains (issue 43, item 5): on the zoo's networks that remat-zoo writes
// both as a hand-cut chain (one stage per bottleneck, dense layer or transformer block) and, with
// --graph, as an op-level graph, what cutting the graph at its cut points and giving its blocks
// options buys, and what it costs to compute.
//
// 1. The two descriptions of each network side by side: store-all's peak (the simulator's replay
//    of keeping every tape) and its compute time (every forward, the loss, every backward) for
//    the chain and for the graph's chain of blocks. They differ (the report says by how much);
//    each row of the next table is therefore normalized by its own store-all: peaks over its own
//    store-all peak, makespans over its own store-all time.
// 2. Per network and description (the hand-cut chain; the graph's blocks, plain autograd; the
//    graph's blocks with options): the least feasible budget, and the optimal makespan (exact
//    sizes) at 10% to 50% of store-all's peak; every graph schedule replayed node by node by
//    solve_graph.
// 3. The wall time, on one core (the solver's default of one thread; run it under taskset -c 0),
//    of linearize without and with options, of the slowest of the five solves of the chain with
//    options by the default solver (exact unless estimated past about 10 s or 2 GiB, else
//    Rotor's 500 slots with a bound: how many of the five were exact is printed), and of the
//    node-level replay of that
//    schedule: each the median of several runs.
//
// Run: taskset -c 0 bash benchmarks/run.sh graph_quality (results:
// benchmarks/results/graph_quality.txt).
#include <remat/linearize.hpp>
#include <remat/solve.hpp>
#include <remat/solve_graph.hpp>
#include <remat/zoo.hpp>
#include <remat/zoo/graphs.hpp>

#include "store_all.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr int runs = 7;
constexpr int percents[] = {10, 20, 30, 40, 50};

// The median wall time of `runs` calls of f, in milliseconds.
template <class F>
double median_ms(F&& f) {
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::nth_element(ms.begin(), ms.begin() + runs / 2, ms.end());
  return ms[runs / 2];
}

// One description of a network, normalized by its own store-all.
struct row {
  std::string label;
  remat::size_type peak = 0;  // store-all's peak
  double time = 0;            // store-all's compute time
  remat::size_type least = 0;
  std::vector<std::string> cells;  // makespan over store-all's at each percent, or "-"
};

constexpr remat::solve_options exact{.slots = remat::exact_units};

std::string cell(const remat::solve_result& r, double reference) {
  if (!r.feasible) return "-";
  char text[24];
  std::snprintf(text, sizeof text, "%.3f", r.schedule.makespan / reference);
  return text;
}

remat::size_type at(remat::size_type peak, int percent) {
  return static_cast<remat::size_type>(static_cast<double>(peak) * percent / 100.0);
}

row chain_row(const remat::chain& c) {
  row r{"hand-cut chain", bench::store_all_peak(c), bench::store_all_time(c), 0, {}};
  r.least = remat::solve(c, 0).min_feasible_budget;
  for (const int p : percents) {
    const remat::solve_result s = remat::solve(c, at(r.peak, p), exact);
    if (s.feasible && !remat::simulate(c, s.schedule).fits(at(r.peak, p))) {
      std::fprintf(stderr, "a chain schedule does not fit its budget\n");
      std::exit(1);
    }
    r.cells.push_back(cell(s, r.time));
  }
  return r;
}

// The graph's chain of blocks `lin`, normalized by the store-all of `plain` (the same graph's
// blocks without options: the same store-all, since option 0 is plain autograd).
row graph_row(const char* label, const remat::graph& g, const remat::linearization& lin,
              const remat::linearization& plain) {
  row r{label, bench::store_all_peak(plain.chain), bench::store_all_time(plain.chain), 0, {}};
  r.least = remat::solve(lin.chain, 0).min_feasible_budget;
  for (const int p : percents)
    r.cells.push_back(cell(remat::solve_graph(g, lin, at(r.peak, p), exact).result, r.time));
  return r;
}

void print_row(const char* network, const row& r) {
  std::printf("| %s | %s | %.1f%% | %.0f |", network, r.label.c_str(),
              100.0 * static_cast<double>(r.least) / static_cast<double>(r.peak),
              static_cast<double>(r.least) / 1e6);
  for (const std::string& c : r.cells) std::printf(" %s |", c.c_str());
  std::printf("\n");
}

struct timing {
  double lin = 0, lin_options = 0, solve = 0, replay = 0;
  int exact = 0;  // of the five default solves
};

timing time_network(const remat::graph& g) {
  timing t;
  t.lin = median_ms([&] { (void)remat::linearize(g); });
  t.lin_options = median_ms([&] { (void)remat::linearize(g, {.block_options = true}); });
  const remat::linearization lin = remat::linearize(g, {.block_options = true});
  const remat::size_type peak = bench::store_all_peak(remat::linearize(g).chain);
  for (const int p : percents) {
    remat::solve_result r;
    const double ms = median_ms([&] { r = remat::solve(lin.chain, at(peak, p)); });
    t.exact += r.feasible && !r.exact ? 0 : 1;
    if (ms < t.solve) continue;
    t.solve = ms;
    t.replay =
        r.feasible ? median_ms([&] { (void)remat::simulate_nodes(g, lin, r.schedule.ops); }) : 0;
  }
  return t;
}

}  // namespace

int main() {
  const char* models[] = {"resnet50",    "resnet101",  "resnet152",
                          "densenet121", "gpt2-small", "unet"};
  std::vector<remat::graph> graphs;
  std::vector<std::optional<remat::chain>> chains;
  for (const char* m : models) {
    graphs.push_back(remat::zoo::build_graph(m, {}).graph);
    const bool has_chain = std::find(remat::zoo::model_names.begin(), remat::zoo::model_names.end(),
                                     std::string_view(m)) != remat::zoo::model_names.end();
    chains.push_back(has_chain ? std::optional(remat::zoo::build(m, {}).chain) : std::nullopt);
  }

  std::printf("## The chain and the graph of each network: store-all's peak and compute time\n\n");
  std::printf(
      "| network | chain stages | graph nodes | blocks | chain peak MB | graph peak MB | "
      "graph/chain | chain ms | graph ms | graph/chain |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (std::size_t i = 0; i < graphs.size(); ++i) {
    const remat::linearization plain = remat::linearize(graphs[i]);
    const double gp = static_cast<double>(bench::store_all_peak(plain.chain)) / 1e6;
    const double gt = bench::store_all_time(plain.chain);
    if (!chains[i]) {
      std::printf("| %s | - | %zu | %zu | - | %.0f | - | - | %.1f | - |\n", models[i],
                  graphs[i].nodes.size(), plain.blocks.size(), gp, gt);
      continue;
    }
    const double cp = static_cast<double>(bench::store_all_peak(*chains[i])) / 1e6;
    const double ct = bench::store_all_time(*chains[i]);
    std::printf("| %s | %zu | %zu | %zu | %.0f | %.0f | %.3f | %.1f | %.1f | %.3f |\n", models[i],
                chains[i]->length(), graphs[i].nodes.size(), plain.blocks.size(), cp, gp, gp / cp,
                ct, gt, gt / ct);
  }

  std::printf("\n## Least budget and makespan, each over its own store-all's peak and time\n\n");
  std::printf("| network | description | least | least MB | 10%% | 20%% | 30%% | 40%% | 50%% |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (std::size_t i = 0; i < graphs.size(); ++i) {
    const remat::linearization plain = remat::linearize(graphs[i]);
    const remat::linearization with = remat::linearize(graphs[i], {.block_options = true});
    if (chains[i]) print_row(models[i], chain_row(*chains[i]));
    print_row(models[i], graph_row("graph, blocks", graphs[i], plain, plain));
    print_row(models[i], graph_row("graph, blocks + options", graphs[i], with, plain));
  }

  std::printf("\n## Wall time on one core, ms (median of %d runs)\n\n", runs);
  std::printf(
      "| network | linearize | linearize + options | slowest solve (10-50%%) | "
      "exact solves | its node replay | linearize + options + solve |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|\n");
  double zoo = 0;
  for (std::size_t i = 0; i < graphs.size(); ++i) {
    const timing t = time_network(graphs[i]);
    zoo += t.lin_options + t.solve;
    std::printf("| %s | %.2f | %.2f | %.2f | %d/5 | %.2f | %.2f |\n", models[i], t.lin,
                t.lin_options, t.solve, t.exact, t.replay, t.lin_options + t.solve);
  }
  std::printf("| all six | | | | | | %.1f |\n", zoo);
  std::printf(
      "\nleast: the least feasible budget over store-all's peak (least MB: in MB); 10%%..50%%: the "
      "exact "
      "optimal makespan over store-all's time at that share of store-all's peak ('-': "
      "infeasible); each row by its own store-all (table 1 says how the chain's and the "
      "graph's differ). exact solves: how many of the five default solves were exact "
      "(the others: the 500-slot schedule with a bound; an infeasible budget counts as "
      "exact).\n");
  return 0;
}
