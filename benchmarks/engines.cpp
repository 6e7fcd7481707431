// The DP engines on their own, at the rates that detail/dp/tuning.hpp's constants are read from:
// each benchmark's `*_per_s` counter is the measured rate of the work unit its estimate counts.
// benchmarks/README.md, "bench_engines". The only benchmark that reaches into `remat::detail`:
// these are the engines behind one dispatch, not an API.
//
// * `least_memory/<L>`: the least-memory DP of every solve, in doubles (`pairs_per_s`: the
//   (interval, split) pairs of `need_dp_pairs`; tuning: `need_pairs_per_second`).
// * `least_peak/<L>`: min-memory's least-peak DP, in integers, with its schedules' times
//   (`pairs_per_s`; tuning: `exact_need_pairs_per_second`).
// * `dense/<L>`: the dense DP on 500 slots at 30% of store-all, bounds included
//   (`triples_per_s`; tuning: `dense_triples_per_second`, its growth with L).
// * `dense_checkpoint_only/<L>`: the same without the tape branch (`dense_growth_cap_...`).
// * `dense_threads/<L>`: the dense DP on two threads (the tiles' side, dense_tile.hpp), and
//   `dense/1000`, the largest table (the huge-page allocator, platform.hpp).
// * `frontier/<chain>`: the whole frontier DP (`work_per_s`; tuning: `frontier_work_per_second`).
// * `search/<chain>/<percent>`: branch and bound at one budget, its lower bounds' DP included
//   (`work_per_s`: branches looked at over the whole time, bounds included, so below the rate of
//   the search alone that `search_work_per_second` is).
//
// One thread, process CPU time.
//
//   cmake --build --preset release --target bench_engines && build/release/benchmarks/bench_engines
#include <remat/detail/dp/cost.hpp>
#include <remat/detail/dp/discretize.hpp>
#include <remat/detail/dp/engines/dense.hpp>
#include <remat/detail/dp/engines/frontier.hpp>
#include <remat/detail/dp/engines/search.hpp>
#include <remat/detail/dp/least_memory.hpp>
#include <remat/detail/dp/model.hpp>
#include <remat/solve.hpp>
#include <remat/zoo.hpp>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <utility>

namespace {

namespace dp = remat::detail;
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

size_type budget_at(const remat::chain& c, std::int64_t percent) {
  return remat::solve(c, remat::max_size, {.solver = remat::solver::store_all})
             .min_feasible_budget /
         100 * percent;
}

// A rate counter: `units` a second of the measured CPU time.
benchmark::Counter per_second(double units, const benchmark::State& state) {
  return {units * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate};
}

void least_memory(benchmark::State& state) {
  const dp::model md = dp::make_model(synthetic_chain(state.range(0)), 1);
  for (auto _ : state) benchmark::DoNotOptimize(dp::persistent_need(md).data());
  state.counters["pairs_per_s"] = per_second(dp::need_dp_pairs(md.L), state);
}

void least_peak(benchmark::State& state) {
  const dp::model md = dp::make_model(synthetic_chain(state.range(0)), 1);
  for (auto _ : state) benchmark::DoNotOptimize(dp::least_peak_dp(md).need.data());
  state.counters["pairs_per_s"] = per_second(dp::need_dp_pairs(md.L), state);
}

void dense(benchmark::State& state, dp::dp_branches branches) {
  const remat::chain c = synthetic_chain(state.range(0));
  const dp::discretization d = dp::discretize(budget_at(c, 30), remat::rotor_slots);
  const dp::model md = dp::make_model(c, d.unit);
  const size_type M = d.budget - md.x[0];
  double triples = 0;
  for (auto _ : state) {
    dp::interval_bounds b =
        dp::make_interval_bounds(md, dp::persistent_need(md, branches), branches);
    triples = dp::main_dp_triples(b, md.L, M);
    dp::dense_layout layout = dp::make_dense_layout(b, md.L, M);
    const dp::dense_table t = dp::dense_dp(md, std::move(b), std::move(layout), M, branches, 1);
    benchmark::DoNotOptimize(t.get(0, md.L, M));
  }
  state.counters["triples_per_s"] = per_second(triples, state);
}

remat::chain chain_named(const std::string& name) {
  if (name.rfind("synthetic-", 0) == 0) return synthetic_chain(std::stoll(name.substr(10)));
  return remat::zoo::build(name).chain;
}

void frontier(benchmark::State& state, const std::string& name) {
  const dp::model md = dp::make_model(chain_named(name), 1);
  double work = 0;
  for (auto _ : state) {
    const dp::frontier_table t = dp::frontier_dp(md, {}, {});
    work = t.work;
    benchmark::DoNotOptimize(t.root().data());
  }
  state.counters["work_per_s"] = per_second(work, state);
}

void search(benchmark::State& state, const std::string& name, std::int64_t percent) {
  const remat::chain c = chain_named(name);
  const dp::model md = dp::make_model(c, 1);
  const size_type m = budget_at(c, percent) - md.x[0];
  constexpr auto branches = dp::dp_branches::tape_and_checkpoint;
  const dp::interval_bounds b =
      dp::make_interval_bounds(md, dp::persistent_need(md, branches), branches);
  double work = 0;
  bool complete = false;
  for (auto _ : state) {
    const dp::search_result r = dp::search_dp_within(md, b, m, branches, 1, 1e9, 1e12);
    work = r.work;
    complete = r.complete;
    benchmark::DoNotOptimize(r.value);
  }
  state.counters["work_per_s"] = per_second(work, state);
  state.counters["complete"] = complete ? 1 : 0;
}

template <class... Args>
void add(const std::string& name, Args&&... args) {
  benchmark::RegisterBenchmark(name.c_str(), std::forward<Args>(args)...)
      ->MeasureProcessCPUTime()
      ->Unit(benchmark::kMillisecond);
}

[[maybe_unused]] const int registered = [] {
  auto* need = benchmark::RegisterBenchmark("least_memory", least_memory);
  auto* peak = benchmark::RegisterBenchmark("least_peak", least_peak);
  for (const std::int64_t L : {100, 200, 500}) {
    need->Arg(L);
    peak->Arg(L);
  }
  need->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond);
  peak->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond);
  auto* d = benchmark::RegisterBenchmark("dense", dense, dp::dp_branches::tape_and_checkpoint);
  auto* dc = benchmark::RegisterBenchmark("dense_checkpoint_only", dense,
                                          dp::dp_branches::checkpoint_only);
  for (const std::int64_t L : {50, 100, 200, 500}) {
    d->Args({L, 1});
    dc->Args({L, 1});
  }
  d->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("dense", dense, dp::dp_branches::tape_and_checkpoint)
      ->Args({1000, 1})
      ->Iterations(1)
      ->MeasureProcessCPUTime()
      ->Unit(benchmark::kMillisecond);
  dc->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("dense_threads", dense, dp::dp_branches::tape_and_checkpoint)
      ->Args({200, 2})
      ->Args({500, 2})
      ->MeasureProcessCPUTime()
      ->Unit(benchmark::kMillisecond);
  for (const char* name : {"resnet101", "densenet121", "gpt2-large", "synthetic-100"})
    add("frontier/" + std::string(name), frontier, std::string(name));
  for (const char* name : {"resnet101", "resnet152", "resnet1001"})
    for (const std::int64_t percent : {30, 50})
      add("search/" + std::string(name) + "/" + std::to_string(percent), search, std::string(name),
          percent);
  return 0;
}();

}  // namespace
