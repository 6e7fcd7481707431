#include <remat/host_executor.hpp>

#include <remat/plan.hpp>

#include <doctest/doctest.h>
#include <chain_text.hpp>
#include <count_allocations.hpp>
#include <nets.hpp>
#include <random_chain.hpp>
#include <random_schedule.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using remat::size_type;
using remat::testing::allocations_during;

using namespace remat::testing::nets;

void gradients_match_store_all(const std::vector<int>& widths, int min_schedules) {
  const remat::chain c = mlp(4, widths).chain();
  const remat::plan_result reference_plan =
      remat::plan(c, remat::max_size, {.solve = {.solver = remat::solver::store_all}});
  REQUIRE(reference_plan.feasible);
  const trained reference = train(widths, reference_plan.memory, {});
  // The gradients are finite and not all zero: the comparison means something.
  bool nonzero = false;
  for (const auto& g : reference.dw)
    for (const float v : g) {
      REQUIRE(std::isfinite(v));
      nonzero = nonzero || v != 0.0f;
    }
  REQUIRE(nonzero);

  const size_type top = reference_plan.solution.schedule.peak_memory;
  const size_type least = remat::solve(c, top).min_feasible_budget;
  int schedules = 0, recomputing = 0;
  std::string ran;
  for (const remat::solver s : remat::all_solvers) {
    if (s == remat::solver::exhaustive && c.length() > remat::exhaustive_max_stages) continue;
    const int before = schedules;
    for (const double f : {0.0, 0.25, 0.5, 0.75, 1.0}) {
      const auto budget = least + static_cast<size_type>(f * static_cast<double>(top - least)) +
                          static_cast<size_type>(c.length() * 128);  // room for alignment
      CAPTURE(remat::name(s));
      CAPTURE(budget);
      remat::plan_result p;
      try {
        p = remat::plan(c, budget, {.solve = {.solver = s}, .alignment = 64});
      } catch (const remat::solver_error& e) {
        MESSAGE("solver " << remat::name(s) << " skipped: " << e.what());
        continue;
      }
      if (!p.feasible) continue;
      ++schedules;
      recomputing += p.solution.schedule.ops.size() > reference_plan.solution.schedule.ops.size();
      REQUIRE(p.memory.arena_bytes <= budget);
      require_identical(train(widths, p.memory, {.poison = true}), reference);
      require_identical(train(widths, p.memory, {.separate_allocations = true}), reference);
    }
    ran += " " + std::string(remat::name(s)) + ":" + std::to_string(schedules - before);
  }
  MESSAGE(schedules << " schedules, " << recomputing << " with recomputation; per solver" << ran);
  CHECK(schedules >= min_schedules);
  CHECK(recomputing >= min_schedules / 2);
}

}  // namespace

TEST_CASE("training an MLP gives the gradients of store-all, bit for bit, under every solver") {
  SUBCASE("12 stages") {
    gradients_match_store_all({6, 8, 5, 9, 7, 8, 6, 10, 5, 7, 8, 6, 3}, 8);
  }
  SUBCASE("5 stages, short enough for the exhaustive solver") {
    gradients_match_store_all({5, 7, 4, 8, 6, 3}, 12);
  }
}

TEST_CASE("random chains and schedules: the executor computes what holding everything computes") {
  std::mt19937_64 rng(1234);
  int runs = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const remat::chain c = remat::testing::random_chain(rng, {.max_size = 20});
    std::vector<std::byte> input(static_cast<std::size_t>(c.input_size));
    fill(input, rng());
    const hash_result want = reference(c, input);

    std::vector<std::vector<remat::op>> schedules;
    const size_type top =
        remat::solve(c, remat::max_size, {.solver = remat::solver::store_all}).min_feasible_budget;
    const size_type least = remat::solve(c, 0, {.slots = remat::exact_units}).min_feasible_budget;
    for (const size_type budget : {least, (least + top) / 2, top}) {
      const auto r = remat::solve(c, budget, {.slots = remat::exact_units});
      if (r.feasible) schedules.push_back(r.schedule.ops);
    }
    if (c.length() <= 3) {
      const auto e = remat::solve(c, least, {.solver = remat::solver::exhaustive});
      if (e.feasible) schedules.push_back(e.schedule.ops);
    }
    if (auto walk = remat::testing::random_schedule(c, rng)) schedules.push_back(*walk);

    for (const auto& ops : schedules) {
      CAPTURE(remat::to_string(remat::schedule{ops, 0, 0}));
      for (const size_type alignment : {1, 16}) {
        const remat::memory_plan plan =
            remat::make_memory_plan(c, std::span<const remat::op>(ops), {.alignment = alignment});
        REQUIRE(execute(c, plan, {.poison = true}, input) == want);
        REQUIRE(execute(c, plan, {.separate_allocations = true}, input) == want);
        ++runs;
      }
    }
  }
  MESSAGE(runs << " runs");
  CHECK(runs > 2000);
}

TEST_CASE("options reach the callbacks: F_all(k, o) and the B(k) of its tape get o and o's bytes") {
  // Each call checked against the schedule's next op and the option of each stage's last F_all.
  struct expecting {
    const remat::chain* c = nullptr;
    std::vector<remat::op> ops;
    std::size_t next = 0;
    std::vector<std::uint16_t> tape_option;
    int recorded = 0, listed = 0;

    const remat::op& take(std::int32_t stage) {
      REQUIRE(next < ops.size());
      const remat::op& o = ops[next++];
      CHECK(o.stage == stage);
      return o;
    }
    [[nodiscard]] remat::stage_option option(std::int32_t stage, std::uint16_t o) const {
      return remat::option_at(c->stages[static_cast<std::size_t>(stage)], o);
    }
    [[nodiscard]] std::size_t saved_bytes(std::int32_t stage, std::uint16_t o) const {
      return static_cast<std::size_t>(option(stage, o).tape_size -
                                      c->stages[static_cast<std::size_t>(stage)].output_size);
    }
    void forward(const remat::forward_call& f) {
      const remat::op& o = take(f.stage);
      CHECK(f.recording == (o.kind == remat::op_kind::forward_all));
      CHECK(f.option == o.option);
      if (!f.recording) return;
      CHECK(f.saved.size() == saved_bytes(f.stage, f.option));
      CHECK(f.workspace.size() ==
            static_cast<std::size_t>(option(f.stage, f.option).forward_overhead));
      tape_option[static_cast<std::size_t>(f.stage)] = f.option;
      ++recorded;
      listed += c->stages[static_cast<std::size_t>(f.stage)].options.empty() ? 0 : 1;
    }
    void backward(const remat::backward_call& b) {
      CHECK(take(b.stage).kind == remat::op_kind::backward);
      CHECK(b.option == tape_option[static_cast<std::size_t>(b.stage)]);
      CHECK(b.saved.size() == saved_bytes(b.stage, b.option));
      CHECK(b.workspace.size() ==
            static_cast<std::size_t>(option(b.stage, b.option).backward_overhead));
    }
    void loss(const remat::loss_call&) {
      REQUIRE(next < ops.size());
      CHECK(ops[next++].kind == remat::op_kind::loss);
    }
  };
  std::mt19937_64 rng(4305);
  int recorded = 0, listed = 0, nonzero = 0;
  for (int trial = 0; trial < 100; ++trial) {
    remat::chain c = remat::testing::random_chain(rng, {.min_stages = 2, .max_stages = 7});
    remat::testing::add_random_options(rng, c, 4);
    CAPTURE(remat::testing::chain_text(c));
    const size_type least = remat::solve(c, 0, {.slots = remat::exact_units}).min_feasible_budget;
    const size_type top = least * 2;
    for (const size_type budget : {least, (least + top) / 2, top}) {
      const remat::solve_result r = remat::solve(c, budget, {.slots = remat::exact_units});
      REQUIRE(r.feasible);
      for (const remat::op& o : r.schedule.ops) nonzero += o.option != 0 ? 1 : 0;
      remat::host_executor ex(remat::make_memory_plan(c, r.schedule));
      expecting calls{&c, r.schedule.ops, 0, std::vector<std::uint16_t>(c.length(), 0)};
      ex.run(calls);
      CHECK(calls.next == r.schedule.ops.size());
      recorded += calls.recorded;
      listed += calls.listed;
    }
  }
  CHECK(recorded > 500);
  CHECK(listed > 300);
  CHECK(nonzero > 100);
}

TEST_CASE("a run allocates nothing") {
  const std::vector<int> widths = {6, 8, 5, 9, 7, 8, 6, 10, 5};
  mlp net(4, widths);
  const remat::chain c = net.chain();
  const size_type top =
      remat::solve(c, remat::max_size, {.solver = remat::solver::store_all}).min_feasible_budget;
  const remat::plan_result p = remat::plan(c, top * 2 / 3);
  REQUIRE(p.feasible);
  for (const bool poison : {false, true}) {
    remat::host_executor ex(p.memory, {.poison = poison});
    CHECK(allocations_during([&] {
            ex.run(net);
            ex.run(net);
          }) == 0);
  }
  // With transfers too: the copy threads exist from construction, and the copies go to the host
  // pool allocated then.
  remat::chain linked = c;
  linked.transfer = {10.0, 10.0};
  const remat::plan_result q =
      remat::plan(linked, top, {.solve = {.solver = remat::solver::save_on_cpu}});
  REQUIRE(q.feasible);
  REQUIRE(q.memory.has_transfers());
  remat::host_executor moving(q.memory);
  moving.run(net);
  CHECK(allocations_during([&] {
          moving.run(net);
          moving.run(net);
        }) == 0);
  // The debug mode does allocate: one block per buffer created.
  remat::host_executor debug(p.memory, {.separate_allocations = true});
  CHECK(allocations_during([&] { debug.run(net); }) ==
        static_cast<long>(p.memory.buffers.size() - 1));
}

TEST_CASE("poisoning shows a use after free") {
  // F_ck(0) F_none(1) ...: a_1 is dropped after op 1. A stage-2 forward that still reads it
  // through a pointer kept from op 0 finds 0xFF bytes, a NaN as float.
  remat::chain c;
  c.input_size = 16;
  c.stages.assign(3, remat::stage{1, 1, 16, 16, 0, 0});
  const std::vector<remat::op> ops = {remat::f_ck(0),    remat::f_none(1),   remat::f_all(2),
                                      remat::loss_op(3), remat::backward(2), remat::f_all(0),
                                      remat::f_all(1),   remat::backward(1), remat::backward(0)};
  const remat::memory_plan plan = remat::make_memory_plan(c, std::span<const remat::op>(ops));
  struct stale_reader {
    std::span<const std::byte> kept;
    float seen = 0;
    void forward(const remat::forward_call& f) {
      if (f.stage == 0 && kept.empty()) kept = f.output;
      if (f.stage == 2) seen = floats(kept)[0];
      std::fill(f.output.begin(), f.output.end(), std::byte{0});
      std::fill(f.saved.begin(), f.saved.end(), std::byte{0});
    }
    void backward(const remat::backward_call& b) {
      std::fill(b.input_gradient.begin(), b.input_gradient.end(), std::byte{0});
    }
    void loss(const remat::loss_call& l) {
      std::fill(l.input_gradient.begin(), l.input_gradient.end(), std::byte{0});
    }
  };
  remat::host_executor ex(plan, {.poison = true});
  stale_reader reader;
  ex.run(reader);
  CHECK(std::isnan(reader.seen));
}

TEST_CASE("the input keeps its bytes across runs; a throwing callback leaves the executor usable") {
  std::mt19937_64 rng(3);
  const remat::chain c = remat::testing::random_chain(rng, {.min_stages = 4, .max_size = 20});
  std::vector<std::byte> input(static_cast<std::size_t>(c.input_size));
  fill(input, 11);
  const hash_result want = reference(c, input);
  const remat::plan_result p = remat::plan(c, remat::max_size);
  REQUIRE(p.feasible);
  for (const remat::host_executor_options& options :
       {remat::host_executor_options{.poison = true},
        remat::host_executor_options{.separate_allocations = true}}) {
    remat::host_executor ex(p.memory, options);
    std::copy(input.begin(), input.end(), ex.input().begin());
    struct failing : hash_net {
      using hash_net::hash_net;
      void loss(const remat::loss_call&) { throw std::runtime_error("loss failed"); }
    };
    failing bad(c.length());
    CHECK_THROWS_WITH(ex.run(bad), "loss failed");
    for (int run = 0; run < 2; ++run) {
      hash_net net(c.length());
      ex.run(net);
      const auto g0 = ex.input_gradient();
      CHECK(hash_result{net.params, {g0.begin(), g0.end()}} == want);
    }
  }
}

TEST_CASE("an unsound plan is refused") {
  remat::chain c;
  c.input_size = 8;
  c.stages.assign(2, remat::stage{1, 1, 8, 8, 0, 0});
  remat::memory_plan plan = remat::make_memory_plan(c, remat::solve(c, remat::max_size).schedule);
  plan.buffers[1].offset = plan.buffers[0].offset;  // t_1 onto a_0
  CHECK_THROWS_WITH_AS(remat::host_executor{plan}, doctest::Contains("overlap"),
                       std::invalid_argument);
}

TEST_CASE("a schedule that runs the loss or a backward twice is refused") {
  remat::chain c;
  c.input_size = 8;
  c.stages.assign(3, remat::stage{1, 1, 8, 8, 0, 0});
  // Valid in the model (g_3, t_3 and g_2 are made again), but gradients would accumulate twice.
  const std::vector<remat::op> ops = {remat::f_all(0),    remat::f_all(1),    remat::f_all(2),
                                      remat::loss_op(3),  remat::backward(2), remat::backward(1),
                                      remat::f_all(1),    remat::f_all(2),    remat::loss_op(3),
                                      remat::backward(2), remat::backward(0)};
  REQUIRE(remat::simulate(c, std::span<const remat::op>(ops)).valid());
  CHECK_THROWS_WITH_AS(
      remat::host_executor{remat::make_memory_plan(c, std::span<const remat::op>(ops))},
      doctest::Contains("runs loss twice"), std::invalid_argument);
}
