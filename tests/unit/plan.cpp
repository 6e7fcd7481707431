#include <remat/check_plan.hpp>
#include <remat/plan.hpp>

#include <doctest/doctest.h>
#include <random_chain.hpp>

#include <random>
#include <string>

namespace unit_plan_test {

namespace {

using remat::size_type;

// A random chain with sizes in bytes that are not multiples of the alignment, so that placing
// them wastes room and the first schedule's arena often exceeds the budget.
remat::chain byte_chain(std::mt19937_64& rng, int max_stages = 10) {
  remat::chain c = remat::testing::random_chain(rng, {.max_stages = max_stages, .max_size = 12});
  auto scale = [](size_type& s) { s = s * 37; };
  scale(c.input_size);
  scale(c.loss_overhead);
  for (remat::stage& s : c.stages) {
    scale(s.output_size);
    scale(s.tape_size);
    scale(s.forward_overhead);
    scale(s.backward_overhead);
  }
  return c;
}

size_type store_all_peak(const remat::chain& c) {
  return remat::solve(c, remat::max_size, {.solver = remat::solver::store_all}).min_feasible_budget;
}

}  // namespace

TEST_CASE("the arena never exceeds the budget, and retries happen when it would") {
  std::mt19937_64 rng(99);
  int feasible = 0, retried_and_fit = 0, infeasible_once_placed = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const remat::chain c = byte_chain(rng);
    const size_type top = store_all_peak(c);
    for (const double f : {0.35, 0.5, 0.7, 1.0}) {
      const auto budget = static_cast<size_type>(f * static_cast<double>(top));
      for (const size_type alignment : {1, 64}) {
        const remat::plan_result p = remat::plan(c, budget, {.alignment = alignment});
        REQUIRE(p.attempts >= 1);
        REQUIRE(p.attempts <= 70);
        REQUIRE(p.budget == budget);
        if (!p.feasible) {
          CHECK_FALSE(p.reason.empty());
          CHECK(p.memory.buffers.empty());
          infeasible_once_placed += p.attempts > 1;
          continue;
        }
        ++feasible;
        CHECK(p.reason.empty());
        CHECK(p.memory.arena_bytes <= budget);
        CHECK(p.memory.alignment == alignment);
        CHECK(p.solution.feasible);
        CHECK(p.solution.schedule.peak_memory <= p.solution.budget);
        CHECK(p.solution.budget <= budget);
        CHECK(p.memory.lower_bound == p.solution.schedule.peak_memory);
        const remat::memory_plan_check check = remat::check_memory_plan(p.memory);
        REQUIRE_MESSAGE(check.ok(), check.problem);
        // The memory plan is that of the schedule returned.
        REQUIRE(p.memory.steps.size() == p.solution.schedule.ops.size());
        for (std::size_t i = 0; i < p.memory.steps.size(); ++i)
          REQUIRE(p.memory.steps[i].op == p.solution.schedule.ops[i]);
        if (p.attempts > 1) {
          ++retried_and_fit;
          CHECK(p.solution.budget < budget);
        } else {
          CHECK(p.solution.budget == budget);
        }
      }
    }
  }
  MESSAGE(feasible << " feasible plans, " << retried_and_fit << " after a retry, "
                   << infeasible_once_placed << " infeasible only once placed");
  CHECK(feasible > 400);
  CHECK(retried_and_fit > 20);  // the loop is exercised, not just the first solve
}

TEST_CASE("a budget no schedule meets is reported after one solve") {
  std::mt19937_64 rng(5);
  const remat::chain c = byte_chain(rng);
  const size_type least = remat::solve(c, 0, {.slots = remat::exact_units}).min_feasible_budget;
  const remat::plan_result p =
      remat::plan(c, least - 1, {.solve = {.slots = remat::exact_units}, .alignment = 1});
  CHECK_FALSE(p.feasible);
  CHECK(p.attempts == 1);
  CHECK(p.reason.find("needs at least " + std::to_string(least)) != std::string::npos);
}

TEST_CASE("store-all either fits as placed or is reported as not fitting") {
  remat::chain c;
  c.input_size = 1;
  c.stages.assign(4, remat::stage{1, 1, 3, 5, 0, 0});
  const size_type peak = store_all_peak(c);
  const remat::plan_options store_all{.solve = {.solver = remat::solver::store_all},
                                      .alignment = 64};
  // Each of the buffers live at the peak takes a whole 64-byte line once aligned.
  const remat::plan_result tight = remat::plan(c, peak, store_all);
  CHECK_FALSE(tight.feasible);
  CHECK(tight.reason.find("once placed") != std::string::npos);
  const remat::plan_result roomy = remat::plan(c, 64 * peak, store_all);
  REQUIRE(roomy.feasible);
  CHECK(roomy.attempts == 1);
  CHECK(roomy.memory.arena_bytes <= 64 * peak);
}

TEST_CASE("every solver plans within the budget") {
  std::mt19937_64 rng(31);
  for (int trial = 0; trial < 40; ++trial) {
    const remat::chain c = byte_chain(rng, 4);
    const size_type top = store_all_peak(c);
    for (const remat::solver s : remat::all_solvers) {
      CAPTURE(remat::name(s));
      for (const double f : {0.5, 0.8, 1.2}) {
        const auto budget = static_cast<size_type>(f * static_cast<double>(top));
        remat::plan_result p;
        try {
          p = remat::plan(c, budget, {.solve = {.solver = s}, .alignment = 8});
        } catch (const remat::solver_error& e) {
          MESSAGE("skipped: " << e.what());  // the solver does not take this chain
          continue;
        }
        if (!p.feasible) continue;
        CHECK(p.memory.arena_bytes <= budget);
        CHECK(remat::check_memory_plan(p.memory).ok());
      }
    }
  }
}

}  // namespace unit_plan_test
