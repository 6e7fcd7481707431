// What the host executor itself costs per op, with callbacks that do nothing; and what planning
// the memory of a schedule costs.
//
// The schedule: the optimal one for a 64-stage chain at a third of store-all's memory, so that
// most activations are recomputed (several hundred ops). Counter `per_op`: time per op.
#include <remat/host_executor.hpp>
#include <remat/memory_plan.hpp>
#include <remat/solve.hpp>

#include <benchmark/benchmark.h>

#include <cstddef>

namespace {

remat::chain uniform_chain() {
  remat::chain c;
  c.input_size = 256;
  c.stages.assign(64, remat::stage{1, 2, 256, 512, 128, 256});
  return c;
}

const remat::schedule& recomputing_schedule() {
  static const remat::schedule s = [] {
    const remat::chain c = uniform_chain();
    const remat::size_type store_all =
        remat::solve(c, remat::max_size, {.solver = remat::solver::store_all}).min_feasible_budget;
    return remat::solve(c, store_all / 3).schedule;
  }();
  return s;
}

// Touches nothing; DoNotOptimize keeps the calls and their arguments from being optimized away.
struct empty_callbacks {
  void forward(const remat::forward_call& f) {
    benchmark::DoNotOptimize(f.input.data());
    benchmark::DoNotOptimize(f.output.data());
  }
  void backward(const remat::backward_call& b) {
    benchmark::DoNotOptimize(b.input.data());
    benchmark::DoNotOptimize(b.input_gradient.data());
  }
  void loss(const remat::loss_call& l) { benchmark::DoNotOptimize(l.input_gradient.data()); }
};

void per_op(benchmark::State& state, std::size_t ops) {
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["per_op"] =
      benchmark::Counter(static_cast<double>(ops), benchmark::Counter::kIsIterationInvariantRate |
                                                       benchmark::Counter::kInvert);
}

void run(benchmark::State& state, remat::host_executor_options options) {
  const remat::schedule& s = recomputing_schedule();
  remat::host_executor ex(remat::make_memory_plan(uniform_chain(), s), options);
  empty_callbacks callbacks;
  for (auto _ : state) ex.run(callbacks);
  per_op(state, s.ops.size());
}

void BM_host_executor_empty_callbacks(benchmark::State& state) {
  run(state, {});
}
BENCHMARK(BM_host_executor_empty_callbacks);

// Poisoning writes every freed byte: here 256-512 bytes per buffer.
void BM_host_executor_poison(benchmark::State& state) {
  run(state, {.poison = true});
}
BENCHMARK(BM_host_executor_poison);

// The debug mode: a heap allocation and a free per buffer.
void BM_host_executor_separate_allocations(benchmark::State& state) {
  run(state, {.separate_allocations = true});
}
BENCHMARK(BM_host_executor_separate_allocations);

void BM_make_memory_plan(benchmark::State& state) {
  const remat::chain c = uniform_chain();
  const remat::schedule& s = recomputing_schedule();
  for (auto _ : state) benchmark::DoNotOptimize(remat::make_memory_plan(c, s, {.alignment = 256}));
  per_op(state, s.ops.size());
}
BENCHMARK(BM_make_memory_plan)->Unit(benchmark::kMicrosecond);

}  // namespace
