// The measured constants of the DP engines and of the dispatch, in one place. Each line says what
// the constant is and which benchmark sets it: `bench_engines` (benchmarks/engines.cpp, the
// engines' rates) or `bench_solver_scaling` (benchmarks/solver_scaling.cpp, the default solve).
// They decide how long an estimate says a solve takes and which engine the dispatch runs; no
// result's correctness depends on them: every engine is exact within its class, and every
// schedule is replayed before it is returned.
#pragma once

#include <remat/chain.hpp>

#include <cstdint>

namespace remat::detail {

struct tuning_constants {
  // Rates, on one core of an optimized build: the work units each estimate counts, per second.
  // The refusals (`max_estimated_seconds`) read these, so they are kept below what the benchmarks
  // measure: an estimate is an upper bound on a machine as fast.
  double need_pairs_per_second = 1.5e8;        // least-memory DP in doubles: `least_memory/*`
  double exact_need_pairs_per_second = 4.0e7;  // least-memory DP in integers: `least_peak/*`
  double dense_triples_per_second = 1.5e9;     // dense DP at 100 stages: `dense/100`
  double frontier_work_per_second = 5e7;       // frontier DP: `frontier/*`
  double search_work_per_second = 3.5e7;       // branch and bound: `search/*`
  // The dense DP's rate grows with the chain (its window answers a larger share of the cells'
  // values in O(1)): as sqrt(L / 100), to at most `dense_growth_cap` times (the rate levels off
  // from about 500 stages: `dense/*`), `dense_growth_cap_checkpoint_only` without the tape branch
  // (`dense_checkpoint_only/*`).
  double dense_growth_cap = 2.5;
  double dense_growth_cap_checkpoint_only = 2;

  // Branch and bound (engines/search.hpp).
  size_type search_slots = 512;            // memories of its lower bounds' DP: `search/*`
  double search_cells_per_interval = 64;   // cells searched an interval before it gives up
  double search_max_rounding_loss = 0.25;  // of m, lost by the bounds' unit: no search above
  std::int32_t search_max_stages = 1000;   // its recursion depth (stack), not a speed

  // The default solve (`auto_slots`, detail/dp/choose.hpp `default_engines`). A schedule is
  // planned once per training run, so the default runs the exact engines, cheapest first, until
  // one finishes, within `default_exact_seconds` (at the estimates' rates, on one thread) and
  // tables of at most `default_exact_bytes`; only past them does it return the 500-slot schedule
  // with its bound. bench_solver_scaling, `default/*` (counters `exact`, `est_s`): the zoo's
  // costliest exact solve (ResNet-1001, 335 stages) is estimated at up to 4.1 s and takes about
  // 1 s, so 10 s keeps every zoo chain exact with room for a slower machine; `synthetic-200` and
  // longer, whose sizes share no factor, are estimated past it and fall back.
  double default_exact_seconds = 10;
  // bench_solver_scaling, `default/*` (counter `est_bytes`): the zoo's largest exact tables are
  // estimated at up to 0.6 GiB (ResNet-1001); 2 GiB leaves that room beside a training run.
  double default_exact_bytes = 2.0 * 1024 * 1024 * 1024;
  // How long the frontier DP runs before its projection is weighed against the other exact
  // engines' estimates, and how many times its lower bounds' DP the search is estimated to take
  // in all (`search/*`, `default/*`).
  double frontier_probe_seconds = 0.001;
  double frontier_probe_share = 0.5;  // of the allowance, at most: the probe leaves the rest
  double search_cost_factor = 2;
  size_type auto_bound_slots = 250;  // memories of the bound's DP (sizes rounded down)

  // The offload solver by default (solvers/offload.hpp, detail/dp/dispatch.hpp `run_spine`): its
  // DP on `rotor_slots` slots, and where the budget is feasible on the chain's own sizes but not
  // in those units, this many times the slots, up to `offload_max_slots` (`offload_quality`).
  size_type offload_slot_growth = 4;
  size_type offload_max_slots = 8000;
};

inline constexpr tuning_constants tuning{};

}  // namespace remat::detail
