// The optimal solver with K micro-batches in flight (docs/pipelines.md) against K = 1, on the
// zoo's chains. benchmarks/README.md, "bench_in_flight".
//
// `in_flight/<network>/K<K>/<percent>`: the default solve with `in_flight` = K at the budget
// least_K + percent% of (store-all's need with K - least_K), least_K being the least budget with K
// in flight. Counters: `k1_ms`, the K = 1 solve at the same point of its own range (least_1 +
// percent% of (store-all's peak - least_1)), the best of three: the DP a K = 1 solve runs there
// (at the K budget itself it is mostly settled by store-all); `time_ratio`, the K solve's time
// over it; `makespan_ratio`, the K schedule's makespan over the K = 1 one's at the same budget
// (what holding K - 1 others' retained memory costs); `retained_share`, the K schedule's
// retained memory over the budget; `exact`, 1 where the result is the exact optimum.
//
// Times are process CPU time; every solve runs once untimed first.
//
//   cmake --preset release && cmake --build --preset release --target bench_in_flight
//   bash benchmarks/run.sh in_flight
#include <remat/solve.hpp>
#include <remat/zoo.hpp>

#include "solve_seconds.hpp"
#include "store_all.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace {

using remat::size_type;

void in_flight(benchmark::State& state, const std::string& name, std::size_t K,
               std::int64_t percent) {
  const remat::chain c = remat::zoo::build(name).chain;
  const remat::replay_result all =
      remat::simulate(c, remat::detail::store_all_ops(static_cast<std::int32_t>(c.length())));
  const size_type top = all.peak_memory + static_cast<size_type>(K - 1) * all.retained;
  const size_type least = remat::solve(c, 0, {.in_flight = K}).min_feasible_budget;
  const size_type budget = least + (top - least) / 100 * percent;
  const remat::solve_options one{};
  const remat::solve_options several{.in_flight = K};
  const size_type least_one = remat::solve(c, 0).min_feasible_budget;
  const size_type budget_one = least_one + (all.peak_memory - least_one) / 100 * percent;
  double one_seconds = std::numeric_limits<double>::infinity();
  for (int k = 0; k < 3; ++k)
    one_seconds = std::min(one_seconds, bench::solve_seconds(c, budget_one, one));
  const remat::solve_result base = remat::solve(c, budget, one);
  remat::solve_result r = remat::solve(c, budget, several);  // warm-up
  for (auto _ : state) {
    r = remat::solve(c, budget, several);
    benchmark::DoNotOptimize(r.schedule.makespan);
  }
  state.counters["k1_ms"] = 1e3 * one_seconds;
  state.counters["time_ratio"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * one_seconds,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["makespan_ratio"] =
      r.feasible && base.feasible ? r.schedule.makespan / base.schedule.makespan : 0;
  state.counters["retained_share"] =
      r.feasible ? static_cast<double>(r.retained) / static_cast<double>(budget) : 0;
  state.counters["exact"] = r.exact ? 1 : 0;
}

const int registered = [] {
  for (const char* name : {"gpt2-small", "gpt2-medium", "resnet50", "resnet152", "densenet121"})
    for (const std::size_t K : {std::size_t{2}, std::size_t{4}, std::size_t{8}})
      for (const std::int64_t percent : {20, 50, 80})
        benchmark::RegisterBenchmark(("in_flight/" + std::string(name) + "/K" + std::to_string(K) +
                                      "/" + std::to_string(percent))
                                         .c_str(),
                                     in_flight, std::string(name), K, percent)
            ->MeasureProcessCPUTime()
            ->Unit(benchmark::kMillisecond);
  return 0;
}();

}  // namespace
