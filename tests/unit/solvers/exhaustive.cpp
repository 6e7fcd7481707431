// The exhaustive search: the ground truth the persistent DP is measured against. On random small
// chains it is never slower than the optimal DP, feasible wherever the DP is, and its schedules
// replay to what it claims; hand-made chains show it beating the DP where it may drop the input
// of a held tape; it refuses long chains.
#include <remat/solvers/exhaustive.hpp>

#include <remat/simulate.hpp>
#include <remat/solvers/optimal.hpp>
#include <remat/solvers/store_all.hpp>

#include <doctest/doctest.h>

#include "chain_text.hpp"
#include "random_chain.hpp"
#include "reference_dp.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace unit_solvers_exhaustive_test {

namespace {

using remat::chain;
using remat::replay_result;
using remat::size_type;
using remat::solve_result;
using remat::testing::chain_text;
using remat::testing::random_chain;

constexpr remat::solve_options exact{.slots = remat::exact_units};

bool close(double a, double b) {
  return std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b));
}

// Solves `c` at `budget` with both solvers and checks the exhaustive result against its replay
// and against the DP's. Returns the exhaustive result.
solve_result check_against_optimal(const chain& c, size_type budget,
                                   const remat::solve_options& options = {}) {
  CAPTURE(budget);
  CAPTURE(options.drop_recorded_inputs);
  const solve_result e = remat::solve_exhaustive(c, budget, options);
  const solve_result o = remat::solve_optimal(c, budget, exact);
  CHECK(e.budget == budget);
  CHECK(e.unit == 1);
  CHECK(e.min_feasible_budget <= o.min_feasible_budget);
  CHECK(e.feasible == (budget >= e.min_feasible_budget));
  if (o.feasible) CHECK(e.feasible);
  if (!e.feasible) {
    CHECK(e.schedule.ops.empty());
    return e;
  }
  const replay_result r = remat::simulate(c, e.schedule);
  REQUIRE(r.valid());
  CHECK(r.peak_memory <= budget);
  CHECK(r.peak_memory == e.schedule.peak_memory);
  CHECK(close(r.makespan, e.schedule.makespan));
  if (o.feasible)
    CHECK((e.schedule.makespan < o.schedule.makespan ||
           close(e.schedule.makespan, o.schedule.makespan)));
  return e;
}

// The fastest-path search alone, as solve_exhaustive runs it: whether any schedule fits.
bool search_finds(const chain& c, size_type budget) {
  return remat::detail::exhaustive_search(
             c, budget, 0.0, [](double path, double time, size_type) { return path + time; })
      .first;
}

}  // namespace

TEST_CASE("property: random chains of at most 5 stages, several budgets") {
  std::mt19937_64 rng(7);
  for (int n = 0; n < 500; ++n) {
    // Mostly short chains: the search is exponential, a 5-stage chain costs as much as a hundred
    // 3-stage ones.
    const int stages = n % 50 == 0 ? 5 : 1 + n % 4;
    const chain c = random_chain(rng, {stages, stages, 10, true});
    INFO(chain_text(c));
    const size_type top = remat::simulate(c, remat::detail::store_all_ops(stages)).peak_memory;
    const size_type least = remat::solve_optimal(c, 0, exact).min_feasible_budget;

    // At the DP's least budget: this also gives the search's own least budget. The search over
    // every op sequence of the model (drop_recorded_inputs) is never worse than the default one.
    const size_type own_least = check_against_optimal(c, least).min_feasible_budget;
    const solve_result model = check_against_optimal(c, least, {.drop_recorded_inputs = true});
    CHECK(model.min_feasible_budget <= own_least);

    // A random budget up to a little above store-all's peak.
    check_against_optimal(c, std::uniform_int_distribution<size_type>(least, top + 2)(rng));
    if (stages == 5) continue;

    // The search's least budget: a schedule there, none one below. The two searches of
    // solve_exhaustive (least peak, then least time) must agree on where feasibility starts.
    if (own_least < least) check_against_optimal(c, own_least);
    if (stages <= 3) {
      CHECK(search_finds(c, own_least));
      if (own_least > 0) CHECK_FALSE(search_finds(c, own_least - 1));
      // At store-all's peak nothing beats store-all's time, and the search finds it.
      const solve_result at_top = remat::solve_exhaustive(c, top);
      REQUIRE(at_top.feasible);
      CHECK(close(at_top.schedule.makespan,
                  remat::simulate(c, remat::detail::store_all_ops(stages)).makespan));
    }
  }
}

// A non-persistent schedule that fits where no persistent one does. Sizes (input 0):
//   stage 0: x1 = 4, xb1 = 5, ft0 = 5, bt0 = 2;  stage 1: x2 = 0, xb2 = 3, ft1 = 6.
// F_all(1) needs its input (4 at least), t2 and its overhead: 13. A persistent schedule runs
// F_all(0) either before F_all(1) (t1 held during it: 5 + 3 + 6 = 14) or, checkpointing a1,
// after B(1), holding g1: 4 + 5 + 5 = 14. The search records t1 between the loss and B(1), when
// only t2 (3) is held: F_ck(0) F_all(1) F_none(1) loss F_all(0) B(1) B(0), peak 13. F_none(1)
// reruns stage 1 only to drop a1 (its output a2 is empty) while t2 is held: a schedule of the
// model that no executor runs as modelled (t2's recording holds a1), so the search finds it only
// when asked (`drop_recorded_inputs`), and by default fits where the persistent ones do.
TEST_CASE("the search fits below the least persistent budget") {
  chain c;
  c.stages = {{1, 1, 4, 5, 5, 2}, {1, 1, 0, 3, 6, 0}};
  CHECK(remat::solve_optimal(c, 0, exact).min_feasible_budget == 14);
  CHECK_FALSE(remat::solve_optimal(c, 13, exact).feasible);

  const solve_result runnable = remat::solve_exhaustive(c, 13);
  CHECK(runnable.min_feasible_budget == 14);
  CHECK_FALSE(runnable.feasible);

  const remat::solve_options model{.drop_recorded_inputs = true};
  const solve_result e = remat::solve_exhaustive(c, 13, model);
  CHECK(e.min_feasible_budget == 13);
  REQUIRE(e.feasible);
  CHECK(remat::simulate(c, e.schedule).fits(13));
  CHECK_FALSE(remat::solve_exhaustive(c, 12, model).feasible);

  using remat::f_all;
  const std::vector<remat::op> by_hand = {remat::f_ck(0),    f_all(1), remat::f_none(1),
                                          remat::loss_op(2), f_all(0), remat::backward(1),
                                          remat::backward(0)};
  const replay_result r = remat::simulate(c, by_hand);
  CHECK(r.valid());
  CHECK(r.peak_memory == 13);
  CHECK(r.makespan == 6);
  // Store-all's 4 plus two reruns, both needed at 13: F_all(0) must come after F_all(1), so
  // stage 0 runs twice; and a1 must be dropped before it without B(1), which only F_none(1) does.
  CHECK(e.schedule.makespan == 6);
}

// A non-persistent schedule faster than the best persistent one. Three stages (input 0):
//   fw 2 0.5 1, bw 1.5 1.5 0, x 3 2 0, xb 4 2 3, ft 1 4 0, bt 0 0 2; loss 0.5, overhead 3.
// At 11, F_ck(0) F_all(1) F_none(1) F_all(2) loss B(2) F_all(0) B(1) B(0) holds t2 and a2 at
// once (stage 1 run twice, 0.5 each) and recomputes stage 0 once: 7 + 0.5 + 2 = 9.5, peak 11 in
// F_none(1) (a1 t2 a2 + 4), B(2) and B(1). The best persistent schedule takes 11.5: the
// library's DP and the independent transcription of docs/model.md agree. F_none(1) drops a1
// while t2 is held, so the search finds it only when asked (`drop_recorded_inputs`); by default
// it finds the persistent optimum.
TEST_CASE("the search beats the best persistent schedule") {
  chain c;
  c.stages = {{2, 1.5, 3, 4, 1, 0}, {0.5, 1.5, 2, 2, 4, 0}, {1, 0, 0, 3, 0, 2}};
  c.loss_time = 0.5;
  c.loss_overhead = 3;
  const solve_result o = remat::solve_optimal(c, 11, exact);
  REQUIRE(o.feasible);
  CHECK(o.schedule.makespan == 11.5);
  CHECK(remat::testing::reference_dp(c)(11) == 11.5);

  const solve_result runnable = remat::solve_exhaustive(c, 11);
  REQUIRE(runnable.feasible);
  CHECK(runnable.schedule.makespan == 11.5);

  const solve_result e = remat::solve_exhaustive(c, 11, {.drop_recorded_inputs = true});
  REQUIRE(e.feasible);
  CHECK(e.schedule.makespan == 9.5);
  CHECK(remat::simulate(c, e.schedule).fits(11));

  using remat::backward;
  using remat::f_all;
  const replay_result r =
      remat::simulate(c, std::vector<remat::op>{remat::f_ck(0), f_all(1), remat::f_none(1),
                                                f_all(2), remat::loss_op(3), backward(2), f_all(0),
                                                backward(1), backward(0)});
  CHECK(r.valid());
  CHECK(r.makespan == 9.5);
  CHECK(r.peak_memory == 11);
}

TEST_CASE("the search refuses long chains, and negative budgets") {
  static_assert(remat::exhaustive_max_stages == 7);
  for (std::size_t stages : {std::size_t{8}, std::size_t{9}, std::size_t{100000}}) {
    chain c;
    c.input_size = 1;
    c.stages.assign(stages, {1, 1, 1, 1, 0, 0});
    CHECK_THROWS_WITH_AS((void)remat::solve_exhaustive(c, 1000),
                         ("exhaustive: the chain has " + std::to_string(stages) +
                          " stages; the search over all op sequences is limited to 7 (use the "
                          "optimal solver)")
                             .c_str(),
                         remat::solver_error);
  }
  chain c;
  c.stages.assign(2, {1, 1, 1, 1, 0, 0});
  CHECK_THROWS_AS((void)remat::solve_exhaustive(c, -1), remat::solver_error);
}

TEST_CASE("sizes all zero: nothing to save, store-all's time in budget 0") {
  chain c;
  c.stages = {{1, 2, 0, 0, 0, 0}, {0.5, 0, 0, 0, 0, 0}, {0, 1, 0, 0, 0, 0}};
  c.loss_time = 0.25;
  const solve_result e = remat::solve_exhaustive(c, 0);
  REQUIRE(e.feasible);
  CHECK(e.min_feasible_budget == 0);
  CHECK(e.schedule.makespan == 1 + 2 + 0.5 + 1 + 0.25);
  CHECK(remat::simulate(c, e.schedule).fits(0));
}

}  // namespace unit_solvers_exhaustive_test
