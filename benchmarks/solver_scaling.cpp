// How the solvers scale, through the public API only (`remat::solve`, `trade_off`,
// `estimate_solve`): what a user's call costs. benchmarks/README.md, "bench_solver_scaling".
//
// Chains: `synthetic-<L>`, L stages with a fixed seed whose sizes share no common factor
// (activations of 0.5 to 2 MB, tapes three times that, overheads; forward times 1 to 3, backward
// twice that), and the networks of the zoo. Budgets are shares of store-all's peak.
//
// * `default/<chain>/<percent>`: the default solve (`auto_slots`) as `remat-solve --budget` runs
//   it, set against the 500-slot solve of the same budget, timed in the same process before it
//   (counters `slots500_ms`, the best of three; `time_ratio`, default over 500 slots;
//   `makespan_ratio`, the default's makespan over the 500-slot one's, never above 1; `exact`, 1
//   where the default's result is the exact optimum; `makespan_loss` and `memory_loss`, its
//   bounds, where it is not; `est_s` and `est_bytes`, what `estimate_solve_at` said it would
//   spend, which the default's limits, tuning.hpp `default_exact_seconds` and
//   `default_exact_bytes`, are set above).
// * `exact/<chain>/<percent>`: the forced exact solve (`--slots exact`, no time limit).
// * `curve/<chain>`: the whole exact trade-off curve (`remat::trade_off`), with `est_s`, the
//   estimate `remat::estimate_solve` made before it.
// * `solve/<solver>` against L, and `zoo/<network>/<solver>`: every solver but the exhaustive
//   search at 30% of store-all, the DP solvers with 500 slots.
// * `slots/<N>`: the 200-stage chain at 30% with N slots (counter `makespan`).
//
// Times are process CPU time, threads included (one thread unless a name says otherwise). Every
// solve runs once untimed first: a VM may charge the first touch of memory not used lately.
//
//   cmake --preset release && cmake --build --preset release --target bench_solver_scaling
//   build/release/benchmarks/bench_solver_scaling --benchmark_filter='^default/'
#include <remat/estimate.hpp>
#include <remat/solve.hpp>
#include <remat/trade_off.hpp>
#include <remat/zoo.hpp>

#include "solve_seconds.hpp"
#include "store_all.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

using remat::size_type;

remat::chain synthetic_chain(std::int64_t length) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<size_type> size(500000, 2000000);
  remat::chain c;
  c.input_size = 1000000;
  for (std::int64_t k = 0; k < length; ++k) {
    remat::stage s;
    s.output_size = size(rng);
    s.tape_size = 3 * s.output_size;
    s.forward_overhead = s.output_size;
    s.backward_overhead = 2 * s.output_size;
    s.forward_time = 1.0 + static_cast<double>(rng() % 100) / 50;
    s.backward_time = 2 * s.forward_time;
    c.stages.push_back(s);
  }
  return c;
}

// "synthetic-<L>" or a zoo network's name.
remat::chain chain_named(const std::string& name) {
  if (name.rfind("synthetic-", 0) == 0) return synthetic_chain(std::stoll(name.substr(10)));
  return remat::zoo::build(name).chain;
}

size_type budget_at(const remat::chain& c, std::int64_t percent) {
  return bench::store_all_peak(c) / 100 * percent;
}

constexpr double no_limit = std::numeric_limits<double>::infinity();

// Process CPU time of one solve, as the benchmarks measure theirs.
void default_solve(benchmark::State& state, const std::string& name, std::int64_t percent) {
  const remat::chain c = chain_named(name);
  const size_type budget = budget_at(c, percent);
  const remat::solve_options slots{.slots = remat::rotor_slots, .max_estimated_seconds = no_limit};
  const remat::solve_options automatic{.max_estimated_seconds = no_limit};
  const remat::solve_result s = remat::solve(c, budget, slots);
  double slots_seconds = no_limit;
  for (int k = 0; k < 3; ++k)
    slots_seconds = std::min(slots_seconds, bench::solve_seconds(c, budget, slots));
  remat::solve_result r = remat::solve(c, budget, automatic);  // warm-up
  for (auto _ : state) {
    r = remat::solve(c, budget, automatic);
    benchmark::DoNotOptimize(r.schedule.makespan);
  }
  state.counters["slots500_ms"] = 1e3 * slots_seconds;
  // (CPU time per iteration) / slots_seconds: a rate of iterations * slots_seconds, inverted.
  state.counters["time_ratio"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * slots_seconds,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["makespan_ratio"] = s.feasible ? r.schedule.makespan / s.schedule.makespan : 0;
  state.counters["exact"] = r.exact ? 1 : 0;
  state.counters["memory_loss"] = r.memory_loss;
  state.counters["makespan_loss"] = r.makespan_loss;
  const remat::solve_estimate e = remat::estimate_solve_at(c, budget, automatic);
  state.counters["est_s"] = e.seconds;
  state.counters["est_bytes"] = e.bytes;
}

// The offload solve (PCIe 5.0 x16: 47 and 55 GB/s, as bytes per ms, the zoo's units) beside the
// recompute-only default solve at the same budget: its time, and the makespans' ratio.
void offload_solve(benchmark::State& state, const std::string& name, std::int64_t percent) {
  remat::chain c = chain_named(name);
  c.transfer = {47e6, 55e6};
  const size_type budget = budget_at(c, percent);
  const remat::solve_options recompute{.max_estimated_seconds = no_limit};
  const remat::solve_options o{.solver = remat::solver::offload, .max_estimated_seconds = no_limit};
  double recompute_seconds = no_limit;
  for (int k = 0; k < 3; ++k)
    recompute_seconds = std::min(recompute_seconds, bench::solve_seconds(c, budget, recompute));
  const remat::solve_result base = remat::solve(c, budget, recompute);
  remat::solve_result r = remat::solve(c, budget, o);  // warm-up
  for (auto _ : state) {
    r = remat::solve(c, budget, o);
    benchmark::DoNotOptimize(r.schedule.makespan);
  }
  state.counters["recompute_ms"] = 1e3 * recompute_seconds;
  state.counters["makespan_ratio"] =
      r.feasible && base.feasible ? r.schedule.makespan / base.schedule.makespan : 0;
  state.counters["feasible"] = r.feasible ? 1 : 0;
}

void exact_solve(benchmark::State& state, const std::string& name, std::int64_t percent) {
  const remat::chain c = chain_named(name);
  const size_type budget = budget_at(c, percent);
  const remat::solve_options o{.slots = remat::exact_units, .max_estimated_seconds = no_limit};
  benchmark::DoNotOptimize(remat::solve(c, budget, o).schedule.makespan);  // warm-up
  for (auto _ : state) benchmark::DoNotOptimize(remat::solve(c, budget, o).schedule.makespan);
}

void curve(benchmark::State& state, const std::string& name) {
  const remat::chain c = chain_named(name);
  const remat::solve_options o{.max_estimated_seconds = no_limit};
  const remat::solve_estimate e = remat::estimate_solve(c, o);
  std::size_t points = 0;
  for (auto _ : state) {
    const remat::trade_off_result t = remat::trade_off(c, o);
    points = t.points.size();
    benchmark::DoNotOptimize(t.points.data());
  }
  state.counters["points"] = static_cast<double>(points);
  state.counters["est_s"] = e.seconds;
}

void solve_synthetic(benchmark::State& state, remat::solver which) {
  const remat::chain c = synthetic_chain(state.range(0));
  const size_type budget = budget_at(c, 30);
  const remat::solve_options o{.solver = which, .slots = remat::rotor_slots};
  for (auto _ : state) benchmark::DoNotOptimize(remat::solve(c, budget, o).schedule.makespan);
  state.SetComplexityN(state.range(0));
}

void solve_zoo(benchmark::State& state, const std::string& model, remat::solver which) {
  const remat::chain c = remat::zoo::build(model).chain;
  const size_type budget = budget_at(c, 30);
  const remat::solve_options o{.solver = which, .slots = remat::rotor_slots};
  for (auto _ : state) benchmark::DoNotOptimize(remat::solve(c, budget, o).schedule.makespan);
  state.counters["stages"] = static_cast<double>(c.length());
}

void slots_200(benchmark::State& state) {
  const remat::chain c = synthetic_chain(200);
  const size_type budget = budget_at(c, 30);
  const remat::solve_options o{.slots = state.range(0)};
  remat::solve_result r;
  for (auto _ : state) {
    r = remat::solve(c, budget, o);
    benchmark::DoNotOptimize(r.schedule.ops.data());
  }
  state.counters["makespan"] = r.schedule.makespan;
  state.SetComplexityN(state.range(0));
}

template <class... Args>
void add(const std::string& name, Args&&... args) {
  benchmark::RegisterBenchmark(name.c_str(), std::forward<Args>(args)...)
      ->MeasureProcessCPUTime()
      ->Unit(benchmark::kMillisecond);
}

[[maybe_unused]] const int registered = [] {
  std::vector<std::string> chains;
  for (const std::string_view m : remat::zoo::model_names) chains.emplace_back(m);
  for (const char* s : {"synthetic-200", "synthetic-500", "synthetic-1000"}) chains.emplace_back(s);
  for (const std::string& name : chains)
    for (const std::int64_t percent : {30, 50})
      add("default/" + name + "/" + std::to_string(percent), default_solve, name, percent);
  for (const std::string& name : chains) {
    if (name == "synthetic-500" || name == "synthetic-1000") continue;  // past this machine
    add("exact/" + name + "/30", exact_solve, name, std::int64_t{30});
  }
  for (const std::string& name : chains) {
    if (name == "synthetic-500" || name == "synthetic-1000" || name == "resnet1001") continue;
    for (const std::int64_t percent : {30, 50})
      add("offload/" + name + "/" + std::to_string(percent), offload_solve, name, percent);
  }
  for (const std::string& name : chains)
    if (name.rfind("synthetic-", 0) != 0 && name != "resnet1001") add("curve/" + name, curve, name);

  for (const remat::solver s : remat::all_solvers) {
    // (offload/ above measures the solvers that use a link.)
    if (s == remat::solver::exhaustive || s == remat::solver::offload || remat::needs_link(s))
      continue;
    const std::string name = "solve/" + std::string(remat::name(s));
    auto* b = benchmark::RegisterBenchmark(name.c_str(), solve_synthetic, s);
    // The DP solvers are O(L^3 M): up to 500 stages; the others up to 1000.
    const bool dp = s == remat::solver::optimal || s == remat::solver::checkpoint_only;
    for (const std::int64_t length : {10, 20, 50, 100, 200, 500, 1000})
      if (!dp || length <= 500) b->Arg(length);
    b->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond)->Complexity();
    for (const char* model : {"resnet1001", "gpt2-xl"})
      add("zoo/" + std::string(model) + "/" + std::string(remat::name(s)), solve_zoo,
          std::string(model), s);
  }
  auto* slots = benchmark::RegisterBenchmark("slots", slots_200);
  for (const std::int64_t n : {100, 250, 500, 1000, 2000}) slots->Arg(n);
  slots->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond)->Complexity();
  return 0;
}();

}  // namespace
