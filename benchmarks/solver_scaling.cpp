// How the solvers scale with the chain length L and the slot count: the fast optimal DP (what
// `solve` runs), the straightforward reference DP it replaced at run time, the whole `solve`
// call, and every baseline but the exhaustive search.
//
// Chains: a synthetic heterogeneous chain of L stages with a fixed seed (activations of 0.5 to
// 2 MB, tapes three times that, overheads; forward times 1 to 3, backward twice that), and two
// networks of the zoo (resnet1001: 335 stages, gpt2-xl: 50). The budget is 30% of store-all's peak,
// where most activations are recomputed.
//
// `exact/...`: the exact solve (the frontier DP on the chain's own sizes, every budget at once)
// against the 500-slot DP on every zoo network and the synthetic chains of 200, 500 and 1000
// stages, one thread: the frontier DP alone (`exact/dp/`, with its frontiers' sizes and bytes,
// and `remat::estimate_solve`'s estimate made before it, to compare with the time measured),
// the whole exact `solve` (`exact/solve/`) and the whole 500-slot `solve` (`exact/slots500/`,
// with its table's bytes). Where the exact DP would not fit this machine (500 and 1000 stages)
// only its estimate is given (`exact/estimate/`). `exact/at/<chain>/<percent>/search|frontier|
// forced`: the solve at one budget with default limits, as `solve` runs it (searching where the
// frontier DP would cost more than twice the search's lower bounds), without the search, or
// searching first whatever the costs (`forced`, on the chains where the weighing decides).
//
// Times are process CPU time (`MeasureProcessCPUTime`, threads included): the machine may be
// shared. The `exact/` solves run once untimed first: on the development machine (a VM) memory
// not used lately costs about 10 ms per 2 MiB at its first touch, so the first of several solves
// in a row paid up to 1.5 s of system time on resnet1001, whichever came first. Counters:
// `table_bytes`, the DP table the solve allocates; `peak_rss`, the process's peak resident memory
// so far (getrusage), meaningful for the largest case, which runs first in its own family.
// Reproduce (see benchmarks/README-scaling.md):
//
//   cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release
//   ninja -C build-bench bench_solver_scaling && build-bench/benchmarks/bench_solver_scaling
#include <remat/estimate.hpp>
#include <remat/solve.hpp>
#include <remat/zoo.hpp>

#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <sys/resource.h>

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

size_type store_all_peak(const remat::chain& c) {
  return remat::solve(c, remat::max_size, {.solver = remat::solver::store_all}).min_feasible_budget;
}

size_type budget_of(const remat::chain& c) {
  return store_all_peak(c) / 10 * 3;
}

double peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) * 1024;
}

// The DP's input for a chain, a budget and a slot count, as `solve_persistent` builds it.
struct dp_input {
  remat::detail::model md;
  size_type M = 0;
};

dp_input dp_input_of(const remat::chain& c, size_type budget, size_type slots) {
  const remat::detail::discretization d = remat::detail::discretize(budget, slots);
  dp_input in{remat::detail::make_model(c, d.unit), 0};
  const size_type store_all =
      remat::simulate(remat::detail::to_chain(in.md), remat::store_all_ops(in.md.L)).peak_memory;
  in.M = std::min(d.budget, store_all) - in.md.x[0];
  return in;
}

// Times the fast DP's table for `in`, bounds included (what `solve` runs after the least feasible
// budget); counters `table_bytes` and `M`.
void time_fast_dp(benchmark::State& state, const dp_input& in, unsigned threads) {
  double bytes = 0;
  for (auto _ : state) {
    remat::detail::interval_bounds b =
        remat::detail::make_interval_bounds(in.md, remat::detail::persistent_need(in.md),
                                            remat::detail::dp_branches::tape_and_checkpoint);
    remat::detail::fast_layout layout = remat::detail::make_fast_layout(b, in.md.L, in.M);
    bytes = remat::detail::fast_table_bytes(layout, in.md.L, in.M, threads);
    const remat::detail::fast_table t =
        remat::detail::optimal_dp_fast(in.md, std::move(b), std::move(layout), in.M,
                                       remat::detail::dp_branches::tape_and_checkpoint, threads);
    benchmark::DoNotOptimize(t.get(0, in.md.L, in.M));
  }
  state.counters["table_bytes"] = bytes;
  state.counters["M"] = static_cast<double>(in.M);
}

// The fast DP against the chain length (and threads).
void fast_dp(benchmark::State& state) {
  const remat::chain c = synthetic_chain(state.range(0));
  time_fast_dp(state, dp_input_of(c, budget_of(c), state.range(1)),
               static_cast<unsigned>(state.range(2)));
  state.counters["peak_rss"] = peak_rss_bytes();
  state.SetComplexityN(state.range(0));
}

// The reference DP: m outermost, then intervals, a scan over j per cell.
void reference_dp(benchmark::State& state) {
  const remat::chain c = synthetic_chain(state.range(0));
  const dp_input in = dp_input_of(c, budget_of(c), state.range(1));
  for (auto _ : state) {
    const remat::detail::optimal_table t = remat::detail::optimal_dp_reference(in.md, in.M);
    benchmark::DoNotOptimize(t.value.data());
  }
  state.counters["table_bytes"] = static_cast<double>(remat::detail::interval_count(in.md.L)) *
                                  static_cast<double>(in.M + 1) *
                                  static_cast<double>(sizeof(double) + sizeof(std::int32_t));
  state.counters["M"] = static_cast<double>(in.M);
  state.SetComplexityN(state.range(0));
}

// `remat::solve` with one solver: discretization, least feasible budget, table, schedule.
void solve_synthetic(benchmark::State& state, remat::solver which) {
  const remat::chain c = synthetic_chain(state.range(0));
  const size_type budget = budget_of(c);
  const remat::solve_options options{.solver = which, .slots = state.range(1)};
  for (auto _ : state) benchmark::DoNotOptimize(remat::solve(c, budget, options).plan.makespan);
  state.SetComplexityN(state.range(0));
}

void solve_zoo(benchmark::State& state, const std::string& model, remat::solver which) {
  const remat::chain c = remat::zoo::build(model).chain;
  const size_type budget = budget_of(c);
  const remat::solve_options options{.solver = which, .slots = state.range(0)};
  for (auto _ : state) benchmark::DoNotOptimize(remat::solve(c, budget, options).plan.makespan);
  state.counters["stages"] = static_cast<double>(c.length());
}

// Slots scaling of the fast DP at L = 200 (complexity in the slot count).
void fast_dp_slots(benchmark::State& state) {
  const remat::chain c = synthetic_chain(200);
  time_fast_dp(state, dp_input_of(c, budget_of(c), state.range(0)), 1);
  state.SetComplexityN(state.range(0));
}

// The whole optimal solve of the 200-stage synthetic chain against the slot count, with what the
// rounding costs: `waste`, the fraction of the budget the schedule's peak loses to rounding
// (its peak in units times the unit, less its peak in bytes, plus the budget's remainder below a
// whole unit); `makespan` to compare with more slots.
void optimal_slots(benchmark::State& state) {
  const remat::chain c = synthetic_chain(200);
  const size_type budget = budget_of(c);
  const remat::solve_options options{.slots = state.range(0)};
  remat::solve_result r;
  for (auto _ : state) {
    r = remat::solve(c, budget, options);
    benchmark::DoNotOptimize(r.plan.ops.data());
  }
  const remat::detail::model md = remat::detail::make_model(c, r.unit);
  const size_type units_peak =
      remat::simulate(remat::detail::to_chain(md), r.plan.ops).peak_memory * r.unit;
  const size_type usable = budget / r.unit * r.unit;
  state.counters["waste"] =
      static_cast<double>(units_peak - r.plan.peak_memory + (budget - usable)) /
      static_cast<double>(budget);
  state.counters["makespan"] = r.plan.makespan;
  state.SetComplexityN(state.range(0));
}

// The chain of an `exact/` benchmark: "synthetic-<L>" or a zoo network's name.
remat::chain exact_chain(const std::string& name) {
  if (name.rfind("synthetic-", 0) == 0) return synthetic_chain(std::stoll(name.substr(10)));
  return remat::zoo::build(name).chain;
}

// The exact solve's frontier DP alone, one thread, no limits. Counters: `root` and `mean` (points
// of the root's frontier and of the distinct frontiers), `bytes` (the frontiers' points at 20
// bytes and the 16 bytes per interval of their classes), `work` (its work units) and `est_s`,
// the seconds `estimate_solve` (probe of 0.05 s) gave before, to set against the time measured.
void exact_dp(benchmark::State& state, const std::string& name) {
  const remat::chain c = exact_chain(name);
  const remat::detail::model md = remat::detail::make_model(c, 1);
  remat::detail::interval_bounds bounds;
  if (!md.exact_sums)
    bounds = remat::detail::make_interval_bounds(md, {},
                                                 remat::detail::dp_branches::tape_and_checkpoint);
  const remat::solve_estimate e = remat::estimate_solve(c, {.threads = 1});
  remat::detail::frontier_table t;
  for (auto _ : state) {
    t = remat::detail::frontier_dp(md, bounds, {});
    benchmark::DoNotOptimize(t.root().data());
  }
  const auto points = static_cast<double>(t.points());
  state.counters["stages"] = static_cast<double>(c.length());
  state.counters["root"] = static_cast<double>(t.root().size());
  state.counters["mean"] = points / static_cast<double>(t.frontiers.size());
  state.counters["bytes"] = points * remat::detail::frontier_point_bytes +
                            16 * static_cast<double>(remat::detail::interval_count(md.L));
  state.counters["work"] = t.work;
  state.counters["est_s"] = e.seconds;
}

// The whole `solve` at 30% of store-all, one thread: exact (slots 0, no time limit) or 500 slots
// (counter `table_bytes`: the dense DP's table).
void exact_solve(benchmark::State& state, const std::string& name, remat::size_type slots) {
  const remat::chain c = exact_chain(name);
  const size_type budget = budget_of(c);
  const remat::solve_options options{
      .slots = slots,
      .threads = 1,
      .max_estimated_seconds = std::numeric_limits<double>::infinity()};
  benchmark::DoNotOptimize(remat::solve(c, budget, options).plan.makespan);  // warm-up
  for (auto _ : state) benchmark::DoNotOptimize(remat::solve(c, budget, options).plan.makespan);
  if (slots != remat::exact_units) {
    const dp_input in = dp_input_of(c, budget, slots);
    const remat::detail::interval_bounds b =
        remat::detail::make_interval_bounds(in.md, remat::detail::persistent_need(in.md),
                                            remat::detail::dp_branches::tape_and_checkpoint);
    state.counters["table_bytes"] = remat::detail::fast_table_bytes(
        remat::detail::make_fast_layout(b, in.md.L, in.M), in.md.L, in.M, 1);
  }
}

// How `exact_at` chooses between the search and the frontier DP.
enum class at_mode { search, frontier, forced };

// `remat::solve` at one budget as a user calls it (exact, default limits, one thread: `search`,
// branch and bound where the frontier DP would take long), without the search (`frontier`: the
// frontier DP alone, as before 2026-12-03), or with the search first whatever the costs
// (`forced`: the frontier DP only where the search does not finish). `share`: of store-all's
// peak, in percent. Counter `epsilon`: the thinning the solve took (0: exact).
void exact_at(benchmark::State& state, const std::string& name, std::int64_t share, at_mode mode) {
  const remat::chain c = exact_chain(name);
  const size_type budget = store_all_peak(c) / 100 * share;
  const remat::solve_options options{.threads = 1};
  const double switch_work = mode == at_mode::search   ? remat::detail::search_switch_work
                             : mode == at_mode::forced ? 0
                                                       : remat::detail::infinite_time;
  auto run = [&] {
    return remat::detail::solve_exact(c, budget, options, remat::solver::optimal,
                                      remat::detail::dp_branches::tape_and_checkpoint, switch_work);
  };
  remat::solve_result r = run();  // warm-up
  for (auto _ : state) {
    r = run();
    benchmark::DoNotOptimize(r.plan.makespan);
  }
  state.counters["epsilon"] = r.epsilon;
}

// The estimate alone where the exact DP would not fit: `est_s`, `est_bytes`.
void exact_estimate(benchmark::State& state, const std::string& name) {
  const remat::chain c = exact_chain(name);
  remat::solve_estimate e;
  for (auto _ : state) {
    e = remat::estimate_solve(c, {.threads = 1});
    benchmark::ClobberMemory();  // (DoNotOptimize on the double member garbles it, g++ 12 -O3)
  }
  state.counters["est_s"] = e.seconds;
  state.counters["est_bytes"] = e.bytes;
}

void register_exact() {
  std::vector<std::string> exact_names;
  for (const std::string_view m : remat::zoo::model_names) exact_names.emplace_back(m);
  exact_names.emplace_back("synthetic-200");
  for (const std::string& name : exact_names) {
    benchmark::RegisterBenchmark(("exact/dp/" + name).c_str(), exact_dp, name)
        ->MeasureProcessCPUTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("exact/solve/" + name).c_str(), exact_solve, name,
                                 remat::exact_units)
        ->MeasureProcessCPUTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("exact/slots500/" + name).c_str(), exact_solve, name,
                                 remat::size_type{500})
        ->MeasureProcessCPUTime()
        ->Unit(benchmark::kMillisecond);
  }
  const auto at = [](const std::string& name, std::int64_t share, at_mode mode) {
    const char* suffix = mode == at_mode::search     ? "/search"
                         : mode == at_mode::frontier ? "/frontier"
                                                     : "/forced";
    benchmark::RegisterBenchmark(
        ("exact/at/" + name + "/" + std::to_string(share) + suffix).c_str(), exact_at, name, share,
        mode)
        ->MeasureProcessCPUTime()
        ->Unit(benchmark::kMillisecond);
  };
  for (const auto& [name, share] :
       std::vector<std::pair<std::string, std::int64_t>>{{"gpt2-xl", 20},
                                                         {"gpt2-xl", 30},
                                                         {"gpt2-xl", 50},
                                                         {"resnet152", 20},
                                                         {"resnet152", 30},
                                                         {"resnet152", 50},
                                                         {"densenet121", 20},
                                                         {"densenet121", 30},
                                                         {"densenet121", 50},
                                                         {"resnet1001", 30},
                                                         {"synthetic-200", 30}})
    for (const at_mode mode : {at_mode::search, at_mode::frontier}) at(name, share, mode);
  // Where weighing the search's bounds against the frontier DP decides (2026-12-03): resnet101
  // searches (its bounds are cheap), gpt2-large does not (they cost as much as the frontier DP).
  for (const std::string name : {"resnet101", "gpt2-large"})
    for (const std::int64_t share : {30, 50, 70})
      for (const at_mode mode : {at_mode::search, at_mode::frontier, at_mode::forced})
        at(name, share, mode);
  for (const char* name : {"synthetic-500", "synthetic-1000"})
    benchmark::RegisterBenchmark((std::string("exact/estimate/") + name).c_str(), exact_estimate,
                                 std::string(name))
        ->Iterations(1)
        ->MeasureProcessCPUTime()
        ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("exact/slots500/synthetic-500", exact_solve,
                               std::string("synthetic-500"), remat::size_type{500})
      ->Iterations(1)
      ->MeasureProcessCPUTime()
      ->Unit(benchmark::kMillisecond);
}

[[maybe_unused]] const int registered = [] {
  // The largest case first, so that peak_rss is its own.
  benchmark::RegisterBenchmark("fast_dp_large", fast_dp)
      ->Args({1000, 1000, 1})
      ->Args({1000, 1000, 2})
      ->Iterations(1)
      ->MeasureProcessCPUTime()
      ->Unit(benchmark::kMillisecond);
  auto* fast = benchmark::RegisterBenchmark("fast_dp", fast_dp);
  for (const std::int64_t length : {10, 20, 50, 100, 200, 500}) fast->Args({length, 500, 1});
  fast->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond)->Complexity();
  benchmark::RegisterBenchmark("fast_dp_threads", fast_dp)
      ->Args({200, 500, 2})
      ->Args({500, 500, 2})
      ->MeasureProcessCPUTime()
      ->Unit(benchmark::kMillisecond);
  auto* reference = benchmark::RegisterBenchmark("reference_dp", reference_dp);
  for (const std::int64_t length : {10, 20, 50, 100, 200}) reference->Args({length, 500});
  reference->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond)->Complexity();
  auto* slots = benchmark::RegisterBenchmark("fast_dp_slots_L200", fast_dp_slots);
  for (const std::int64_t n : {100, 250, 500, 1000, 2000, 4000}) slots->Arg(n);
  slots->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond)->Complexity();

  auto* solve_slots = benchmark::RegisterBenchmark("optimal_slots_L200", optimal_slots);
  for (const std::int64_t n : {100, 150, 200, 250, 300, 500, 1000, 2000}) solve_slots->Arg(n);
  solve_slots->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond)->Complexity();

  for (const remat::solver s : remat::all_solvers) {
    if (s == remat::solver::exhaustive) continue;
    const std::string name = "solve/" + std::string(remat::name(s));
    auto* b = benchmark::RegisterBenchmark(name.c_str(), solve_synthetic, s);
    // The DP solvers are O(L^3 M): up to 500 stages; the others up to 1000.
    const bool dp = s == remat::solver::optimal || s == remat::solver::checkpoint_only;
    for (const std::int64_t length : {10, 20, 50, 100, 200, 500, 1000})
      if (!dp || length <= 500) b->Args({length, 500});
    b->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond)->Complexity();
    for (const char* model : {"resnet1001", "gpt2-xl"}) {
      const std::string zoo_name = "zoo/" + std::string(model) + "/" + std::string(remat::name(s));
      benchmark::RegisterBenchmark(zoo_name.c_str(), solve_zoo, std::string(model), s)
          ->Arg(500)
          ->MeasureProcessCPUTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  register_exact();
  return 0;
}();

}  // namespace
