// Fuzz target: every solver on small fuzzed chains (sizes up to 2^62, times 0 to 1e300) and
// budgets (0 to 2^63 - 1), every slot count. A solver returns a schedule, says that none fits,
// or throws `solver_error`; every schedule is replayed in the simulator, which must find it valid,
// within the budget, at the peak and makespan the solver claims; a `min_feasible_budget` must be
// honest; and the optimal DP on exact sizes is never beaten by storing everything.
#include <remat/solve.hpp>

#include "fuzz_input.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

namespace {

using remat::size_type;

// With N slots a larger budget may fit less: the DP gets floor(B / ceil(B / N)) units, N - 1 for
// some B (docs/model.md's discretization), so a budget above min_feasible_budget can be infeasible.
bool monotone(const remat::solve_options& o) {
  return o.slots == remat::exact_units ||
         (o.solver != remat::solver::optimal && o.solver != remat::solver::checkpoint_only &&
          o.solver != remat::solver::offload);
}

void check_result(const remat::chain& c, size_type budget, const remat::solve_result& r,
                  const remat::solve_options& o) {
  using remat::fuzz::fail;
  if (r.budget != budget) fail("the result carries another budget");
  if (!r.feasible) {
    if (!r.schedule.ops.empty()) fail("an infeasible result with ops");
    if (r.min_feasible_budget != remat::solve_result::no_budget &&
        r.min_feasible_budget <= budget && monotone(o))
      fail("infeasible at a budget >= min_feasible_budget");
    return;
  }
  const remat::replay_result replayed = remat::simulate(c, r.schedule);
  if (!replayed.valid()) fail("a returned schedule is invalid");
  if (!replayed.fits(budget)) fail("a returned schedule exceeds the budget");
  if (replayed.peak_memory != r.schedule.peak_memory)
    fail("the claimed peak is not the replayed one");
  const double claimed = r.schedule.makespan, actual = replayed.makespan;
  if (!(std::fabs(claimed - actual) <= 1e-9 * std::max(1.0, std::fabs(actual))))
    fail("the claimed makespan is not the replayed one");
  if (r.min_feasible_budget != remat::solve_result::no_budget && r.min_feasible_budget > budget)
    fail("feasible below min_feasible_budget");
}

size_type pick_budget(remat::fuzz::byte_reader& in, size_type store_all_peak) {
  const std::uint8_t b = in.byte();
  if (b < 64) return b % 32;
  if (b < 192) {
    // Up to 19/16 of the peak, saturating: a peak near 2^63 would overflow (found by this target).
    const size_type k = in.byte() % 20, extra = in.byte() % 4, step = store_all_peak / 16;
    constexpr size_type most = std::numeric_limits<size_type>::max();
    if (k != 0 && step > (most - extra) / k) return most;
    return step * k + extra;
  }
  static constexpr size_type edges[] = {0, remat::max_size, std::numeric_limits<size_type>::max()};
  if (b < 240) return std::max<size_type>(0, store_all_peak - b % 4);
  return edges[b % 3];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  remat::fuzz::byte_reader in(data, size);
  const std::optional<remat::chain> valid = in.valid_chain(6);
  if (!valid) return 0;
  remat::chain c = *valid;
  // Half the inputs get a link to host memory, for the offloading solvers.
  if (in.pick(2) == 1)
    c.transfer = {static_cast<double>(1 + in.pick(64)) / 8, static_cast<double>(1 + in.pick(64)) / 8};
  const auto L = static_cast<std::int32_t>(c.length());
  const std::vector<remat::op> all = remat::detail::store_all_ops(L);
  const size_type store_all_peak = remat::simulate(c, std::span<const remat::op>(all)).peak_memory;

  static constexpr size_type slot_choices[] = {remat::exact_units, 1, 2, 3, 10, 500};
  remat::solve_options options;
  options.solver = remat::all_solvers[in.pick(std::size(remat::all_solvers))];
  options.slots = slot_choices[in.pick(std::size(slot_choices))];
  // Many slots make dense tables of gigabytes, which the default limit (half the physical memory)
  // allows; the fuzzer's memory is 4 GiB.
  options.max_table_bytes = std::size_t{1} << 30;
  if (options.solver == remat::solver::exhaustive && L > 4) return 0;  // exponential
  // With a link the search also tracks times, and fuzzed times make its states too many for a
  // fuzzer's run (tests/unit/solvers/offload.cpp checks it on tiny chains).
  if (options.solver == remat::solver::exhaustive && c.transfer.available()) return 0;
  const size_type budget = pick_budget(in, store_all_peak);

  remat::solve_result r;
  try {
    r = remat::solve(c, budget, options);
  } catch (const remat::solver_error&) {
    return 0;
  }
  check_result(c, budget, r, options);
  // The least budget the solver names must be one it solves.
  if (!r.feasible && r.min_feasible_budget != remat::solve_result::no_budget) {
    remat::solve_result at_min;
    try {  // a larger budget may need a table over the limit (exact units, huge sizes)
      at_min = remat::solve(c, r.min_feasible_budget, options);
    } catch (const remat::solver_error&) {
      return 0;
    }
    if (!at_min.feasible) remat::fuzz::fail("infeasible at min_feasible_budget");
    check_result(c, r.min_feasible_budget, at_min, options);
  }
  if (options.solver == remat::solver::optimal && options.slots == remat::exact_units &&
      budget >= store_all_peak) {
    if (!r.feasible) remat::fuzz::fail("optimal infeasible where store-all fits");
    const double store_all_time = remat::simulate(c, std::span<const remat::op>(all)).makespan;
    if (r.schedule.makespan > store_all_time * (1 + 1e-12))
      remat::fuzz::fail("optimal slower than store-all");
  }
  return 0;
}
