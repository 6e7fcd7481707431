// Hostile values across the library (issue 7): sizes up to 2^62 and sums beyond, times up to
// 1e300 and 0, one-stage chains, long chains with few slots, budgets 0, 2^62 and 2^63 - 1, and all
// sizes zero. Every solver either returns a schedule that the simulator replays within the
// budget, reports that none fits with an honest least budget, or throws a clear error; the
// sanitizer builds check that nothing on the way is undefined.
#include <remat/solve.hpp>

#include <doctest/doctest.h>

#include "chain_text.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace unit_hostile_test {

namespace {

using remat::chain;
using remat::size_type;
using remat::solve_options;
using remat::solve_result;
using remat::solver;

constexpr size_type two_62 = remat::max_size;
constexpr size_type int64_max = std::numeric_limits<size_type>::max();
constexpr size_type slot_choices[] = {remat::exact_units, 3, remat::rotor_slots};

std::int32_t length(const chain& c) {
  return static_cast<std::int32_t>(c.length());
}

remat::replay_result store_all(const chain& c) {
  return remat::simulate(c, remat::detail::store_all_ops(length(c)));
}

// The solvers that take `c`: the exhaustive search only on short chains.
std::vector<solver> solvers_for(const chain& c) {
  std::vector<solver> out;
  for (const solver s : remat::all_solvers)
    if (s != solver::exhaustive || c.length() <= 4) out.push_back(s);
  return out;
}

// Three slots are too coarse for the DP solvers to fit most chains at any budget: every nonzero
// size takes a whole third of it.
bool coarse(solver s, size_type slots) {
  return slots == 3 && (s == solver::optimal || s == solver::checkpoint_only);
}

enum class outcome : std::uint8_t { schedule, none_fits, refused };

// Solves and checks the result against the simulator; a solver_error is a valid answer too, and
// must say something.
// `c` as solver `s` takes it: the offloading solvers get a link to host memory (one size unit per
// time unit each way, so that huge sizes make huge transfer times too).
chain for_solver(const chain& c, solver s) {
  chain out = c;
  if (s == solver::offload || remat::needs_link(s)) out.transfer = {1, 1};
  return out;
}

outcome solve_checked(const chain& given, size_type budget, const solve_options& o) {
  const chain c = for_solver(given, o.solver);
  INFO("solver ", remat::name(o.solver), ", slots ", o.slots, ", budget ", budget);
  INFO(remat::testing::chain_text(c));
  solve_result r;
  try {
    r = remat::solve(c, budget, o);
  } catch (const remat::solver_error& e) {
    CHECK(std::string(e.what()).size() > 10);
    return outcome::refused;
  }
  CHECK(r.budget == budget);
  if (!r.feasible) {
    CHECK(r.schedule.ops.empty());
    CHECK((r.min_feasible_budget == solve_result::no_budget || r.min_feasible_budget > budget));
    return outcome::none_fits;
  }
  const remat::replay_result replayed = remat::simulate(c, r.schedule);
  REQUIRE(replayed.valid());
  CHECK(replayed.fits(budget));
  CHECK(replayed.peak_memory == r.schedule.peak_memory);
  CHECK(std::isfinite(replayed.makespan));
  CHECK(replayed.makespan == doctest::Approx(r.schedule.makespan).epsilon(1e-9));
  CHECK(r.min_feasible_budget <= budget);
  return outcome::schedule;
}

chain uniform_chain(std::size_t n, size_type size, double time) {
  chain c;
  c.input_size = size;
  c.stages.assign(n, {time, time, size, size, 0, 0});
  c.loss_time = time;
  return c;
}

}  // namespace

TEST_CASE("sizes up to 2^62: every solver answers correctly, at every budget edge") {
  // Validation admits a total up to 2^63 - 1: input 2^60 and one output 2^60 (each twice: the
  // activation and its gradient), a tape of 2^61 and a forward overhead of 2^61 - 1.
  chain c;
  c.input_size = two_62 / 4;
  c.stages = {{1, 2, two_62 / 4, two_62 / 2, two_62 / 2 - 1, 0}};
  remat::validate(c);
  const size_type peak = store_all(c).peak_memory;
  for (const solver s : solvers_for(c))
    for (const size_type slots : slot_choices)
      for (const size_type budget : {size_type{0}, peak - 1, peak, two_62, int64_max})
        solve_checked(c, budget, {.solver = s, .slots = slots});
  CHECK(solve_checked(c, int64_max, {.slots = remat::rotor_slots}) == outcome::schedule);
}

TEST_CASE("sizes near 2^63: where store-all fits exactly, the exact optimal returns it") {
  // Found by fuzz_solvers: store-all peaks at 2^63 - 1 in the loss (a tape of 2^62 held, a loss
  // overhead of 2^62 - 1); the exact DP's saturated sums missed it and returned a recomputing
  // schedule, slower than storing everything.
  chain c;
  c.stages = {{3, 3.5, 0, two_62, 0, 0}};
  c.loss_time = 4;
  c.loss_overhead = two_62 - 1;
  remat::validate(c);
  const remat::replay_result all = store_all(c);
  REQUIRE(all.peak_memory == int64_max);
  const solve_result r = remat::solve(c, int64_max);
  REQUIRE(r.feasible);
  CHECK(r.schedule.ops == remat::detail::store_all_ops(1));
  CHECK(r.schedule.makespan == all.makespan);
  CHECK(r.min_feasible_budget <= two_62);
}

TEST_CASE("sizes whose sum passes 2^63 - 1 are refused by every solver, naming the field") {
  chain c = uniform_chain(3, two_62, 1);
  c.stages[0].output_size = two_62 / 4;
  c.stages[0].tape_size = two_62 / 4;
  c.input_size = two_62 / 4;
  for (const solver s : remat::all_solvers) {
    CAPTURE(remat::name(s));
    CHECK_THROWS_WITH_AS((void)remat::solve(c, two_62, {.solver = s}),
                         doctest::Contains("overflows 64 bits"), remat::chain_error);
  }
  CHECK_THROWS_AS((void)remat::simulate(c, remat::detail::store_all_ops(3)), remat::chain_error);
}

TEST_CASE("times from 0 to 1e300: schedules with finite makespans, or a clear refusal") {
  for (const double time : {0.0, std::numeric_limits<double>::denorm_min(), 1e-300, 1e300}) {
    CAPTURE(time);
    chain c = uniform_chain(4, 3, time);
    c.stages[2].tape_size = 7;
    const size_type peak = store_all(c).peak_memory;
    for (const solver s : solvers_for(c))
      for (const size_type slots : slot_choices)
        for (const size_type budget : {size_type{0}, size_type{12}, peak, two_62})
          solve_checked(c, budget, {.solver = s, .slots = slots});
    if (time == 0) CHECK(remat::solve(c, peak).schedule.makespan == 0);
  }
  // (L + 1) x 1e300 x 2 stages still fits a double; 1e308 does not: validation refuses it.
  chain huge = uniform_chain(2, 1, 1e308);
  CHECK_THROWS_WITH_AS((void)remat::solve(huge, 100), doctest::Contains("too large"),
                       remat::chain_error);
}

TEST_CASE("one-stage chains: every solver, every budget from 0 past the store-all peak") {
  for (const size_type x : {size_type{0}, size_type{1}, size_type{5}}) {
    chain c;
    c.input_size = x;
    c.stages = {{1.5, 2.5, x, 2 * x, x, 3}};
    c.loss_time = 0.25;
    c.loss_overhead = 1;
    const size_type peak = store_all(c).peak_memory;
    for (const solver s : solvers_for(c))
      for (const size_type slots : slot_choices)
        for (size_type budget = 0; budget <= peak + 1; ++budget)
          if (solve_checked(c, budget, {.solver = s, .slots = slots}) == outcome::none_fits &&
              !coarse(s, slots)) {
            INFO(remat::name(s), " slots ", slots, " budget ", budget);
            CHECK(budget < peak);
          }
  }
}

TEST_CASE("all sizes zero: every solver fits budget 0 with a peak of 0") {
  for (const std::size_t n : {std::size_t{1}, std::size_t{4}, std::size_t{40}}) {
    const chain c = uniform_chain(n, 0, 1);
    for (const solver s : solvers_for(c))
      for (const size_type slots : slot_choices) {
        CAPTURE(n);
        CHECK(solve_checked(c, 0, {.solver = s, .slots = slots}) == outcome::schedule);
        const solve_result r = remat::solve(for_solver(c, s), 0, {.solver = s, .slots = slots});
        CHECK(r.schedule.peak_memory == 0);
        CHECK(r.min_feasible_budget == 0);
      }
  }
}

TEST_CASE("budget 0 and budgets up to 2^63 - 1 on an ordinary chain") {
  chain c = uniform_chain(6, 1000, 1);
  c.stages[3].tape_size = 5000;
  c.stages[1].backward_overhead = 2000;
  for (const solver s : solvers_for(c))
    for (const size_type slots : slot_choices) {
      CHECK(solve_checked(c, 0, {.solver = s, .slots = slots}) == outcome::none_fits);
      for (const size_type budget : {two_62 - 1, two_62, int64_max - 1, int64_max}) {
        INFO(remat::name(s), " slots ", slots, " budget ", budget);
        // Above every solver's fastest schedule's own peak: a schedule, even with 3 slots.
        CHECK(solve_checked(c, budget, {.solver = s, .slots = slots}) == outcome::schedule);
      }
    }
}

TEST_CASE("long chains: the baselines answer 5000 stages (revolve and sequential 1000)") {
  // Revolve and sequential are quadratic in the length: 5000 stages take seconds even optimized.
  for (const std::size_t n : {std::size_t{1000}, std::size_t{5000}}) {
    chain c = uniform_chain(n, 4, 1);
    for (std::size_t k = 0; k < c.length(); k += 7) c.stages[k].tape_size = 9;
    const size_type peak = store_all(c).peak_memory;
    for (const solver s : {solver::store_all, solver::chen_sqrt, solver::chen_greedy,
                           solver::sequential, solver::revolve}) {
      if (n == 5000 && (s == solver::sequential || s == solver::revolve)) continue;
      for (const size_type budget : {size_type{0}, size_type{400}, peak})
        solve_checked(c, budget, {.solver = s});
    }
    CHECK_THROWS_WITH_AS((void)remat::solve(c, peak, {.solver = solver::exhaustive}),
                         doctest::Contains("stages"), remat::solver_error);
  }
}

TEST_CASE("5000 stages and few slots: the DP solvers refuse at once, saying why and what to do") {
  chain c = uniform_chain(5000, 4, 1);
  for (std::size_t k = 0; k < c.length(); k += 7) c.stages[k].tape_size = 9;
  const size_type budget = store_all(c).peak_memory / 3;
  for (const solver s : {solver::optimal, solver::checkpoint_only, solver::min_memory})
    for (const size_type slots : {size_type{3}, size_type{10}, remat::exact_units}) {
      CAPTURE(remat::name(s));
      CAPTURE(slots);
      std::string message;
      try {
        (void)remat::solve(c, budget, {.solver = s, .slots = slots});
      } catch (const remat::solver_error& e) {
        message = e.what();
      }
      CHECK(message.starts_with(std::string(remat::name(s)) + ": refused before starting"));
      for (const char* part :
           {"5000 stages", "estimated at up to", "iB (limit", "max_estimated_seconds",
            "fewer slots", "coarser stages", "another solver"})
        CHECK(message.find(part) != std::string::npos);
    }
}

TEST_CASE("the time limit is an option: tiny refuses, infinity turns the check off") {
  chain c = uniform_chain(40, 1000, 1);
  c.stages[5].tape_size = 7000;
  const size_type budget = store_all(c).peak_memory / 2;
  for (const solver s : {solver::optimal, solver::checkpoint_only, solver::min_memory})
    for (const size_type slots : {remat::exact_units, remat::rotor_slots}) {
      CAPTURE(remat::name(s));
      const solve_result by_default = remat::solve(c, budget, {.solver = s, .slots = slots});
      CHECK(by_default.feasible);
      CHECK_THROWS_WITH_AS(
          (void)remat::solve(c, budget,
                             {.solver = s, .slots = slots, .max_estimated_seconds = 1e-9}),
          doctest::Contains("refused before starting"), remat::solver_error);
      const solve_result unlimited =
          remat::solve(c, budget,
                       {.solver = s,
                        .slots = slots,
                        .max_estimated_seconds = std::numeric_limits<double>::infinity()});
      CHECK(unlimited.schedule == by_default.schedule);
    }
}

// Found by fuzz_solvers: with N slots the DP gets floor(B / ceil(B / N)) units, which is N - 1 for
// some budgets, so a budget above min_feasible_budget may not fit the rounded sizes
// (docs/model.md's discretization). The solver then still returns the fastest schedule when its own
// peak fits.
TEST_CASE("slots: a huge budget may lose a unit to rounding; the fastest schedule still fits") {
  chain c;
  c.stages = {{1e300, 0, 10, 10, 0, 0}};
  const solve_options two_slots{.slots = 2};
  const solve_result huge = remat::solve(c, int64_max, two_slots);
  CHECK(huge.unit == two_62);
  REQUIRE(huge.feasible);  // the DP's rounded sizes do not fit; store-all (peak 20) does
  CHECK(huge.schedule.ops == remat::detail::store_all_ops(1));
  CHECK(huge.min_feasible_budget == 20);
  CHECK(solve_checked(c, 20, two_slots) == outcome::schedule);
  CHECK(solve_checked(c, int64_max - 1, two_slots) == outcome::schedule);
  CHECK(solve_checked(c, 19, two_slots) == outcome::none_fits);
}

// Found by fuzz_solvers: two stages with a size near 2^30 needed a dense DP over 10^9 memory units
// (gigabytes) in exact units. The frontier DP holds a few points per interval whatever the sizes;
// the dense DP with that many slots still refuses its table before allocating it.
TEST_CASE("gigabyte sizes: exact units need no table; a dense table over the limit is refused") {
  chain c;
  // A tape twice the output: checkpointing saves memory, so the DP runs below store-all's peak.
  c.stages = {{1, 1, 1000000007, 2000000014, 0, 0}, {1, 1, 3, 3, 0, 0}};
  const auto limit = std::size_t{1} << 30;
  const size_type below = store_all(c).peak_memory - 1;
  CHECK(solve_checked(c, below, {.slots = remat::exact_units, .max_table_bytes = limit}) ==
        outcome::schedule);
  CHECK_THROWS_WITH_AS((void)remat::solve(c, below, {.slots = below, .max_table_bytes = limit}),
                       doctest::Contains("max_table_bytes"), remat::solver_error);
  CHECK(solve_checked(c, int64_max, {.slots = remat::rotor_slots}) == outcome::schedule);
}

// Found by fuzz_solvers (UBSan): a chain whose total memory is exactly 2^63 - 1 (a tape of 2^62,
// a loss overhead of 2^62 - 1), in exact units at budget 2^63 - 1, gave the DP 2^63 - 1 memory
// units, and sizing its table computed M + 1 in 64 bits.
TEST_CASE("a chain totalling 2^63 - 1 in exact units at budget 2^63 - 1: no overflow") {
  chain c;
  c.stages = {{3, 3.5, 0, two_62, 0, 0}};
  c.loss_time = 4;
  c.loss_overhead = two_62 - 1;
  remat::validate(c);
  for (const solver s : {solver::optimal, solver::checkpoint_only})
    for (const size_type slots : slot_choices)
      for (const size_type budget : {int64_max, int64_max - 1})  // at and below store-all's peak
        solve_checked(c, budget, {.solver = s, .slots = slots});
}

}  // namespace unit_hostile_test
