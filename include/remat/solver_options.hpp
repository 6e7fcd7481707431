// What every solver takes (options) and gives (a result), and the solvers' names.
#pragma once

#include <remat/schedule.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace remat {

/// The solvers `remat::solve` can run.
enum class solver : std::uint8_t {
  optimal,          ///< the persistent DP of docs/model.md (default)
  store_all,        ///< F_all everything, then backward: no recomputation, most memory
  exhaustive,       ///< least time over all op sequences; tiny chains only
  sequential,       ///< PyTorch's checkpoint_sequential, best segment count that fits
  chen_sqrt,        ///< Chen et al.: checkpoint every floor(sqrt(L))-th stage input
  chen_greedy,      ///< Chen et al.'s budgeted greedy segmentation, best threshold that fits
  revolve,          ///< Griewank-Walther binomial checkpointing, the most slots that fit
  checkpoint_only,  ///< the DP without the tape branch (classical AD checkpointing)
  min_memory,       ///< the persistent schedule of least peak memory
  offload,          ///< offloading and recomputation (docs/offload.md); `optimal` without transfer
  save_on_cpu,      ///< store-all, every tape offloaded after its forward (needs a link)
  vdnn,             ///< vDNN: every stage input offloaded, prefetched a stage ahead (needs a link)
  sequential_offload,  ///< sequential with its segment inputs offloaded (needs a link)
};

/// The longest chain `solve_exhaustive` accepts.
inline constexpr std::size_t exhaustive_max_stages = 7;
/// The longest chain `solve_exhaustive` accepts when the chain has a `transfer` (the search
/// then also tracks times, and its states are many more).
inline constexpr std::size_t exhaustive_max_transfer_stages = 4;

/// The DP over memory a solver runs, if any (`solver_info::dp`).
enum class solver_dp : std::uint8_t {
  none,          ///< none: it never estimates its cost nor refuses a chain for its length
  persistent,    ///< docs/model.md's DP at the budget: `slots` apply, `exact` and bounds, a curve
  least_memory,  ///< the least-memory DP, then the persistent DP exact at that least budget
  offload,       ///< the persistent DP's dense table under the offload DP (docs/offload.md)
};

/// What a solver is. One table (`info`) says it, and `solve`, `sweep`, `estimate_solve_at`,
/// `trade_off`, automatic coarsening and the tools read it instead of deciding by name.
struct solver_info {
  remat::solver solver = solver::optimal;
  /// Its name on the command line.
  std::string_view name;
  solver_dp dp = solver_dp::none;
  /// Its DP has docs/model.md's tape branch (F_all(i), the interval after, B(i)); without it the
  /// DP is classical checkpointing (`checkpoint_only`).
  bool tape_branch = true;
  /// It runs in constant expressions (else a `solver_error` there).
  bool constant_evaluable = true;
  /// It needs the chain's link to host memory (`chain::transfer`), else a `solver_error`.
  bool needs_link = false;
  /// It moves tensors over the link where the chain has one; without one, it returns another
  /// solver's result (`offload`: `optimal`'s).
  bool uses_link = false;
  /// It accepts `solve_options::coarsen` (else a `solver_error`).
  bool coarsens = true;
  /// The longest chain it accepts, and where the chain has a link (0: any length).
  std::size_t max_stages = 0;
  std::size_t max_link_stages = 0;

  /// It estimates its cost before it runs and refuses past the limits (`max_estimated_seconds`,
  /// `max_table_bytes`): the solvers automatic coarsening shortens a chain for.
  [[nodiscard]] constexpr bool refuses_long_chains() const noexcept {
    return dp == solver_dp::persistent || dp == solver_dp::least_memory;
  }
  /// It has an exact trade-off curve (`remat::trade_off`, the sweeps).
  [[nodiscard]] constexpr bool has_curve() const noexcept { return dp == solver_dp::persistent; }
};

/// Every solver, in the order tools list them, with what it is.
inline constexpr solver_info solver_table[] = {
    {.solver = solver::optimal, .name = "optimal", .dp = solver_dp::persistent},
    {.solver = solver::store_all, .name = "store-all"},
    {.solver = solver::exhaustive,
     .name = "exhaustive",
     .constant_evaluable = false,
     .max_stages = exhaustive_max_stages,
     .max_link_stages = exhaustive_max_transfer_stages},
    {.solver = solver::sequential, .name = "sequential"},
    {.solver = solver::chen_sqrt, .name = "chen-sqrt"},
    {.solver = solver::chen_greedy, .name = "chen-greedy"},
    {.solver = solver::revolve, .name = "revolve"},
    {.solver = solver::checkpoint_only,
     .name = "checkpoint-only",
     .dp = solver_dp::persistent,
     .tape_branch = false},
    {.solver = solver::min_memory, .name = "min-memory", .dp = solver_dp::least_memory},
    {.solver = solver::offload,
     .name = "offload",
     .dp = solver_dp::offload,
     .constant_evaluable = false,
     .uses_link = true,
     .coarsens = false},
    {.solver = solver::save_on_cpu,
     .name = "save-on-cpu",
     .constant_evaluable = false,
     .needs_link = true,
     .uses_link = true},
    {.solver = solver::vdnn,
     .name = "vdnn",
     .constant_evaluable = false,
     .needs_link = true,
     .uses_link = true},
    {.solver = solver::sequential_offload,
     .name = "sequential-offload",
     .constant_evaluable = false,
     .needs_link = true,
     .uses_link = true},
};

/// What `s` is (`solver_table`).
constexpr const solver_info& info(solver s) noexcept {
  for (const solver_info& i : solver_table)
    if (i.solver == s) return i;
  return solver_table[0];  // (every enumerator has its row: tests/unit/solve.cpp)
}

/// True for the solvers that need the chain's link to host memory (`chain::transfer`).
constexpr bool needs_link(solver s) noexcept {
  return info(s).needs_link;
}

/// Every solver, in the order tools list them (`solver_table`'s).
inline constexpr std::array<solver, std::size(solver_table)> all_solvers = [] {
  std::array<solver, std::size(solver_table)> out{};
  for (std::size_t k = 0; k < out.size(); ++k) out[k] = solver_table[k].solver;
  return out;
}();

/// The solver's name on the command line: `optimal`, `store-all`, `exhaustive`, `sequential`,
/// `chen-sqrt`, `chen-greedy`, `revolve`, `checkpoint-only`, `min-memory`, `offload`,
/// `save-on-cpu`, `vdnn`, `sequential-offload`.
constexpr std::string_view name(solver s) noexcept {
  return info(s).name;
}

/// The solver called `n`, if there is one.
constexpr std::optional<solver> solver_from_name(std::string_view n) noexcept {
  for (solver s : all_solvers)
    if (name(s) == n) return s;
  return std::nullopt;
}

/// Where `remat::coarsen` cuts a chain into blocks (detail/coarsen/boundaries.hpp).
enum class boundary_rule : std::uint8_t {
  least_loss,  ///< balanced blocks, cut at small activations (a DP over cut points)
  even,        ///< every L / N stages
};

/// `solve_options::coarsen`: solve the chain as given.
inline constexpr std::size_t no_coarsening = 0;
/// `solve_options::coarsen`: merge stages only as far as the solver needs to accept the chain.
inline constexpr std::size_t auto_coarsening = static_cast<std::size_t>(-1);

/// `slots` value meaning: the exact optimum on the sizes as given, as integer units (no
/// rescaling), within the limits or refused.
inline constexpr size_type exact_units = 0;

/// `slots` value meaning: exact unless that is expensive: the exact optimum wherever an exact
/// engine is estimated within about 10 s and 2 GiB (and the limits), and past that the 500-slot
/// schedule (never slower than it, nor than the default's schedule of the same chain without its
/// options) with a bound of its distance from the exact optimum (`solve_result::exact`,
/// `memory_loss`, `makespan_loss`).
inline constexpr size_type auto_slots = -1;

/// Slots used when none are given.
inline constexpr size_type default_slots = auto_slots;

/// The slots of Rotor's discretization: the default's fallback, and comparisons (`--slots 500`).
inline constexpr size_type rotor_slots = 500;

struct solve_options {
  remat::solver solver = solver::optimal;
  /// Memory discretization for the DP solvers with a memory dimension (`optimal`,
  /// `checkpoint-only`): `auto_slots` (the default) is exact unless an exact engine is estimated
  /// past about 10 s or 2 GiB, and there the 500-slot DP with a bound; `exact_units` is exact on
  /// the sizes as given, or refused past the limits; N cuts the budget into N units and rounds
  /// every size up to whole units (Rotor's DP, with a table over the units). The other solvers
  /// always use the sizes as given.
  size_type slots = default_slots;
  /// The DP solvers (`optimal`, `checkpoint-only`, `offload`) refuse tables larger than this
  /// (bytes), before allocating them (`min-memory` then takes its least-peak DP instead); unset:
  /// half the physical memory (4 GiB where it cannot be read).
  std::optional<std::size_t> max_table_bytes = std::nullopt;
  /// Threads filling the DP table (`optimal`, `checkpoint-only`); 0: one per hardware thread.
  /// The result does not depend on it.
  unsigned threads = 1;
  /// The DP solvers (`optimal`, `checkpoint-only`, `min-memory`, `offload`) estimate their time
  /// from the chain's length, the slots and the budget before they start, and refuse with a
  /// `solver_error` (giving the estimate and what to change) a solve estimated to take longer
  /// than this. The estimate is pessimistic; infinity turns the check off.
  double max_estimated_seconds = 60;
  /// Solve on blocks of consecutive stages (remat/coarsen.hpp) and return the schedule expanded
  /// to the chain's own stages, replayed on them: `no_coarsening` (default); a count N >= 1 (at
  /// most N blocks; chains of N stages or fewer are solved as given); or `auto_coarsening`: as
  /// many blocks as the DP solvers (`optimal`, `checkpoint-only`, `min-memory`) accept within
  /// `max_estimated_seconds` and `max_table_bytes`, the chain as given when they accept it (the
  /// other solvers never refuse a long chain, so they get it as given).
  std::size_t coarsen = no_coarsening;
  /// Where the blocks are cut when coarsening.
  boundary_rule coarse_boundaries = boundary_rule::least_loss;
  /// `exhaustive` only: also search schedules in which F_none(k) drops a_k while t_{k+1} is
  /// held. docs/model.md allows them, but an executor cannot run them as modelled: autograd's
  /// recording of t_{k+1} holds a_k, so the drop frees nothing (docs/model.md, "Schedules an
  /// executor can run"). Off by default; on, the search covers every op sequence of the model.
  bool drop_recorded_inputs = false;
  /// Micro-batches in flight (docs/pipelines.md): K >= 1. With K > 1 a schedule fits the budget
  /// when peak + (K - 1) * retained <= budget (`solve_result::retained`): the K - 1 others each
  /// hold what one keeps between its forward and its backward part while this one runs, as on a
  /// pipeline stage under GPipe or 1F1B. `optimal`, `checkpoint-only`, `min-memory` and
  /// `exhaustive` are exact under it; the other solvers return their schedule only where it
  /// keeps it; the offloading solvers refuse K > 1.
  std::size_t in_flight = 1;
};

/// What a solver found for one budget.
struct solve_result {
  bool feasible = false;
  /// The schedule (empty when infeasible), with the makespan the solver predicts and the peak of
  /// replaying it on the chain's own sizes.
  remat::schedule schedule;
  size_type budget = 0;
  /// The smallest budget at which this solver, with the same options, finds a schedule;
  /// `no_budget` when none does (e.g. too few slots).
  size_type min_feasible_budget = 0;
  /// The memory unit the solver worked in: 1 for exact sizes, else ceil(budget / slots).
  size_type unit = 1;
  /// With `solve_options::coarsen`: the number of blocks the solver ran on, or 0 when it ran on
  /// the chain's own stages. The schedule's ops are always on the chain's own stages.
  std::size_t coarse_length = 0;
  /// The schedule's memory held right before the loss op (its transient excluded): with
  /// `solve_options::in_flight` = K, peak + (K - 1) * retained <= budget.
  size_type retained = 0;
  /// With coarsening: the stages of the longest block.
  std::size_t largest_block = 0;
  /// The DP solvers (`optimal`, `checkpoint-only`, `min-memory`): the makespan is the exact
  /// optimum of the solver's DP at this budget on the chain's own sizes (always so for
  /// `exact_units`; with slots where the unit is 1). False for the other solvers.
  bool exact = false;
  /// The default solve where it is not exact: the schedule is at least as fast as the exact
  /// optimum at budget * (1 - memory_loss), and its makespan at most (1 + makespan_loss) times
  /// the exact optimum at this budget (bounds from the same DP on sizes rounded down, whose
  /// values are never above exact). 0 where the result is exact, and not computed (0) with
  /// explicit slots or with coarsening (the bounds would be the coarse chain's).
  double memory_loss = 0;
  double makespan_loss = 0;

  friend constexpr bool operator==(const solve_result&, const solve_result&) = default;

  static constexpr size_type no_budget = -1;
};

/// What a solve will cost before it runs (`remat::estimate_solve`, `estimate_solve_at`).
struct solve_estimate {
  /// The solve's time (seconds, with `options.threads` threads; an upper bound at the estimates'
  /// rates, so on a loaded machine low in proportion to the load) and the most memory of its
  /// tables (bytes).
  double seconds = 0;
  double bytes = 0;
  /// Measured rather than projected: the probe finished the frontier DP.
  bool measured = false;
  /// Whether a DP over memory runs at all (not below the least budget, nor from the fastest
  /// schedule's peak up, nor for the solvers without one).
  bool runs_dp = false;
  /// The result will be the exact optimum (predicted from the probe and the estimates: a search
  /// the estimate does not count on can still make it exact).
  bool exact = true;
  /// The solve runs within `options.max_estimated_seconds` and `max_table_bytes`: it will not
  /// refuse the chain.
  bool within_limits = true;
};

/// A request a solver cannot honour: a negative budget, a chain too large for the method, a
/// table over the memory limit. Says what to change.
class solver_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct chain;

namespace detail {
[[noreturn]] inline void throw_solver_error(const std::string& what) {
  throw solver_error(what);
}

// A solver's solve and its estimate for `remat::chain` (`remat::solve` and
// `remat::estimate_solve_at` call them through detail/solver_rows.hpp).
using solve_pointer = solve_result (*)(const chain&, size_type, const solve_options&);
using estimate_pointer = solve_estimate (*)(const chain&, size_type, const solve_options&);

// The estimate of a solver without a DP over memory: nothing to cost, never refused.
inline solve_estimate no_dp_estimate(const chain&, size_type, const solve_options&) {
  return {};
}

// What completes a row of `solver_table`: each solver's header specializes `solver_entry` for
// its enumerator, naming its solve and estimate (`entry<&solve_x<chain>, &estimate>`). The table
// itself cannot hold the pointers: the solvers' own code reads `info` and `name`, so the table is
// below them. detail/solver_rows.hpp reads the entry of every row; a row without one does not
// compile there.
template <solver S>
struct solver_entry;

template <solve_pointer Solve, estimate_pointer Estimate = &no_dp_estimate>
struct entry {
  static constexpr solve_pointer solve = Solve;
  static constexpr estimate_pointer estimate = Estimate;
};
}  // namespace detail

}  // namespace remat
