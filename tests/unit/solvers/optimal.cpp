// The optimal DP: a hand-verified chain solved at compile time, property tests on random chains
// (the simulator and an independent transcription of docs/model.md's DP as oracles),
// discretization, the exact tape-branch check, the table-size guard and degenerate chains.
#include <remat/solvers/optimal.hpp>

#include <remat/estimate.hpp>
#include <remat/io/chain_json.hpp>
#include <remat/linearize.hpp>
#include <remat/simulate.hpp>
#include <remat/solve.hpp>
#include <remat/solvers/exhaustive.hpp>
#include <remat/solvers/min_memory.hpp>
#include <remat/solvers/sequential.hpp>
#include <remat/solvers/store_all.hpp>
#include <remat/zoo.hpp>
#include <remat/zoo/graphs.hpp>

#include <doctest/doctest.h>

#include "chain_text.hpp"
#include "homogeneous.hpp"
#include "random_chain.hpp"
#include "reference_dp.hpp"
#include "trials.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace unit_solvers_optimal_test {

namespace {

using remat::chain;
using remat::replay_result;
using remat::size_type;
using remat::solve_options;
using remat::solve_result;
using remat::testing::chain_text;
using remat::testing::random_chain;
using remat::testing::random_chain_options;
using remat::testing::reference_dp;

constexpr solve_options exact{.slots = remat::exact_units};
constexpr double infinite = std::numeric_limits<double>::infinity();

bool close(double a, double b) {
  return std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b));
}

std::int32_t length(const chain& c) {
  return static_cast<std::int32_t>(c.length());
}

replay_result store_all_replay(const chain& c) {
  return remat::simulate(c, remat::detail::store_all_ops(length(c)));
}

// Five stages of size 1 (input included) whose stage 2 records a tape of 10; forward times
// 3 3 1 3 3, backward times 1, no loss time, no overheads.
//
// * Store-all peaks at 17, in B(4): a0 t1 t2 t3 t4 t5 g5 g4 = 1+1+1+10+1+1+1+1. Its time is 18.
// * Below 17 some forward runs twice: if each runs once, each must be F_all (B(k) needs t_{k+1}),
//   in stage order (each reads the previous tape), all before the loss, and every tape is held
//   until its B, so B(4) meets store-all's 17. The cheapest extra forward is stage 2's: at 16
//   the best is 19, reached by F_all(0) F_all(1) F_ck(2) F_all(3) F_all(4) loss B(4) B(3) F_all(2)
//   B(2) B(1) B(0), whose peak is 15 (B(2): a0 t1 t2 t3 g3 g2).
// * B(2) alone holds a0, stage 2's input, t3, g3 and g2: 14. At 14 nothing else may be held then,
//   so t1 and t2 are recorded after B(2) although stages 0 and 1 ran before it (+6); and t3 is not
//   held in B(3) (a0 + input + t3 + t4 + g4 + g3 = 15), so stage 2 runs again after B(3) (+1):
//   25, which F_ck(0) F_none(1) F_ck(2) F_all(3) F_all(4) loss B(4) B(3) F_all(2) B(2) F_all(0)
//   F_all(1) B(1) B(0) reaches. 13 is infeasible.
constexpr chain tall_tape() {
  chain c;
  c.input_size = 1;
  c.stages = {{3, 1, 1, 1, 0, 0},
              {3, 1, 1, 1, 0, 0},
              {1, 1, 1, 10, 0, 0},
              {3, 1, 1, 1, 0, 0},
              {3, 1, 1, 1, 0, 0}};
  return c;
}

static_assert(remat::solve_optimal(tall_tape(), 100, exact).schedule.makespan == 18);
static_assert(remat::solve_optimal(tall_tape(), 17, exact).schedule.makespan == 18);
static_assert(remat::solve_optimal(tall_tape(), 16, exact).schedule.makespan == 19);
static_assert(remat::solve_optimal(tall_tape(), 14, exact).schedule.makespan == 25);
static_assert(!remat::solve_optimal(tall_tape(), 13, exact).feasible);
static_assert(remat::solve_optimal(tall_tape(), 13, exact).min_feasible_budget == 14);
// At one budget the least budget comes from the capped DP, or from the least-memory DP where
// store-all fits or nothing does (input alone above the budget included).
static_assert(remat::solve_optimal(tall_tape(), 100, exact).min_feasible_budget == 14);
static_assert(remat::solve_optimal(tall_tape(), 16, exact).min_feasible_budget == 14);
static_assert(remat::solve_optimal(tall_tape(), 0, exact).min_feasible_budget == 14);
// With the default 500 slots these budgets are cut in units of 1: the same answers.
static_assert(remat::solve_optimal(tall_tape(), 16).schedule.makespan == 19);

}  // namespace

TEST_CASE("the hand-verified chain, at run time, against the exhaustive search") {
  const chain c = tall_tape();
  for (size_type budget : {14, 15, 16, 17, 18}) {
    CAPTURE(budget);
    const solve_result r = remat::solve_optimal(c, budget, exact);
    REQUIRE(r.feasible);
    const replay_result sim = remat::simulate(c, r.schedule);
    CHECK(sim.fits(budget));
    CHECK(sim.makespan == r.schedule.makespan);
    CHECK(r.schedule.makespan == remat::solve_exhaustive(c, budget).schedule.makespan);
  }
  using remat::backward;
  using remat::f_all;
  using remat::f_ck;
  CHECK(remat::solve_optimal(c, 16, exact).schedule.ops ==
        std::vector<remat::op>{f_all(0), f_all(1), f_ck(2), f_all(3), f_all(4), remat::loss_op(5),
                               backward(4), backward(3), f_all(2), backward(2), backward(1),
                               backward(0)});
  CHECK(remat::solve_optimal(c, 16, exact).schedule.peak_memory == 15);
}

// (b) On exact units, for every budget from one below the least feasible one to store-all's
// peak: the schedule replays to its predicted makespan within the budget, is never faster than
// store-all (no schedule is) and equals it at store-all's peak, the makespan does not increase
// with the budget, and min_feasible_budget is exactly where feasibility starts. The whole range
// is read from one DP table; solve_optimal itself is checked at a few budgets per chain.
TEST_CASE("property: exact units, every budget from the least feasible to store-all") {
  std::mt19937_64 rng(1);
  int chains = 0;
  long budgets = 0;
  for (; chains < 2000; ++chains) {
    const chain c = random_chain(rng);
    INFO(chain_text(c));
    const replay_result all = store_all_replay(c);
    const size_type top = all.peak_memory;

    const solve_result none = remat::solve_optimal(c, 0, exact);
    const size_type least = none.min_feasible_budget;
    CAPTURE(least);
    REQUIRE(least != solve_result::no_budget);
    REQUIRE(least >= c.input_size);
    REQUIRE(least <= top);
    CHECK(none.feasible == (least == 0));

    const remat::detail::model md = remat::detail::make_model(c, 1);
    const remat::detail::reference_table t = remat::detail::reference_dp(md, top - c.input_size);
    auto value = [&](size_type b) { return t.value[t.at(0, md.L, b - c.input_size)]; };
    if (least > c.input_size) CHECK(value(least - 1) == infinite);

    double previous = infinite;
    for (size_type b = least; b <= top; ++b, ++budgets) {
      CAPTURE(b);
      const double v = value(b);
      REQUIRE(v < infinite);
      CHECK(v <= previous);
      CHECK((v > all.makespan || close(v, all.makespan)));
      previous = v;
      const std::vector<remat::op> ops =
          remat::detail::reference_ops(md, t, 0, md.L, b - c.input_size);
      const replay_result r = remat::simulate(c, ops);
      REQUIRE(r.valid());
      CHECK(r.peak_memory <= b);
      CHECK(close(r.makespan, v));
    }
    CHECK(close(previous, all.makespan));

    // The public entry point at a few budgets: the least, one below, a random one, store-all's
    // peak and beyond.
    if (least > 0) {
      const solve_result below = remat::solve_optimal(c, least - 1, exact);
      CHECK_FALSE(below.feasible);
      CHECK(below.schedule.ops.empty());
      CHECK(below.min_feasible_budget == least);
      CHECK(below.budget == least - 1);
    }
    const size_type some = std::uniform_int_distribution<size_type>(least, top)(rng);
    for (size_type b : {least, some, top, top + 1 + some}) {
      CAPTURE(b);
      const solve_result r = remat::solve_optimal(c, b, exact);
      REQUIRE(r.feasible);
      CHECK(r.budget == b);
      CHECK(r.unit == 1);
      CHECK(r.min_feasible_budget == least);
      CHECK(r.schedule.makespan == value(std::min(b, top)));
      const replay_result sim = remat::simulate(c, r.schedule);
      REQUIRE(sim.valid());
      CHECK(sim.peak_memory == r.schedule.peak_memory);
      CHECK(sim.peak_memory <= b);
      CHECK(close(sim.makespan, r.schedule.makespan));
      if (b >= top) CHECK(close(r.schedule.makespan, all.makespan));
    }
  }
  CHECK(chains == 2000);
  CHECK(budgets > 40000);  // about 23 budgets a chain between the least and store-all's peak
}

// An independent transcription of docs/model.md (tests/support/reference_dp.hpp) agrees with the
// library's DP everywhere, including below the least feasible budget.
TEST_CASE("property: the DP equals an independent transcription of docs/model.md") {
  std::mt19937_64 rng(2);
  for (int n = 0; n < 1000; ++n) {
    const chain c = random_chain(rng);
    INFO(chain_text(c));
    const size_type top = store_all_replay(c).peak_memory;
    const remat::detail::model md = remat::detail::make_model(c, 1);
    const remat::detail::reference_table t = remat::detail::reference_dp(md, top - c.input_size);
    reference_dp reference(c);
    for (size_type b = 0; b <= top; ++b) {
      CAPTURE(b);
      const double library = b < c.input_size ? infinite : t.value[t.at(0, md.L, b - c.input_size)];
      CHECK(library == reference(b));
    }
  }
}

// (c) Discretized into slots: every schedule fits the byte budget, predicts its makespan, is
// no faster than the exact optimum (rounding up only removes schedules), and min_feasible_budget
// is a budget where a schedule is found (the next test shows it is the least one).
TEST_CASE("property: slots, larger sizes") {
  std::mt19937_64 rng(3);
  int feasible = 0;
  for (int n = 0; n < 1000; ++n) {
    const chain c = random_chain(rng, {1, 8, 1000, true});
    INFO(chain_text(c));
    const size_type slots = std::uniform_int_distribution<size_type>(7, 50)(rng);
    CAPTURE(slots);
    const solve_options o{.slots = slots};
    const size_type top = store_all_replay(c).peak_memory;
    const size_type least = remat::solve_optimal(c, 0, exact).min_feasible_budget;
    for (int k = 0; k < 4; ++k) {
      const size_type b = std::uniform_int_distribution<size_type>(least - 10, top + top / 2)(rng);
      CAPTURE(b);
      const solve_result r = remat::solve_optimal(c, b, o);
      CHECK(r.budget == b);
      CHECK(r.unit == std::max<size_type>(1, (b + slots - 1) / slots));
      if (r.min_feasible_budget == solve_result::no_budget) {
        CHECK_FALSE(r.feasible);
        continue;
      }
      CHECK(r.min_feasible_budget >= least);
      const solve_result at_least = remat::solve_optimal(c, r.min_feasible_budget, o);
      CHECK(at_least.feasible);
      CHECK(at_least.min_feasible_budget == r.min_feasible_budget);
      if (!r.feasible) {
        CHECK(r.schedule.ops.empty());
        continue;
      }
      ++feasible;
      CHECK(r.min_feasible_budget <= b);
      const replay_result sim = remat::simulate(c, r.schedule);
      REQUIRE(sim.valid());
      CHECK(sim.peak_memory <= b);
      CHECK(sim.peak_memory == r.schedule.peak_memory);
      CHECK(close(sim.makespan, r.schedule.makespan));
    }
  }
  CHECK(feasible > 2000);
}

// With slots, min_feasible_budget is exactly the least budget at which the solver finds a
// schedule: a scan of every budget below it finds none (coarse slots included, where feasibility
// is not monotone in the budget).
TEST_CASE("property: slots, min_feasible_budget is the least feasible budget") {
  std::mt19937_64 rng(11);
  for (int n = 0; n < remat::testing::trials(300); ++n) {
    const chain c = random_chain(rng, {1, 6, 60, true});
    INFO(chain_text(c));
    for (const size_type slots : {3, 7, 10, 25, 50}) {
      CAPTURE(slots);
      const solve_options o{.slots = slots};
      const size_type least = remat::solve_optimal(c, 0, o).min_feasible_budget;
      // Store-all's own peak always fits, rounding or not: there is always a least budget.
      REQUIRE(least != solve_result::no_budget);
      CHECK(least <= store_all_replay(c).peak_memory);
      CHECK(remat::solve_optimal(c, least, o).feasible);
      for (size_type b = 0; b < least; ++b) {
        REQUIRE(store_all_replay(c).peak_memory > b);
        const remat::detail::discretization d = remat::detail::discretize(b, slots);
        REQUIRE(remat::detail::persistent_min_budget(remat::detail::make_model(c, d.unit)) >
                d.budget);
      }
    }
  }
}

// Rounding sizes up and the budget down only removes schedules: with slots the makespan is never
// below the exact optimum at the same byte budget, and a feasible budget is feasible exactly.
TEST_CASE("property: slots are never faster than exact units") {
  std::mt19937_64 rng(6);
  for (int n = 0; n < 400; ++n) {
    const chain c = random_chain(rng, {1, 6, 40, true});
    INFO(chain_text(c));
    const size_type slots = std::uniform_int_distribution<size_type>(7, 50)(rng);
    CAPTURE(slots);
    const size_type top = store_all_replay(c).peak_memory;
    const remat::detail::model md = remat::detail::make_model(c, 1);
    const remat::detail::reference_table t = remat::detail::reference_dp(md, top - c.input_size);
    for (int k = 0; k < 3; ++k) {
      const size_type b = std::uniform_int_distribution<size_type>(c.input_size, top)(rng);
      CAPTURE(b);
      const solve_result r = remat::solve_optimal(c, b, {.slots = slots});
      if (!r.feasible) continue;
      const double best = t.value[t.at(0, md.L, b - c.input_size)];
      REQUIRE(best < infinite);
      CHECK((r.schedule.makespan > best || close(r.schedule.makespan, best)));
    }
  }
}

TEST_CASE("property: exact, never slower than checkpoint-all or checkpoint_sequential") {
  // Both are persistent schedules: on the chain's own sizes the DP's optimum is never slower, and
  // its least budget never above theirs. (Rounded to slots it can be: the reason the default is
  // exact.)
  std::mt19937_64 rng(61);
  int rounded_slower = 0;
  for (int n = 0; n < 600; ++n) {
    const chain c = random_chain(rng, {2, 10, 1000, n % 2 == 0});
    INFO(chain_text(c));
    const auto length = static_cast<std::int32_t>(c.length());
    const size_type top = store_all_replay(c).peak_memory;
    const size_type b = std::uniform_int_distribution<size_type>(top / 3, top)(rng);
    CAPTURE(b);
    const solve_result r = remat::solve_optimal(c, b);
    const solve_result seq = remat::solve_sequential(c, b);
    const replay_result all = remat::simulate(c, remat::detail::checkpoint_all_ops(length));
    CHECK(r.min_feasible_budget <= seq.min_feasible_budget);
    CHECK(r.min_feasible_budget <= all.peak_memory);
    for (const double simple : {seq.feasible ? seq.schedule.makespan : infinite,
                                all.peak_memory <= b ? all.makespan : infinite}) {
      if (simple == infinite) continue;
      REQUIRE(r.feasible);
      CHECK(r.schedule.makespan <= simple);
    }
    if (!r.feasible) continue;
    const replay_result replayed = remat::simulate(c, r.schedule.ops);
    CHECK(replayed.valid());
    CHECK(replayed.peak_memory <= b);
    CHECK(close(replayed.makespan, r.schedule.makespan));
    const size_type slots = std::uniform_int_distribution<size_type>(5, 60)(rng);
    const solve_result rounded = remat::solve_optimal(c, b, {.slots = slots});
    if (!rounded.feasible || r.schedule.makespan < rounded.schedule.makespan) ++rounded_slower;
    if (rounded.feasible) CHECK(r.schedule.makespan <= rounded.schedule.makespan);
  }
  CHECK(rounded_slower > 0);
}

TEST_CASE("property: exact, feasible from the least persistent peak on (min-memory's)") {
  std::mt19937_64 rng(67);
  for (int n = 0; n < 400; ++n) {
    const chain c = random_chain(rng, {1, 12, 1000, n % 2 == 0});
    INFO(chain_text(c));
    const solve_result least = remat::solve_min_memory(c, remat::max_size);
    REQUIRE(least.min_feasible_budget != solve_result::no_budget);
    const size_type b = least.min_feasible_budget;
    const solve_result r = remat::solve_optimal(c, b);
    CHECK(r.min_feasible_budget == b);
    REQUIRE(r.feasible);
    CHECK_FALSE(remat::solve_optimal(c, b - 1).feasible);
    const replay_result replayed = remat::simulate(c, r.schedule.ops);
    CHECK(replayed.valid());
    CHECK(replayed.peak_memory <= b);
    CHECK(close(replayed.makespan, r.schedule.makespan));
    // The fastest schedule at that peak: never slower than min-memory's tie-break.
    CHECK(r.schedule.makespan <= least.schedule.makespan);
  }
}

TEST_CASE("slots: too few to hold what every schedule needs at once") {
  // B(0) holds a_0, g_0, g_1 and t_1, each at least one unit: one slot is never enough for the
  // DP. Store-all (peak 4 bytes) is still returned wherever its own peak fits.
  chain c;
  c.input_size = 1;
  c.stages = {{1, 1, 1, 1, 0, 0}};
  for (size_type b : {size_type{0}, size_type{3}}) {
    const solve_result r = remat::solve_optimal(c, b, {.slots = 1});
    CHECK_FALSE(r.feasible);
    CHECK(r.min_feasible_budget == 4);
  }
  for (size_type b : {size_type{4}, size_type{1000}, size_type{1} << 40}) {
    const solve_result r = remat::solve_optimal(c, b, {.slots = 1});
    REQUIRE(r.feasible);
    CHECK(r.schedule.ops == remat::detail::store_all_ops(1));
    CHECK(r.min_feasible_budget == 4);
  }
  // A chain whose store-all does not fit either: no budget at all with one slot.
  c.stages = {{1, 1, 1, 1, 0, 0}, {1, 1, 1, 1, 0, 0}};
  const solve_result none = remat::solve_optimal(c, 4, {.slots = 1});
  CHECK_FALSE(none.feasible);
  CHECK(none.min_feasible_budget == 5);  // store-all's peak: a_0 t_1 t_2 g_2 g_1
  // Four slots are enough from 4 bytes on: each tensor is one unit.
  c.stages = {{1, 1, 1, 1, 0, 0}};
  const solve_result r = remat::solve_optimal(c, 1000, {.slots = 4});
  CHECK(r.feasible);
  CHECK(r.min_feasible_budget == 4);
  CHECK(r.unit == 250);
}

TEST_CASE("slots: the unit and the budget in units follow docs/model.md") {
  // 1000 bytes in 7 slots: unit ceil(1000/7) = 143, of which 6 whole units (858 bytes) are
  // usable, and a tensor of 100 bytes takes a whole unit.
  chain c;
  c.input_size = 100;
  c.stages = {{1, 1, 100, 100, 0, 0}, {1, 1, 100, 100, 0, 0}};
  // Every schedule's B(0) holds a_0 g_0 g_1 t_1 (4 tensors); store-all's B(1) holds a_0 t_1 t_2
  // g_2 g_1 (5).
  CHECK(remat::solve_optimal(c, 500, exact).feasible);
  const solve_result r = remat::solve_optimal(c, 1000, {.slots = 7});
  CHECK(r.unit == 143);
  REQUIRE(r.feasible);
  CHECK(r.schedule.makespan == 4);  // store-all: 5 units of 143 fit in 6
  const solve_result tight = remat::solve_optimal(c, 499, {.slots = 7});
  CHECK(tight.unit == 72);      // 499 / 72 = 6 units, each tensor 2 units: 3 tensors only
  CHECK_FALSE(tight.feasible);  // and store-all needs 500
  // At 500 bytes store-all's own peak fits: it is returned though its rounded sizes do not fit.
  const solve_result at_peak = remat::solve_optimal(c, 500, {.slots = 7});
  REQUIRE(at_peak.feasible);
  CHECK(at_peak.schedule.ops == remat::detail::store_all_ops(2));
}

// (d) docs/model.md's oracle for the DP without the tape branch: on the homogeneous chain (fw = 1,
// bw = 0, x = xb = 1, no overheads) its makespan is L + t(L, M - 4) + 1, Revolve's binomial
// count. The library's checkpoint-only solver is another header; this checks the transcription
// of docs/model.md used as the oracle above, and the formula's reading of sizes and budgets.
TEST_CASE("Revolve's binomial count, by the DP without the tape branch") {
  for (int L = 1; L <= 32; ++L) {
    reference_dp dp(remat::testing::homogeneous(L), {.tape_branch = false});
    for (long M = 5; M <= L + 6; ++M) {
      CAPTURE(L);
      CAPTURE(M);
      CHECK(dp(M) == static_cast<double>(L + remat::testing::binomial_count(L, M - 4) + 1));
    }
    // B(0) holds a_0, t_1, g_1 and g_0: nothing fits in 3. In 4 only a one-stage chain fits,
    // since every other B(k) holds a_0 besides its own four tensors (Revolve with no snapshot).
    CHECK(dp(3) == infinite);
    CHECK(dp(4) == (L == 1 ? 2 : infinite));
  }
}

// (e) Rotor checks the tape branch's forward as if g_{i+1} were held; remat checks the gradient
// actually held, g_{l+1}. Here:
//   x0 = 1; stage 0: x1 = 1, xb1 = 3; stage 1: x2 = 2, xb2 = 2, ft1 = 4; times 1, no loss cost.
// Store-all peaks at 10 in F_all(1) (a0 t1 t2 = 6, + 4): no gradient is held then, since the loss
// has not run. In the DP that is the tape branch of (1, 2) with m = 10 - 1 - 3 = 6 and
// x[l+1] = x[3] = 0 < x[i+1] = x[2] = 2: exact needs 0 + 2 + 4 = 6, Rotor's check 2 + 2 + 4 = 8.
// So at 10 remat finds store-all (time 4), while with Rotor's check the best is to hold a1 instead
// of t1 and recompute stage 0: F_ck(0) F_all(1) loss B(1) F_all(0) B(0), time 5, peak 8.
TEST_CASE("the exact tape-branch check beats Rotor's where x[l+1] < x[i+1]") {
  chain c;
  c.input_size = 1;
  c.stages = {{1, 1, 1, 3, 0, 0}, {1, 1, 2, 2, 4, 0}};
  const solve_result r = remat::solve_optimal(c, 10, exact);
  REQUIRE(r.feasible);
  CHECK(r.schedule.ops == remat::detail::store_all_ops(2));
  CHECK(r.schedule.makespan == 4);
  const replay_result sim = remat::simulate(c, r.schedule);
  CHECK(sim.fits(10));
  CHECK(sim.op_peak[1] == 10);  // F_all(1)

  // The exhaustive search confirms that 4 is the optimum at 10, and that nothing fits below 8
  // (F_all(1) holds a0, its input, t2 and its overhead 4).
  CHECK(remat::solve_exhaustive(c, 10).schedule.makespan == 4);
  CHECK(remat::solve_exhaustive(c, 0).min_feasible_budget == 8);

  // The DP with Rotor's check (the same transcription, one condition changed) is slower at 10,
  // and needs 12 for store-all's time.
  reference_dp rotor(c, {.check = remat::testing::tape_check::rotor});
  reference_dp remat_check(c);
  CHECK(remat_check(10) == 4);
  CHECK(rotor(10) == 5);
  CHECK(rotor(11) == 5);
  CHECK(rotor(12) == 4);
  // Rotor's schedule at 10, replayed: valid, time 5.
  using remat::backward;
  using remat::f_all;
  const replay_result slower =
      remat::simulate(c, std::vector<remat::op>{remat::f_ck(0), f_all(1), remat::loss_op(2),
                                                backward(1), f_all(0), backward(0)});
  CHECK(slower.fits(10));
  CHECK(slower.makespan == 5);
  CHECK(slower.peak_memory == 8);
}

// (f) The table-size guard: a solver_error that says how to shrink the table.
TEST_CASE("the DP table's size is guarded") {
  chain c;
  c.input_size = 1;
  c.stages.assign(3, {1, 1, 1, 1, 0, 0});
  // Store-all peaks at 6 (a_0 t_1 t_2 t_3 g_3 g_2); at 5 the DP runs, with M = 5 - 1 = 4 units.
  // The limit applies to the compact table of the fast DP, estimated before allocating.
  const remat::detail::model md = remat::detail::make_model(c, 1);
  const auto bytes = static_cast<std::size_t>(remat::detail::dense_table_bytes(
      remat::detail::make_dense_layout(
          remat::detail::make_interval_bounds(md, remat::detail::persistent_need(md),
                                              remat::detail::dp_branches::tape_and_checkpoint),
          md.L, 4),
      md.L, 4, 1));
  // With slots = budget the unit is 1: the dense DP on the sizes as given.
  CHECK(remat::solve_optimal(c, 5, {.slots = 5, .max_table_bytes = bytes}).feasible);
  try {
    (void)remat::solve_optimal(c, 5, {.slots = 5, .max_table_bytes = bytes - 1});
    FAIL("no solver_error");
  } catch (const remat::solver_error& e) {
    const std::string what = e.what();
    CHECK(what.find("fewer slots") != std::string::npos);
    CHECK(what.find("3 stages") != std::string::npos);
    CHECK(what.find("4 memory units") != std::string::npos);
  }
  // Neither an infeasible budget nor one where store-all fits needs a table.
  const size_type least = remat::solve_optimal(c, 0, exact).min_feasible_budget;
  CHECK_FALSE(
      remat::solve_optimal(c, least - 1, {.slots = least - 1, .max_table_bytes = 0}).feasible);
  CHECK(remat::solve_optimal(c, 6, {.slots = 6, .max_table_bytes = 0}).feasible);
  // The frontier DP (exact units) has its memory limit too, checked as it goes.
  CHECK_THROWS_WITH_AS((void)remat::solve_optimal(c, 5, {.max_table_bytes = 1}),
                       doctest::Contains("optimal: refused: the exact DP"), remat::solver_error);
}

// (g) Degenerate chains and budgets.
TEST_CASE("sizes all zero: everything fits in 0 and nothing is recomputed") {
  std::mt19937_64 rng(4);
  for (int n = 0; n < 50; ++n) {
    chain c = random_chain(rng);
    for (remat::stage& s : c.stages)
      s.output_size = s.tape_size = s.forward_overhead = s.backward_overhead = 0;
    for (remat::stage& s : c.stages)
      if (s.recording_overhead) s.recording_overhead = 0;
    c.input_size = c.loss_overhead = 0;
    INFO(chain_text(c));
    for (const solve_options& o : {exact, solve_options{}, solve_options{.slots = 7}}) {
      const solve_result r = remat::solve_optimal(c, 0, o);
      REQUIRE(r.feasible);
      CHECK(r.min_feasible_budget == 0);
      CHECK(r.schedule.peak_memory == 0);
      CHECK(r.schedule.makespan == store_all_replay(c).makespan);
      CHECK(remat::simulate(c, r.schedule).fits(0));
    }
  }
}

TEST_CASE("recording overheads: F_all peaks at fa, F_ck and F_none at ft") {
  // x0 = 1, x1 = 1, xb1 = 2, ft = 10, no loss overhead. Store-all: F_all(0) holds 3, the loss 4,
  // B(0) 5. With fa = 0 the least budget is 5; without a recording overhead (fa = ft) it is
  // F_all's 3 + 10.
  chain c;
  c.input_size = 1;
  c.stages = {{1, 1, 1, 2, 10, 0}};
  for (const solve_options& o : {exact, solve_options{}, solve_options{.slots = 7}}) {
    CHECK(remat::solve_optimal(c, 0, o).min_feasible_budget == 13);
    c.stages[0].recording_overhead = 0;
    const solve_result r = remat::solve_optimal(c, 5, o);
    REQUIRE(r.feasible);
    CHECK(r.min_feasible_budget == 5);
    CHECK(r.schedule.peak_memory == 5);
    CHECK(remat::simulate(c, r.schedule).fits(5));
    c.stages[0].recording_overhead.reset();
  }
  // A recording overhead above ft: store-all at 3 + 20, and a checkpointing schedule cannot help
  // a single stage.
  c.stages[0].recording_overhead = 20;
  CHECK(remat::solve_optimal(c, 0, exact).min_feasible_budget == 23);
}

TEST_CASE("one-stage chains") {
  // x0 = 1, x1 = 2, xb1 = 3, loss overhead 4. Store-all: F_all(0) 4, loss 4 + 2 + 4 = 10, B(0) 7.
  // Checkpointing a1 instead: F_ck(0) 3, loss 1 + 2 + 2 + 4 = 9 (drops a1), F_all(0) 6, B(0) 7.
  chain c;
  c.input_size = 1;
  c.stages = {{1, 1, 2, 3, 0, 0}};
  c.loss_time = 0.5;
  c.loss_overhead = 4;
  CHECK(remat::solve_optimal(c, 10, exact).schedule.makespan == 2.5);
  const solve_result r = remat::solve_optimal(c, 9, exact);
  REQUIRE(r.feasible);
  CHECK(r.schedule.makespan == 3.5);
  CHECK(remat::to_string(r.schedule) == "F_ck(0) loss F_all(0) B(0)");
  CHECK(r.min_feasible_budget == 9);
  CHECK_FALSE(remat::solve_optimal(c, 8, exact).feasible);

  // Random one-stage chains against the exhaustive search, every budget up to store-all's peak.
  std::mt19937_64 rng(5);
  for (int n = 0; n < 200; ++n) {
    const chain k = random_chain(rng, {1, 1, 10, true});
    INFO(chain_text(k));
    const size_type top = store_all_replay(k).peak_memory;
    for (size_type b = 0; b <= top; ++b) {
      CAPTURE(b);
      const solve_result o = remat::solve_optimal(k, b, exact);
      const solve_result e = remat::solve_exhaustive(k, b);
      REQUIRE(o.feasible == e.feasible);
      if (o.feasible) CHECK(o.schedule.makespan == e.schedule.makespan);
      CHECK(o.min_feasible_budget == e.min_feasible_budget);
    }
  }
}

TEST_CASE("budget 0 and negative budgets") {
  chain c;
  c.input_size = 3;
  c.stages = {{1, 1, 0, 0, 0, 0}};
  // The input alone is 3; B(0) adds g_0 (3).
  for (const solve_options& o : {exact, solve_options{}}) {
    const solve_result r = remat::solve_optimal(c, 0, o);
    CHECK_FALSE(r.feasible);
    CHECK(r.budget == 0);
    CHECK(r.schedule.ops.empty());
    CHECK(r.min_feasible_budget == 6);
    CHECK(remat::solve_optimal(c, 6, o).feasible);
    CHECK_THROWS_AS((void)remat::solve_optimal(c, -1, o), remat::solver_error);
  }
  CHECK_THROWS_AS((void)remat::solve_optimal(c, 10, {.slots = -3}), remat::solver_error);
}

// Every time finite, but a makespan that could overflow: refused by validation, naming the
// stage, before any solver can read a schedule back from a table of infinities.
TEST_CASE("times so large that a makespan could overflow a double") {
  chain c;
  c.input_size = 1;
  c.stages = {{6e307, 6e307, 2, 3, 0, 0}};  // (L + 1) fw + bw = 1.8e308 > DBL_MAX
  c.loss_overhead = 4;
  CHECK_THROWS_WITH_AS(remat::validate(c),
                       "stages[0].forward_time: the chain's times are too large: (L + 1) x the "
                       "forward times plus the backward times overflows a double",
                       remat::chain_error);
  CHECK_THROWS_AS((void)remat::solve_optimal(c, 10, exact), remat::chain_error);
  c.stages = {{5e307, 5e307, 2, 3, 0, 0}};  // 1.5e308: accepted, and solved exactly
  const solve_result r = remat::solve_optimal(c, 10, exact);
  REQUIRE(r.feasible);
  CHECK(r.schedule.makespan == 5e307 + 5e307);
  CHECK(remat::solve_optimal(c, 9, exact).schedule.makespan == 5e307 + 5e307 + 5e307);
}

namespace {

// The exact solve through the whole curve (every budget's frontier, as the sweeps run it).
solve_result whole_curve_solve(const chain& c, size_type budget, remat::solver which) {
  return remat::detail::whole_frontier_at(c, remat::detail::make_whole_frontier(c, exact, which),
                                          budget, which);
}

}  // namespace

namespace {

// A case of the one-budget property tests: a chain, a branch set and its solver, a budget from 0
// to past store-all's peak, and the peak of the fastest schedule the DP can reach (store-all's,
// or checkpoint-all's without the tape branch).
struct one_budget_case {
  const chain& c;
  remat::detail::dp_branches branches;
  remat::solver which;
  size_type budget;
  size_type fastest_peak;
};

// `check` on `chains` random chains (one in ten of 10 to `long_stages` stages with sizes to 100,
// the others short, zero sizes in both), each branch set, `budgets` budgets each.
template <class Check>
void for_one_budget_cases(std::uint64_t seed, int chains, int long_stages, int budgets,
                          Check check) {
  std::mt19937_64 rng(seed);
  for (int n = 0; n < chains; ++n) {
    const chain c = n % 10 == 0 ? random_chain(rng, {10, long_stages, 100, n % 20 == 0})
                                : random_chain(rng, {1, 10, 10, n % 3 != 0});
    INFO(chain_text(c));
    const size_type top = store_all_replay(c).peak_memory;
    for (const auto& run :
         {std::pair{remat::detail::dp_branches::tape_and_checkpoint, remat::solver::optimal},
          std::pair{remat::detail::dp_branches::checkpoint_only, remat::solver::checkpoint_only}}) {
      // (No structured binding: clang 14 does not capture one in CAPTURE's lambda.)
      const remat::detail::dp_branches branches = run.first;
      const remat::solver which = run.second;
      const size_type fastest_peak =
          remat::detail::fastest_schedule_of(c, branches).bytes.peak_memory;
      for (int k = 0; k < budgets; ++k) {
        const size_type b = std::uniform_int_distribution<size_type>(0, top + 2)(rng);
        CAPTURE(b);
        CAPTURE(remat::name(which));
        check(one_budget_case{c, branches, which, b, fastest_peak});
      }
    }
  }
}

}  // namespace

// A solve at one budget caps the frontier DP there and takes the least budget from the
// least-memory DP where the capped root says nothing: the same result as the whole curve's, bit
// for bit, exact asked for and by default (on these short chains the frontier DP finishes
// within the first probe). Budgets from below the input to beyond store-all; zero sizes; both
// branch sets.
TEST_CASE("property: the solve at one budget equals the whole curve's, bit for bit") {
  int infeasible = 0, fastest = 0, capped = 0, bounded = 0;
  for_one_budget_cases(15, remat::testing::trials(3000), 30, 3, [&](const one_budget_case& t) {
    const remat::solve_options o{.solver = t.which, .slots = remat::exact_units};
    const solve_result one = remat::solve(t.c, t.budget, o);
    const solve_result whole = whole_curve_solve(t.c, t.budget, t.which);
    const solve_result by_default = remat::solve(t.c, t.budget, {.solver = t.which});
    // The default is the exact result where an exact engine finished within its allowance, and
    // elsewhere the 500-slot schedule with bounds that hold against the exact optimum.
    CHECK(by_default.feasible == whole.feasible);
    CHECK(by_default.min_feasible_budget == whole.min_feasible_budget);
    if (by_default.exact && by_default.unit == 1) {
      CHECK(by_default == whole);
    } else if (by_default.exact) {  // the 500-slot schedule, proven optimal by its bound
      CHECK(by_default.schedule.makespan == whole.schedule.makespan);
    } else if (by_default.feasible) {
      ++bounded;
      const solve_result slots = remat::solve(t.c, t.budget, {.solver = t.which, .slots = 500});
      CHECK(by_default.schedule.ops == slots.schedule.ops);
      CHECK(by_default.schedule.makespan >= whole.schedule.makespan);
      CHECK(by_default.schedule.makespan <=
            (1 + by_default.makespan_loss) * whole.schedule.makespan * (1 + 1e-12));
    }
    if (by_default.feasible) {
      const replay_result sim = remat::simulate(t.c, by_default.schedule.ops);
      CHECK(sim.valid());
      CHECK(close(sim.makespan, by_default.schedule.makespan));
      CHECK(sim.peak_memory <= t.budget);
    }
    CHECK(one.feasible == whole.feasible);
    CHECK(one.min_feasible_budget == whole.min_feasible_budget);
    CHECK(one.exact == whole.exact);
    CHECK(one.schedule.ops == whole.schedule.ops);
    if (one.feasible) CHECK(one.schedule.makespan == whole.schedule.makespan);
    CHECK(one == whole);
    if (!whole.feasible)
      ++infeasible;
    else if (t.budget >= t.fastest_peak)
      ++fastest;
    else
      ++capped;
  });
  // Each way through the solve is taken often.
  CHECK(infeasible > remat::testing::trials(500));
  CHECK(fastest > remat::testing::trials(500));
  CHECK(capped > remat::testing::trials(2000));
  MESSAGE("default solves bounded rather than exact: " << bounded);
}

// Branch and bound at one budget: the whole curve's value, bit for bit, and the dense DP's
// schedule (the first branch of equally fast ones at that very memory, which can differ from the
// frontier's).
TEST_CASE("property: one budget by branch and bound: the whole curve's value, the dense schedule") {
  int searched = 0;
  for_one_budget_cases(17, remat::testing::trials(1500), 24, 2, [&](const one_budget_case& t) {
    const solve_result whole = whole_curve_solve(t.c, t.budget, t.which);
    if (!whole.feasible || t.budget >= t.fastest_peak) return;
    const remat::detail::model md = remat::detail::make_model(t.c, 1);
    const size_type m = t.budget - md.x[0];
    const remat::detail::interval_bounds b = remat::detail::make_interval_bounds(
        md, remat::detail::persistent_need(md, t.branches), t.branches);
    const remat::detail::search_result r = remat::detail::search_dp(md, b, m, 64, t.branches);
    REQUIRE(r.complete);
    ++searched;
    CHECK(r.value == whole.schedule.makespan);
    const remat::detail::reference_table ref = remat::detail::reference_dp(md, m, t.branches);
    CHECK(r.ops == remat::detail::reference_ops(md, ref, 0, md.L, m));
  });
  CHECK(searched > remat::testing::trials(1000));
}

TEST_CASE("one budget: store-all fits, or nothing does; the least budget either way") {
  const chain c = tall_tape();  // least budget 14, store-all's peak 17, input 1
  for (const size_type b : {size_type{0}, size_type{13}, size_type{17}, size_type{100}}) {
    CAPTURE(b);
    const solve_result r = remat::solve_optimal(c, b, exact);
    CHECK(r.feasible == (b >= 14));
    CHECK(r.min_feasible_budget == 14);
    CHECK(r.exact);  // the least budget is exact, whether the budget reaches it or not
    CHECK(r == whole_curve_solve(c, b, remat::solver::optimal));
    if (b >= 17) CHECK(r.schedule.ops == remat::detail::store_all_ops(length(c)));
  }
}

// The default's fallback where no exact engine finishes (an allowance of 0 in its plan): the
// 500-slot solve's schedule, the exact least budget, and bounds that hold against the exact
// optimum of the whole curve.
TEST_CASE("property: the default solve bounded: the 500-slot schedule, and its bounds hold") {
  std::mt19937_64 rng(16);
  int bounded = 0, proven = 0, least_peak = 0;
  for (int n = 0; n < remat::testing::trials(40); ++n) {
    const chain c = random_chain(rng, {25, 40, 1000000, true});
    INFO(chain_text(c));
    const size_type top = store_all_replay(c).peak_memory;
    const remat::detail::whole_frontier whole =
        remat::detail::make_whole_frontier(c, exact, remat::solver::optimal);
    const remat::detail::model& md = whole.md;
    // The least budget (and just above), where 500 slots can round the sizes past the budget,
    // and shares of store-all's peak.
    const size_type least = whole.min_feasible_budget;
    for (const size_type b :
         {least, least + least / 1000, static_cast<size_type>(0.25 * static_cast<double>(top)),
          static_cast<size_type>(0.4 * static_cast<double>(top)),
          static_cast<size_type>(0.6 * static_cast<double>(top))}) {
      CAPTURE(b);
      const double optimum = whole.table.value(0, md.L, b - md.x[0]);
      remat::detail::dp_choice p = remat::detail::choose(c, b, {}, remat::solver::optimal);
      auto* engines = std::get_if<remat::detail::engines_step>(&p.step);
      if (engines == nullptr) continue;  // settled
      engines->allowance = 0;
      REQUIRE(engines->fallback);
      const solve_result r = remat::detail::run(c, p, {});
      const solve_result slots = remat::solve_optimal(c, b, {.slots = 500});
      CHECK(r.min_feasible_budget == whole.min_feasible_budget);
      // Feasible from the exact least budget up, even where 500 slots round the sizes past it.
      CHECK(r.feasible == (b >= whole.min_feasible_budget));
      if (!r.feasible) continue;
      CHECK(r.unit == slots.unit);
      if (slots.feasible) {
        CHECK(r.schedule.ops == slots.schedule.ops);
        CHECK(r.schedule.makespan == slots.schedule.makespan);
      } else {
        ++least_peak;
        const replay_result sim = remat::simulate(c, r.schedule.ops);
        CHECK(sim.valid());
        CHECK(sim.peak_memory <= b);
      }
      CHECK(r.schedule.makespan >= optimum);
      if (r.exact) {
        ++proven;
        CHECK(r.schedule.makespan == optimum);
        continue;
      }
      ++bounded;
      CHECK(r.schedule.makespan <= (1 + r.makespan_loss) * optimum * (1 + 1e-12));
      // At least as fast as the exact optimum with memory_loss of the budget less.
      const size_type equal = b - md.x[0] - std::llround(r.memory_loss * static_cast<double>(b));
      CHECK(r.schedule.makespan <= whole.table.value(0, md.L, equal));
    }
  }
  CHECK(bounded > remat::testing::trials(40));
  CHECK(least_peak > 0);
}

// The default solve is never slower than the 500-slot one, and fits wherever it does.
TEST_CASE("property: the default solve is never slower than Rotor's 500 slots") {
  std::mt19937_64 rng(18);
  for (int n = 0; n < remat::testing::trials(60); ++n) {
    const chain c = random_chain(rng, {10, 60, 1000000, n % 2 == 0});
    INFO(chain_text(c));
    const size_type top = store_all_replay(c).peak_memory;
    for (const double share : {0.2, 0.35, 0.5, 0.8}) {
      const auto b = static_cast<size_type>(share * static_cast<double>(top));
      CAPTURE(b);
      const solve_result by_default = remat::solve_optimal(c, b);
      const solve_result slots = remat::solve_optimal(c, b, {.slots = 500});
      CHECK(by_default.min_feasible_budget <= slots.min_feasible_budget);
      if (!slots.feasible) continue;
      REQUIRE(by_default.feasible);
      CHECK(by_default.schedule.makespan <= slots.schedule.makespan);
    }
  }
}

// The default is exact wherever its estimate (`estimate_solve_at`: the same dispatch, costed)
// says an exact engine fits the default's limits (tuning.hpp `default_exact_seconds`,
// `default_exact_bytes`), which on these chains it always does (the choice is made on estimates
// at fixed rates: the same on every machine); and a chain's options never make it slower than on
// the same chain without them (each stage's first option only). The bundled chains, and random
// chains of 5 to 30 stages with byte-sized sizes (up to 10^9, no common factor), half of them with
// up to four options per stage, at budgets drawn between the least and store-all's peak: the
// exact optimum, schedule and all.
TEST_CASE("property: the default is exact where its estimate allows, and options never slow it") {
  std::vector<std::pair<std::string, chain>> chains;
  for (const auto& e :
       std::filesystem::directory_iterator(std::string(REMAT_SOURCE_DIR) + "/examples/chains"))
    if (e.path().extension() == ".json")
      chains.emplace_back(e.path().filename().string(), remat::io::read_chain_file(e.path()).chain);
  REQUIRE(chains.size() >= 5);
  std::mt19937_64 rng(49);
  for (int n = 0; n < remat::testing::trials(24); ++n) {
    chain c = random_chain(rng, {.min_stages = 5, .max_stages = 30, .max_size = 1000000000});
    if (n % 2 == 1) remat::testing::add_random_options(rng, c, 4, 1000000000);
    chains.emplace_back("random " + std::to_string(n), std::move(c));
  }
  int with_options = 0;
  for (const auto& named : chains) {
    const std::string& name = named.first;  // (clang 14 captures no structured binding)
    const chain& c = named.second;
    CAPTURE(name);
    INFO(chain_text(c));
    const std::optional<chain> plain = remat::detail::first_options_only(c);
    with_options += plain ? 1 : 0;
    const size_type least = remat::solve_optimal(c, 0).min_feasible_budget;
    const size_type top = store_all_replay(c).peak_memory;
    std::uniform_int_distribution<size_type> budget(least, top);
    for (int k = 0; k < remat::testing::trials(12); ++k) {
      const size_type b = budget(rng);
      CAPTURE(b);
      const remat::solve_estimate e = remat::estimate_solve_at(c, b);
      const solve_result by_default = remat::solve_optimal(c, b);
      const solve_result exact_run = remat::solve_optimal(c, b, exact);
      REQUIRE(by_default.feasible);
      CHECK(e.within_limits);
      CHECK(e.exact);
      CHECK(by_default.exact == e.exact);
      CHECK(by_default.unit == 1);
      CHECK(by_default.schedule.makespan == exact_run.schedule.makespan);
      CHECK(by_default.schedule.ops == exact_run.schedule.ops);
      if (!plain) continue;
      const solve_result without = remat::solve_optimal(*plain, b);
      if (without.feasible) CHECK(by_default.schedule.makespan <= without.schedule.makespan);
    }
  }
  CHECK(with_options > remat::testing::trials(8));
}

// Where the default falls back (no allowance left for an exact engine), a chain with options
// gets the faster of the 500-slot schedule and the default's schedule of the same chain without
// its options: never slower than that, and bounded against its own exact optimum.
TEST_CASE("property: the default's fallback with options is never slower than without them") {
  std::mt19937_64 rng(50);
  int plain_faster = 0, compared = 0;
  for (int n = 0; n < remat::testing::trials(30); ++n) {
    chain c = random_chain(rng, {.min_stages = 8, .max_stages = 30, .max_size = 1000000});
    remat::testing::add_random_options(rng, c, 3, 1000000);
    const std::optional<chain> plain = remat::detail::first_options_only(c);
    if (!plain) continue;
    INFO(chain_text(c));
    const size_type top = store_all_replay(c).peak_memory;
    for (const double share : {0.3, 0.5, 0.8}) {
      const auto b = static_cast<size_type>(share * static_cast<double>(top));
      CAPTURE(b);
      remat::detail::dp_choice p = remat::detail::choose(c, b, {}, remat::solver::optimal);
      auto* engines = std::get_if<remat::detail::engines_step>(&p.step);
      if (engines == nullptr) continue;  // settled
      engines->allowance = 0;
      REQUIRE(engines->fallback);
      const solve_result r = remat::detail::run(c, p, {});
      const solve_result without = remat::solve_optimal(*plain, b);
      const solve_result slots = remat::solve_optimal(c, b, {.slots = 500});
      const solve_result optimum = remat::solve_optimal(c, b, exact);
      if (!without.feasible) continue;
      ++compared;
      REQUIRE(r.feasible);
      CHECK(r.schedule.makespan <= without.schedule.makespan);
      if (slots.feasible) CHECK(r.schedule.makespan <= slots.schedule.makespan);
      if (slots.feasible && without.schedule.makespan < slots.schedule.makespan) {
        ++plain_faster;
        CHECK(r.schedule.ops == without.schedule.ops);
      }
      CHECK(r.schedule.makespan >= optimum.schedule.makespan);
      CHECK(r.schedule.makespan <= (1 + r.makespan_loss) * optimum.schedule.makespan * (1 + 1e-12));
      const replay_result sim = remat::simulate(c, r.schedule.ops);
      CHECK(sim.valid());
      CHECK(sim.peak_memory <= b);
    }
  }
  CHECK(compared > remat::testing::trials(30));
  CHECK(plain_faster > 0);
}

// The zoo's chains (all but ResNet-1001, whose exact solves take seconds: bench_solver_scaling,
// `default/resnet1001/*`) and op graphs, with and without block options: at 20%, 50% and 90% of
// store-all's peak the estimate allows the exact engines and the default is the exact optimum,
// and a graph's block options never make it slower.
TEST_CASE("the zoo's chains and graphs: the default is exact, and block options never slow it") {
  std::vector<std::pair<std::string, chain>> chains;
  for (const std::string_view m : remat::zoo::model_names)
    if (m != "resnet1001") chains.emplace_back(std::string(m), remat::zoo::build(m).chain);
  for (const std::string_view m : {"resnet50", "densenet121", "gpt2-small", "unet"}) {
    const remat::graph g = remat::zoo::build_graph(m, {}).graph;
    chains.emplace_back(std::string(m) + " graph", remat::linearize(g).chain);
    chains.emplace_back(std::string(m) + " graph, block options",
                        remat::linearize(g, {.block_options = true}).chain);
  }
  std::vector<double> without_options;
  size_type top_without = 0;
  for (const auto& named : chains) {
    const std::string& name = named.first;  // (clang 14 captures no structured binding)
    const chain& c = named.second;
    CAPTURE(name);
    const size_type top = store_all_replay(c).peak_memory;
    const bool options = name.ends_with("block options");
    // Option 0 of a block is plain autograd: the same store-all peak as without options.
    if (options) CHECK(top == top_without);
    top_without = top;
    std::size_t k = 0;
    for (const double share : {0.2, 0.5, 0.9}) {
      const auto b = static_cast<size_type>(share * static_cast<double>(top));
      CAPTURE(b);
      const solve_result by_default = remat::solve_optimal(c, b);
      const solve_result exact_run = remat::solve_optimal(c, b, exact);
      const remat::solve_estimate e = remat::estimate_solve_at(c, b);
      CHECK(by_default.feasible == exact_run.feasible);
      const double makespan = by_default.feasible ? by_default.schedule.makespan : infinite;
      if (!options) {
        without_options.push_back(makespan);
      } else {
        // (The graph's chain without block options came just before, at the same budgets.)
        CHECK(makespan <= without_options[without_options.size() - 3 + k]);
        ++k;
      }
      if (!by_default.feasible) continue;
      CHECK(e.exact);
      CHECK(by_default.exact);
      CHECK(by_default.schedule.makespan == exact_run.schedule.makespan);
    }
  }
}

}  // namespace unit_solvers_optimal_test
