// Store-all: F_all every stage, the loss, every backward; feasible exactly from its own peak.
#include <remat/solvers/store_all.hpp>

#include <remat/simulate.hpp>

#include <doctest/doctest.h>

#include "chain_text.hpp"
#include "random_chain.hpp"

#include <random>
#include <vector>

namespace unit_solvers_store_all_test {

namespace {

using remat::chain;
using remat::size_type;
using remat::solve_result;

// The chain of simulate.cpp: store-all peaks at 96 in the loss, and takes 127.
constexpr chain distinct() {
  chain c;
  c.input_size = 1;
  c.stages = {{1, 8, 2, 5, 10, 40}, {2, 16, 3, 7, 20, 50}, {4, 32, 4, 9, 30, 60}};
  c.loss_time = 64;
  c.loss_overhead = 70;
  return c;
}

static_assert(remat::detail::store_all_ops(2) ==
              std::vector<remat::op>{remat::f_all(0), remat::f_all(1), remat::loss_op(2),
                                     remat::backward(1), remat::backward(0)});
static_assert(remat::solve_store_all(distinct(), 96).schedule.makespan == 127);
static_assert(!remat::solve_store_all(distinct(), 95).feasible);

}  // namespace

TEST_CASE("the ops") {
  using remat::backward;
  using remat::f_all;
  CHECK(remat::detail::store_all_ops(1) ==
        std::vector<remat::op>{f_all(0), remat::loss_op(1), backward(0)});
  CHECK(remat::detail::store_all_ops(3) == std::vector<remat::op>{f_all(0), f_all(1), f_all(2),
                                                                  remat::loss_op(3), backward(2),
                                                                  backward(1), backward(0)});
}

TEST_CASE("feasible exactly from its peak") {
  const chain c = distinct();
  const solve_result r = remat::solve_store_all(c, 96);
  REQUIRE(r.feasible);
  CHECK(r.schedule.ops == remat::detail::store_all_ops(3));
  CHECK(r.schedule.makespan == 127);
  CHECK(r.schedule.peak_memory == 96);
  CHECK(r.min_feasible_budget == 96);
  CHECK(r.budget == 96);
  CHECK(r.unit == 1);

  const solve_result below = remat::solve_store_all(c, 95);
  CHECK_FALSE(below.feasible);
  CHECK(below.schedule.ops.empty());
  CHECK(below.min_feasible_budget == 96);
  CHECK(below.budget == 95);

  CHECK(remat::solve_store_all(c, 0).min_feasible_budget == 96);
  CHECK(remat::solve_store_all(c, size_type{1} << 62).feasible);
}

TEST_CASE("sizes as given, whatever the slots") {
  const chain c = distinct();
  for (size_type slots : {size_type{1}, size_type{3}, remat::rotor_slots}) {
    const solve_result r = remat::solve_store_all(c, 96, {.slots = slots});
    CHECK(r.feasible);
    CHECK(r.unit == 1);
    CHECK_FALSE(remat::solve_store_all(c, 95, {.slots = slots}).feasible);
  }
}

TEST_CASE("a negative budget is an error") {
  CHECK_THROWS_AS((void)remat::solve_store_all(distinct(), -1), remat::solver_error);
}

TEST_CASE("property: time sum fw + sum bw, peak as replayed") {
  std::mt19937_64 rng(8);
  for (int n = 0; n < 500; ++n) {
    const chain c = remat::testing::random_chain(rng, {1, 12, 10, true});
    INFO(remat::testing::chain_text(c));
    double time = c.loss_time;
    for (const remat::stage& s : c.stages) time += s.forward_time + s.backward_time;
    const remat::replay_result sim =
        remat::simulate(c, remat::detail::store_all_ops(static_cast<std::int32_t>(c.length())));
    REQUIRE(sim.valid());
    const solve_result r = remat::solve_store_all(c, sim.peak_memory);
    REQUIRE(r.feasible);
    CHECK(r.schedule.makespan == doctest::Approx(time).epsilon(1e-12));
    CHECK(r.schedule.peak_memory == sim.peak_memory);
    CHECK(r.min_feasible_budget == sim.peak_memory);
    if (sim.peak_memory > 0) CHECK_FALSE(remat::solve_store_all(c, sim.peak_memory - 1).feasible);
  }
}

TEST_CASE("a user chain") {
  struct layer {
    double forward_time = 1;
    double backward_time = 2;
    unsigned output_size = 3;
    unsigned tape_size = 4;
  };
  struct net {
    std::vector<layer> stages{layer{}, layer{}};
    unsigned input_size = 1;
  };
  // a0 t1 t2 g2 = 1 + 4 + 4 + 3, then B(1) adds g1: 15.
  const solve_result r = remat::solve_store_all(net{}, 15);
  REQUIRE(r.feasible);
  CHECK(r.schedule.makespan == 6);
  CHECK(r.schedule.peak_memory == 15);
}

}  // namespace unit_solvers_store_all_test
