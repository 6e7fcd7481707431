// Tests of remat::sweep: where the budgets lie, what every result is, and that the optimal
// makespan never grows with the budget.
#include <remat/io/chain_json.hpp>
#include <remat/solve.hpp>
#include <remat/sweep.hpp>
#include <remat/trade_off.hpp>

#include <doctest/doctest.h>

#include "chain_text.hpp"
#include "random_chain.hpp"

#include <cstddef>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace unit_sweep_test {

namespace {

const std::string rockmate =
    std::string(REMAT_SOURCE_DIR) + "/tests/data/chains/resnet18-rockmate.json";
const std::string tiny = std::string(REMAT_SOURCE_DIR) + "/tests/data/chains/tiny-mlp.json";

// Every solver that runs on a chain without a link to host memory.
std::vector<remat::solver> every_solver() {
  std::vector<remat::solver> out;
  for (const remat::solver s : remat::all_solvers)
    if (!remat::needs_link(s)) out.push_back(s);
  return out;
}

// A series' curve: the points of `remat::trade_off` for the DP solvers on exact sizes (empty
// otherwise), each the result `solve` gives at the point's budget, its schedule replaying at the
// point's makespan within the point's budget; strictly decreasing makespans.
void check_curve(const remat::chain& c, const remat::sweep_options& o,
                 const remat::sweep_series& series) {
  const bool dp =
      series.solver == remat::solver::optimal || series.solver == remat::solver::checkpoint_only;
  if (!dp || (o.slots != remat::exact_units && o.slots != remat::auto_slots)) {
    CHECK(series.curve.empty());
    return;
  }
  // By default the sweep reads its budgets from the whole curve where that is estimated within
  // about the budgets' own solves, and solves them one by one elsewhere (no curve).
  if (o.slots == remat::auto_slots && series.curve.empty()) return;
  const remat::solve_options so{.solver = series.solver, .slots = remat::exact_units};
  const remat::trade_off_result t = remat::trade_off(c, so);
  REQUIRE(series.curve.size() == t.points.size());
  REQUIRE(!series.curve.empty());
  CHECK(series.curve.front().budget == series.min_feasible_budget);
  for (std::size_t k = 0; k < series.curve.size(); ++k) {
    const remat::solve_result& r = series.curve[k];
    CAPTURE(k);
    CAPTURE(r.budget);
    CHECK(r.budget == t.points[k].budget);
    REQUIRE(r.feasible);
    // The point's makespan; at the fastest schedule's peak that schedule's, replayed (the same
    // sum in another order).
    CHECK(r.schedule.makespan == doctest::Approx(t.points[k].makespan).epsilon(1e-12));
    CHECK(r == remat::solve(c, r.budget, so));
    const remat::replay_result replayed = remat::simulate(c, r.schedule);
    REQUIRE(replayed.valid());
    CHECK(replayed.peak_memory <= r.budget);
    CHECK(replayed.makespan == doctest::Approx(t.points[k].makespan).epsilon(1e-12));
    if (k > 0) {
      CHECK(r.budget > series.curve[k - 1].budget);
      CHECK(r.schedule.makespan < series.curve[k - 1].schedule.makespan);
    }
  }
}

// What holds of every sweep: the range, the spacing, one result per budget and solver, each one
// what `solve` says for that budget, and every schedule replaying within its budget.
void check_sweep(const remat::chain& c, const remat::sweep_options& o,
                 const remat::sweep_result& s) {
  INFO(remat::testing::chain_text(c));
  const std::vector<remat::op> all =
      remat::detail::store_all_ops(static_cast<std::int32_t>(c.length()));
  const remat::replay_result base = remat::simulate(c, std::span<const remat::op>(all));
  CHECK(s.store_all_memory == base.peak_memory);
  CHECK(s.store_all_makespan == base.makespan);

  const remat::size_type least = remat::solve_optimal(c, 0, {.slots = o.slots}).min_feasible_budget;
  REQUIRE(!s.budgets.empty());
  CHECK(s.budgets.front() == least);
  CHECK(s.budgets.back() == std::max(least, base.peak_memory));
  CHECK(s.budgets.size() <= o.points);
  if (s.budgets.back() - s.budgets.front() >= static_cast<remat::size_type>(o.points - 1))
    CHECK(s.budgets.size() == o.points);
  // Evenly spaced: consecutive gaps differ by at most one unit.
  for (std::size_t k = 1; k < s.budgets.size(); ++k) {
    CHECK(s.budgets[k] > s.budgets[k - 1]);
    const remat::size_type gap = s.budgets[k] - s.budgets[k - 1];
    const remat::size_type first_gap = s.budgets.size() > 1 ? s.budgets[1] - s.budgets[0] : 0;
    CHECK(gap - first_gap <= 1);
    CHECK(first_gap - gap <= 1);
  }

  REQUIRE(s.series.size() == o.solvers.size());
  for (std::size_t n = 0; n < s.series.size(); ++n) {
    const remat::sweep_series& series = s.series[n];
    CAPTURE(remat::name(series.solver));
    CHECK(series.solver == o.solvers[n]);
    REQUIRE(series.results.size() == s.budgets.size());
    for (std::size_t k = 0; k < s.budgets.size(); ++k) {
      const remat::solve_result& r = series.results[k];
      CAPTURE(s.budgets[k]);
      CHECK(r.budget == s.budgets[k]);
      CHECK(r.min_feasible_budget == series.min_feasible_budget);
      CHECK(r.feasible == (r.min_feasible_budget != remat::solve_result::no_budget &&
                           s.budgets[k] >= r.min_feasible_budget));
      const remat::solve_options so{.solver = series.solver, .slots = o.slots};
      CHECK(r == remat::solve(c, s.budgets[k], so));
      if (!r.feasible) {
        CHECK(r.schedule.ops.empty());
        continue;
      }
      const remat::replay_result replayed = remat::simulate(c, r.schedule);
      REQUIRE(replayed.valid());
      CHECK(replayed.peak_memory <= s.budgets[k]);
      CHECK(replayed.peak_memory == r.schedule.peak_memory);
      CHECK(replayed.makespan == doctest::Approx(r.schedule.makespan).epsilon(1e-12));
    }
    check_curve(c, o, series);
  }
}

}  // namespace

TEST_CASE("sweep: budgets from optimal's least to store-all, every solver, every result checked") {
  const remat::io::chain_file f = remat::io::read_chain_file(rockmate);
  for (const remat::size_type slots : {remat::exact_units, remat::size_type{200}}) {
    CAPTURE(slots);
    remat::sweep_options o;
    o.solvers = every_solver();
    o.solvers.erase(std::find(o.solvers.begin(), o.solvers.end(), remat::solver::exhaustive));
    o.slots = slots;
    const remat::sweep_result s = remat::sweep(f.chain, o);
    check_sweep(f.chain, o, s);
    CHECK(s.budgets.size() == 20);
    // Store-all fits only its own peak, the last budget.
    const remat::sweep_series& store_all = s.series[1];
    REQUIRE(store_all.solver == remat::solver::store_all);
    for (std::size_t k = 0; k + 1 < s.budgets.size(); ++k) CHECK(!store_all.results[k].feasible);
    CHECK(store_all.results.back().feasible);
    // The optimal solver fits every budget of the sweep, the first included.
    for (const remat::solve_result& r : s.series[0].results) CHECK(r.feasible);
  }
}

TEST_CASE("sweep: the optimal makespan never increases with the budget (exact sizes)") {
  // Exact sizes: a schedule that fits a budget fits every larger one. (With slots, a larger
  // budget has a coarser unit, and the rounding can cost more than the extra memory gives.)
  const remat::io::chain_file f = remat::io::read_chain_file(rockmate);
  const remat::sweep_result s = remat::sweep(f.chain, {.points = 60, .slots = remat::exact_units});
  const std::vector<remat::solve_result>& r = s.series.front().results;
  for (std::size_t k = 1; k < r.size(); ++k) {
    CAPTURE(s.budgets[k]);
    REQUIRE(r[k].feasible);
    CHECK(r[k].schedule.makespan <= r[k - 1].schedule.makespan);
  }
  // ... and it reaches the store-all makespan at the store-all peak.
  CHECK(r.back().schedule.makespan == doctest::Approx(s.store_all_makespan).epsilon(1e-12));
  CHECK(r.front().schedule.makespan > r.back().schedule.makespan);

  std::mt19937_64 rng(7);
  for (int n = 0; n < 100; ++n) {
    const remat::chain c = remat::testing::random_chain(rng, {.min_stages = 1, .max_stages = 4});
    const remat::sweep_options o{
        .solvers = every_solver(), .points = 8, .slots = remat::exact_units};
    const remat::sweep_result rs = remat::sweep(c, o);
    check_sweep(c, o, rs);
    INFO(remat::testing::chain_text(c));
    const std::vector<remat::solve_result>& opt = rs.series.front().results;
    const std::vector<remat::solve_result>& exh = rs.series[2].results;
    for (std::size_t k = 0; k < opt.size(); ++k) {
      REQUIRE(opt[k].feasible);
      if (k > 0) CHECK(opt[k].schedule.makespan <= opt[k - 1].schedule.makespan);
      // The search over all sequences is never slower than the best persistent schedule.
      REQUIRE(exh[k].feasible);
      CHECK(exh[k].schedule.makespan <= opt[k].schedule.makespan + 1e-9);
    }
  }
}

TEST_CASE("sweep: progress after every solve, fewer budgets than points on a narrow range") {
  const remat::io::chain_file f = remat::io::read_chain_file(tiny);
  std::vector<std::size_t> calls;
  std::size_t reported_total = 0;
  remat::sweep_options o{.solvers = {remat::solver::optimal, remat::solver::chen_sqrt},
                         .points = 5};
  o.progress = [&](std::size_t done, std::size_t total) {
    calls.push_back(done);
    reported_total = total;
  };
  const remat::sweep_result s = remat::sweep(f.chain, o);
  check_sweep(f.chain, o, s);
  CHECK(reported_total == 10);
  CHECK(calls == std::vector<std::size_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10});

  // A chain whose least budget is close to its store-all peak: the range holds fewer integers
  // than points, and each budget appears once.
  remat::chain c;
  c.input_size = 1;
  c.stages.push_back({.forward_time = 1, .backward_time = 1, .output_size = 1, .tape_size = 1});
  const remat::sweep_result narrow = remat::sweep(c, {.points = 50, .slots = remat::exact_units});
  check_sweep(c, {.points = 50, .slots = remat::exact_units}, narrow);
  CHECK(narrow.budgets.size() < 50);
}

TEST_CASE("sweep: even budgets are exact near the largest sizes; requests it cannot honour") {
  const remat::size_type big = remat::size_type{1} << 62;
  const std::vector<remat::size_type> b = remat::detail::even_budgets(big / 3, big, 7);
  REQUIRE(b.size() == 7);
  CHECK(b.front() == big / 3);
  CHECK(b.back() == big);
  CHECK(remat::detail::even_budgets(10, 13, 4) == std::vector<remat::size_type>{10, 11, 12, 13});
  CHECK(remat::detail::even_budgets(10, 11, 4) == std::vector<remat::size_type>{10, 11});
  CHECK(remat::detail::even_budgets(5, 5, 3) == std::vector<remat::size_type>{5});

  const remat::io::chain_file f = remat::io::read_chain_file(rockmate);
  CHECK_THROWS_AS(remat::sweep(f.chain, {.points = 1}), remat::solver_error);
  CHECK_THROWS_AS(remat::sweep(f.chain, {.solvers = {}}), remat::solver_error);
  // The DP solvers' limits are those of the sweep: a time limit below any frontier DP's refuses.
  CHECK_THROWS_AS(remat::sweep(f.chain, {.max_estimated_seconds = 1e-12}), remat::solver_error);
  CHECK_NOTHROW(remat::sweep(f.chain, {.max_estimated_seconds = 60}));
  // A solver that refuses the chain refuses the sweep, as `solve` does.
  CHECK_THROWS_AS(remat::sweep(f.chain, {.solvers = {remat::solver::exhaustive}}),
                  remat::solver_error);
}

}  // namespace unit_sweep_test
