// The host executor on plans with transfers: compute on the caller's thread, offloads and
// prefetches on two copy threads. Results must not depend on timing: with random delays injected
// into every copy and every callback, training ends with store-all's weights bit for bit, and no
// two buffers ever share bytes while both are live (check_run on the measured times).
#include <remat/check_plan.hpp>
#include <remat/host_executor.hpp>

#include <remat/plan.hpp>
#include <remat/solve.hpp>

#include <doctest/doctest.h>
#include <nets.hpp>
#include <offload_chains.hpp>
#include <random_chain.hpp>
#include <random_schedule.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace unit_host_executor_transfers_test {

namespace {

using namespace remat::testing::nets;
using remat::size_type;

// A pause of 0 to `most_us` microseconds, the same for the same (salt, i) on any thread.
void pause(std::uint64_t salt, std::size_t i, int most_us) {
  if (most_us <= 0) return;
  const auto us = static_cast<long>(mix(salt, i) % static_cast<std::uint64_t>(most_us + 1));
  if (us > most_us / 2) std::this_thread::sleep_for(std::chrono::microseconds(us));
}

// Calls `Net`'s callbacks after a pause each.
template <class Net>
struct delayed {
  Net& net;
  std::uint64_t salt;
  int most_us;
  std::size_t calls = 0;
  void forward(const remat::forward_call& f) {
    pause(salt, calls++, most_us);
    net.forward(f);
  }
  void backward(const remat::backward_call& b) {
    pause(salt, calls++, most_us);
    net.backward(b);
  }
  void loss(const remat::loss_call& l) {
    pause(salt, calls++, most_us);
    net.loss(l);
  }
};

remat::host_executor_options delay_copies(std::uint64_t salt, int most_us, bool poison) {
  remat::host_executor_options o;
  o.poison = poison;
  o.before_copy = [salt, most_us](std::size_t i) { pause(salt ^ 0x5bd1e995, i, most_us); };
  return o;
}

// The run just made kept the plan: nothing shared bytes while live, the arena held everything.
void require_kept(const remat::host_executor& ex) {
  const remat::run_memory seen =
      remat::check_run(ex.plan(), ex.last_run().start, ex.last_run().end);
  REQUIRE_MESSAGE(seen.ok(), seen.problem);
  REQUIRE(seen.live_peak <= ex.plan().arena_bytes);
}

trained train_delayed(const std::vector<int>& widths, const remat::memory_plan& plan,
                      std::uint64_t salt, int most_us, bool poison) {
  mlp net(4, widths);
  remat::host_executor ex(plan, delay_copies(salt, most_us, poison));
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int step = 0; step < 2; ++step) {
    for (float& v : floats(ex.input())) v = normal(rng);
    net.zero_gradients();
    delayed<mlp> slow{net, salt + static_cast<std::uint64_t>(step), most_us};
    ex.run(slow);
    require_kept(ex);
    net.sgd(0.05f);
  }
  const auto g0 = ex.input_gradient();
  return {net.w, net.b, net.dw, net.db, {g0.begin(), g0.end()}};
}

}  // namespace

TEST_CASE("the 12-layer perceptron trained under offloading schedules ends with store-all's "
          "weights, bit for bit, whatever the copies and callbacks take (threads)") {
  const std::vector<int> widths = {6, 8, 5, 9, 7, 8, 6, 10, 5, 7, 8, 6, 3};
  remat::chain c = mlp(4, widths).chain();
  // A link that moves a typical activation (4 x 8 floats) in a quarter of a typical forward.
  c.transfer = {10.0, 10.0};
  const remat::plan_result reference_plan =
      remat::plan(c, remat::max_size, {.solve = {.solver = remat::solver::store_all}});
  REQUIRE(reference_plan.feasible);
  const trained reference = train(widths, reference_plan.memory, {});
  const size_type top = reference_plan.solution.schedule.peak_memory;

  int schedules = 0, offloading = 0, below_recompute = 0;
  const size_type recompute_least = remat::solve(c, top).min_feasible_budget;
  std::uint64_t salt = 1;
  for (const remat::solver s : {remat::solver::offload, remat::solver::save_on_cpu,
                                remat::solver::vdnn, remat::solver::sequential_offload}) {
    const size_type least =
        remat::solve(c, top, {.solver = s, .slots = remat::exact_units}).min_feasible_budget;
    REQUIRE(least != remat::solve_result::no_budget);
    for (const double f : {0.0, 0.1, 0.3, 0.6, 1.0}) {
      const auto budget = least + static_cast<size_type>(f * static_cast<double>(top - least)) +
                          static_cast<size_type>(c.length() * 16);  // room for alignment
      CAPTURE(remat::name(s));
      CAPTURE(budget);
      const remat::plan_result p = remat::plan(c, budget, {.solve = {.solver = s}, .alignment = 16});
      if (!p.feasible) continue;
      REQUIRE(p.memory.arena_bytes <= budget);
      ++schedules;
      offloading += p.memory.has_transfers();
      below_recompute += budget < recompute_least;
      require_identical(train(widths, p.memory, {.poison = true}), reference);
      require_identical(train_delayed(widths, p.memory, salt++, 300, true), reference);
      require_identical(train_delayed(widths, p.memory, salt++, 300, false), reference);
    }
  }
  MESSAGE(schedules << " schedules, " << offloading << " offloading, " << below_recompute
                    << " below the recompute-only least budget (" << recompute_least << ")");
  CHECK(schedules >= 16);
  CHECK(offloading >= 12);
}

TEST_CASE("random chains and walks with transfers: the oracle's results under random delays, "
          "and the plan kept (threads)") {
  std::mt19937_64 rng(4321);
  int runs = 0, moved = 0;
  for (int trial = 0; trial < 120; ++trial) {
    remat::chain c = remat::testing::random_chain(rng, {.max_stages = 6, .max_size = 24});
    const double bandwidth = std::uniform_real_distribution<double>(0.5, 8.0)(rng);
    c.transfer = {bandwidth, bandwidth};
    const auto ops = remat::testing::random_schedule(c, rng, 80, 4, true);
    if (!ops) continue;
    std::vector<std::byte> input(static_cast<std::size_t>(c.input_size));
    fill(input, rng());
    const hash_result want = reference(c, input);
    const remat::memory_plan m =
        remat::make_memory_plan(c, std::span<const remat::op>(*ops), {.alignment = 8});
    CAPTURE(remat::to_string(remat::schedule{*ops, 0, 0}));
    for (const int most_us : {0, 200}) {
      remat::host_executor ex(m, delay_copies(rng(), most_us, most_us > 0));
      std::copy(input.begin(), input.end(), ex.input().begin());
      hash_net net(c.length());
      delayed<hash_net> slow{net, rng(), most_us};
      ex.run(slow);
      REQUIRE(net.workspace_intact);
      const auto g0 = ex.input_gradient();
      REQUIRE(hash_result{net.params, {g0.begin(), g0.end()}} == want);
      require_kept(ex);
      ++runs;
    }
    moved += m.has_transfers();
  }
  MESSAGE(runs << " runs, " << moved << " schedules moving tensors");
  CHECK(runs >= 160);
  CHECK(moved >= 70);
}

TEST_CASE("a slow offload holds back the op that reuses its bytes: a stall, not an overlap "
          "(threads)") {
  // docs/offload.md's chain A in bytes: a_0 (5) offloaded during F_all(0), its bytes reused by the
  // loss (21 with its transient) in an arena of 23.
  const remat::chain c = remat::testing::chain_a();
  const std::vector<remat::op> ops = remat::testing::chain_a_ops();
  const remat::memory_plan m =
      remat::make_memory_plan(c, std::span<const remat::op>(ops), {.alignment = 1});
  REQUIRE(m.arena_bytes == 23);
  std::size_t reuser = 0;  // the first op that waits for O(0,a) for memory
  for (const remat::wait& w : m.waits)
    if (w.before == 1 && w.why == remat::wait_reason::memory) {
      reuser = w.after;
      break;
    }
  REQUIRE(reuser > 1);
  remat::host_executor_options options;
  options.before_copy = [](std::size_t i) {
    if (i == 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  };
  remat::host_executor ex(m, options);
  std::vector<std::byte> input(5);
  fill(input, 9);
  std::copy(input.begin(), input.end(), ex.input().begin());
  hash_net net(2);
  ex.run(net);
  const hash_result want = reference(c, input);
  const auto g0 = ex.input_gradient();
  CHECK(hash_result{net.params, {g0.begin(), g0.end()}} == want);
  const remat::run_report& r = ex.last_run();
  CHECK(r.start[reuser] >= r.end[1]);  // it waited for the offload to end
  require_kept(ex);
  MESSAGE("op " << reuser << " stalled " << r.stall[reuser] * 1e3 << " ms for the slow offload");
}

TEST_CASE("an exception on a copy thread or in a callback ends the run; the next run is whole "
          "(threads)") {
  std::mt19937_64 rng(99);
  remat::chain c = remat::testing::random_chain(rng, {.min_stages = 4, .max_stages = 4});
  c.transfer = {1.0, 1.0};
  std::vector<remat::op> ops;
  for (;;) {
    const auto walk = remat::testing::random_schedule(c, rng, 80, 4, true);
    if (!walk) continue;
    std::size_t copies = 0;
    for (const remat::op& o : *walk) copies += o.kind == remat::op_kind::offload;
    if (copies >= 2) {
      ops = *walk;
      break;
    }
  }
  const remat::memory_plan m =
      remat::make_memory_plan(c, std::span<const remat::op>(ops), {.alignment = 8});
  std::vector<std::byte> input(static_cast<std::size_t>(c.input_size));
  fill(input, 3);
  const hash_result want = reference(c, input);
  bool fail_copy = true;
  remat::host_executor_options options;
  options.before_copy = [&fail_copy](std::size_t) {
    if (fail_copy) throw std::runtime_error("copy failed");
  };
  remat::host_executor ex(m, options);
  std::copy(input.begin(), input.end(), ex.input().begin());
  hash_net first(c.length());
  CHECK_THROWS_WITH_AS(ex.run(first), "copy failed", std::runtime_error);

  struct throwing {
    hash_net& net;
    void forward(const remat::forward_call&) { throw std::logic_error("forward failed"); }
    void backward(const remat::backward_call& b) { net.backward(b); }
    void loss(const remat::loss_call& l) { net.loss(l); }
  };
  fail_copy = false;
  hash_net second(c.length());
  CHECK_THROWS_WITH_AS(ex.run(throwing{second}), "forward failed", std::logic_error);

  std::copy(input.begin(), input.end(), ex.input().begin());
  hash_net third(c.length());
  ex.run(third);
  const auto g0 = ex.input_gradient();
  CHECK(hash_result{third.params, {g0.begin(), g0.end()}} == want);
  require_kept(ex);
}

TEST_CASE("separate allocations refuse plans with transfers (threads)") {
  remat::chain c;
  c.input_size = 4;
  c.stages = {{1, 1, 4, 4, 0, 0}};
  c.transfer = {1.0, 1.0};
  const std::vector<remat::op> ops = {remat::f_all(0), remat::offload(0), remat::loss_op(1),
                                      remat::prefetch(0), remat::backward(0)};
  const remat::memory_plan m = remat::make_memory_plan(c, std::span<const remat::op>(ops));
  CHECK_THROWS_WITH_AS(remat::host_executor(m, {.separate_allocations = true}),
                       doctest::Contains("without transfers"), std::invalid_argument);
}

}  // namespace unit_host_executor_transfers_test
