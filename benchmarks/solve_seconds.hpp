// The CPU time of one solve, for benchmarks that compare a solve with another one they time
// beside Google Benchmark's own loop.
#pragma once

#include <remat/solve.hpp>

#include <benchmark/benchmark.h>

#include <ctime>

namespace bench {

/// Seconds of process CPU time `remat::solve(c, budget, o)` takes once.
inline double solve_seconds(const remat::chain& c, remat::size_type budget,
                            const remat::solve_options& o) {
  const std::clock_t start = std::clock();
  benchmark::DoNotOptimize(remat::solve(c, budget, o).schedule.makespan);
  return static_cast<double>(std::clock() - start) / CLOCKS_PER_SEC;
}

}  // namespace bench
