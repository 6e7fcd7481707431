// How much an arena costs beyond the lower bound (the simulator's peak) for optimal schedules of
// real networks at 30% to 90% of store-all's memory (and 95%, 100%), with CUDA's 256-byte
// alignment; and how long placing takes. Budgets below a chain's least feasible one are reported
// as errors that say where it lies (ResNet-18's large overheads put it at 94%). Counters: `ratio` =
// arena / lower bound, `fits` = 1 when the arena is within the budget the schedule was solved for
// (remat::plan solves again lower when it is not).
//
// Chains: ResNet-18 as measured by Rockmate (shared/data/chains/resnet18-rockmate.json, its
// memory slots read as MiB), and ResNet-50 and GPT-2 small from remat's zoo.
#include <remat/memory_plan.hpp>
#include <remat/solve.hpp>
#include <remat/zoo.hpp>

#include <benchmark/benchmark.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace {

remat::chain resnet18_rockmate() {
  // forward ms, backward ms, output, tape, forward overhead, backward overhead (slots)
  const remat::stage stages[] = {
      {1.666517, 3.013461, 100, 100, 1, 100},  {1.624139, 2.518475, 101, 101, 0, 301},
      {1.07984, 3.725536, 25, 75, 0, 151},     {5.972171, 6.625163, 26, 101, 149, 127},
      {5.972171, 6.625163, 26, 101, 149, 127}, {3.952395, 4.894112, 13, 63, 78, 78},
      {2.773184, 2.633045, 13, 51, 78, 66},    {3.658699, 4.100064, 7, 32, 47, 47},
      {2.464523, 2.643435, 7, 26, 47, 41},     {3.545952, 5.399776, 4, 16, 55, 63},
      {2.872235, 3.379168, 4, 13, 55, 60},     {0.226453, 0.345557, 1, 1, 0, 4},
      {0.221429, 0.511968, 1, 1, 1, 3}};
  constexpr remat::size_type mib = remat::size_type{1} << 20;
  remat::chain c;
  for (remat::stage s : stages) {
    s.output_size *= mib;
    s.tape_size *= mib;
    s.forward_overhead *= mib;
    s.backward_overhead *= mib;
    c.stages.push_back(s);
  }
  return c;
}

struct solved {
  remat::chain chain;
  remat::size_type budget = 0;
  remat::solve_result result;
  std::string infeasible;  // why not, when it is not
};

void arena_ratio(benchmark::State& state, const std::shared_ptr<const solved>& s) {
  if (!s->result.feasible) {
    state.SkipWithError(s->infeasible.c_str());
    return;
  }
  remat::memory_plan m;
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the loop idiom
    m = remat::make_memory_plan(s->chain, s->result.schedule, {.alignment = 256});
    benchmark::DoNotOptimize(m.arena_bytes);
  }
  constexpr double mib = 1 << 20;
  state.counters["ratio"] = m.ratio();
  state.counters["arena_MiB"] = static_cast<double>(m.arena_bytes) / mib;
  state.counters["bound_MiB"] = static_cast<double>(m.lower_bound) / mib;
  state.counters["ops"] = static_cast<double>(m.steps.size());
  state.counters["fits"] = m.arena_bytes <= s->budget ? 1 : 0;
}

const bool registered = [] {
  const std::vector<std::pair<std::string, remat::chain>> chains = {
      {"resnet18-rockmate", resnet18_rockmate()},
      {"resnet50", remat::zoo::build("resnet50").chain},
      {"gpt2-small", remat::zoo::build("gpt2-small").chain},
  };
  for (const auto& [name, c] : chains) {
    const remat::size_type store_all =
        remat::solve(c, remat::max_size, {.solver = remat::solver::store_all}).min_feasible_budget;
    for (const int percent : {30, 40, 50, 60, 70, 80, 90, 95, 100}) {
      auto s = std::make_shared<solved>();
      s->chain = c;
      s->budget = store_all / 100 * percent;
      s->result = remat::solve(c, s->budget);
      char why[96];
      std::snprintf(why, sizeof why, "infeasible: the least budget is %.1f%% of store-all",
                    100.0 * static_cast<double>(s->result.min_feasible_budget) /
                        static_cast<double>(store_all));
      s->infeasible = why;
      benchmark::RegisterBenchmark(
          ("arena_ratio/" + name + "/" + std::to_string(percent) + "%").c_str(),
          [s](benchmark::State& state) { arena_ratio(state, s); })
          ->Unit(benchmark::kMicrosecond);
    }
  }
  return true;
}();

}  // namespace
