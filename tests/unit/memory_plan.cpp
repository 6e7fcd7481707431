#include <remat/memory_plan.hpp>

#include <remat/check_plan.hpp>
#include <remat/solve.hpp>

#include <doctest/doctest.h>
#include <random_chain.hpp>
#include <random_schedule.hpp>

#include <algorithm>
#include <cstddef>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace unit_memory_plan_test {

namespace {

using remat::buffer_kind;
using remat::memory_plan;
using remat::op;
using remat::size_type;

// The most bytes live at any op, counted from the plan's lifetimes (sizes as given).
size_type live_peak(const memory_plan& m, std::vector<size_type>* per_op = nullptr) {
  std::vector<size_type> live(m.steps.size(), 0);
  for (const remat::buffer& b : m.buffers)
    for (std::size_t i = b.first_op; i <= b.last_op; ++i) live[i] += b.size;
  if (per_op) *per_op = live;
  return live.empty() ? 0 : *std::max_element(live.begin(), live.end());
}

// Everything a plan must satisfy, checked independently of check_memory_plan as well.
void require_sound(const remat::chain& c, const std::vector<op>& ops, const memory_plan& m) {
  const remat::memory_plan_check check = remat::check_memory_plan(m);
  INFO(remat::to_string(remat::schedule{ops, 0, 0}));
  REQUIRE_MESSAGE(check.ok(), check.problem);
  const remat::replay_result r = remat::simulate(c, std::span<const op>(ops));
  REQUIRE(r.valid());
  REQUIRE(m.steps.size() == ops.size());
  REQUIRE(m.buffers.size() == 1 + 2 * ops.size());  // a_0, then an output and a workspace per op
  std::vector<size_type> live;
  REQUIRE(live_peak(m, &live) == r.peak_memory);
  REQUIRE(live == r.op_peak);  // the lifetimes reproduce the simulator op by op
  REQUIRE(m.lower_bound == r.peak_memory);
  REQUIRE(m.arena_bytes >= m.lower_bound);
  // Pairwise, the slow obvious way.
  int misplaced = 0, overlaps = 0;
  for (std::size_t i = 0; i < m.buffers.size(); ++i) {
    const remat::buffer& a = m.buffers[i];
    misplaced += a.offset % m.alignment != 0 || a.offset + a.size > m.arena_bytes;
    for (std::size_t j = i + 1; j < m.buffers.size(); ++j) {
      const remat::buffer& b = m.buffers[j];
      const bool same_time = a.first_op <= b.last_op && b.first_op <= a.last_op;
      const bool same_space =
          a.size > 0 && b.size > 0 && a.offset < b.offset + b.size && b.offset < a.offset + a.size;
      overlaps += same_time && same_space;
    }
  }
  REQUIRE(misplaced == 0);
  REQUIRE(overlaps == 0);
}

remat::chain two_stages() {
  remat::chain c;
  c.input_size = 8;
  c.stages = {{1, 1, 16, 24, 4, 8}, {1, 1, 32, 32, 0, 0}};
  c.loss_overhead = 2;
  return c;
}

}  // namespace

TEST_CASE("store-all on two stages: every buffer and its lifetime") {
  const remat::chain c = two_stages();
  const std::vector<op> ops = remat::detail::store_all_ops(2);  // F_all(0) F_all(1) loss B(1) B(0)
  const memory_plan m = remat::make_memory_plan(c, std::span<const op>(ops), {.alignment = 1});
  require_sound(c, ops, m);
  struct expected {
    buffer_kind kind;
    std::int32_t index;
    std::size_t first, last;
    size_type size;
  };
  const std::vector<expected> want = {
      {buffer_kind::activation, 0, 0, 4, 8},  // a_0, dropped by B(0), the last op
      {buffer_kind::tape, 1, 0, 4, 24},      {buffer_kind::workspace, 0, 0, 0, 4},
      {buffer_kind::tape, 2, 1, 3, 32},      {buffer_kind::workspace, 1, 1, 1, 0},
      {buffer_kind::gradient, 2, 2, 3, 32},  {buffer_kind::workspace, 2, 2, 2, 2},
      {buffer_kind::gradient, 1, 3, 4, 16},  {buffer_kind::workspace, 1, 3, 3, 0},
      {buffer_kind::gradient, 0, 4, 4, 8},   {buffer_kind::workspace, 0, 4, 4, 8},
  };
  REQUIRE(m.buffers.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    CHECK(m.buffers[i].kind == want[i].kind);
    CHECK(m.buffers[i].index == want[i].index);
    CHECK(m.buffers[i].first_op == want[i].first);
    CHECK(m.buffers[i].last_op == want[i].last);
    CHECK(m.buffers[i].size == want[i].size);
  }
  // B(1) reads a_1 from the tape t_1, the tape t_2 and g_2, and writes g_1.
  const remat::step& b1 = m.steps[3];
  CHECK(b1.input == 1);
  CHECK(b1.input_size == 16);
  CHECK(b1.tape == 3);
  CHECK(b1.gradient == 5);
  CHECK(b1.output == 7);
  CHECK(b1.output_size == 32);
  CHECK(m.input_gradient() == 9);
  // The peak is at B(1): a_0, t_1, t_2, g_2 and g_1.
  CHECK(m.lower_bound == 8 + 24 + 32 + 32 + 16);
}

TEST_CASE("a recomputed activation is a new buffer each time") {
  remat::chain c;
  c.input_size = 4;
  c.stages.assign(3, remat::stage{1, 1, 4, 8, 0, 0});
  // a_1 is computed by op 0, dropped by F_none(1), and computed again by op 5.
  const std::vector<op> ops = {
      remat::f_ck(0), remat::f_none(1), remat::f_all(2),    remat::loss_op(3), remat::backward(2),
      remat::f_ck(0), remat::f_all(1),  remat::backward(1), remat::f_all(0),   remat::backward(0)};
  const memory_plan m = remat::make_memory_plan(c, std::span<const op>(ops));
  require_sound(c, ops, m);
  int a1 = 0, t1 = 0;
  for (const remat::buffer& b : m.buffers) {
    a1 += b.kind == buffer_kind::activation && b.index == 1;
    t1 += b.kind == buffer_kind::tape && b.index == 1;
  }
  CHECK(a1 == 2);
  CHECK(t1 == 1);
  CHECK(m.buffers[m.steps[0].output].last_op == 1);
  CHECK(m.steps[6].input == m.steps[5].output);  // F_all(1) and B(1) read the second a_1
  CHECK(m.steps[7].input == m.steps[5].output);
  CHECK(m.steps[9].input == 0);  // B(0) reads a_0, not the tape t_1 made by op 8
}

TEST_CASE("plans are sound on thousands of random schedules, solver-made and random walks") {
  std::mt19937_64 rng(20240611);
  int schedules = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const remat::chain c = remat::testing::random_chain(rng);
    std::vector<std::vector<op>> candidates;
    const auto store_all = remat::solve(c, remat::max_size, {.solver = remat::solver::store_all});
    const size_type top = store_all.min_feasible_budget;
    const auto least = remat::solve(c, 0, {.slots = remat::exact_units}).min_feasible_budget;
    candidates.push_back(store_all.schedule.ops);
    for (const double f : {0.0, 0.3, 0.7}) {
      const auto budget = least + static_cast<size_type>(f * static_cast<double>(top - least));
      const auto r = remat::solve(c, budget, {.slots = remat::exact_units});
      if (r.feasible) candidates.push_back(r.schedule.ops);
      if (c.length() <= 4 && f == 0.0 && trial % 2 == 0) {
        const auto e = remat::solve(c, budget, {.solver = remat::solver::exhaustive});
        if (e.feasible) candidates.push_back(e.schedule.ops);
      }
    }
    if (auto walk = remat::testing::random_schedule(c, rng)) candidates.push_back(*walk);
    for (const auto& ops : candidates) {
      for (const size_type alignment : {1, 4, 64}) {
        const memory_plan m =
            remat::make_memory_plan(c, std::span<const op>(ops), {.alignment = alignment});
        require_sound(c, ops, m);
        ++schedules;
      }
    }
  }
  MESSAGE(schedules << " plans checked");
  CHECK(schedules > 3000);
}

TEST_CASE("every placement order alone gives a sound plan; the plan keeps the smallest") {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const remat::chain c = remat::testing::random_chain(rng, {.max_stages = 12});
    auto walk = remat::testing::random_schedule(c, rng, 400);
    if (!walk) continue;
    const memory_plan m = remat::make_memory_plan(c, std::span<const op>(*walk), {.alignment = 2});
    std::vector<remat::detail::lifetime> lifetimes;
    for (const remat::buffer& b : m.buffers)
      lifetimes.push_back({b.first_op, b.last_op, remat::detail::align_up(b.size, 2)});
    for (const auto order : remat::detail::all_fit_orders) {
      const remat::detail::placement p = remat::detail::best_fit(lifetimes, order);
      memory_plan alone = m;
      for (std::size_t i = 0; i < alone.buffers.size(); ++i) alone.buffers[i].offset = p.offsets[i];
      alone.arena_bytes = p.arena;
      INFO(remat::detail::name(order));
      REQUIRE_MESSAGE(remat::check_memory_plan(alone).ok(),
                      remat::check_memory_plan(alone).problem);
      CHECK(m.arena_bytes <= p.arena);
    }
  }
}

TEST_CASE("best fit fills the gap a dead buffer leaves") {
  using remat::detail::lifetime;
  // A (ops 0-1, 4 bytes) and B (ops 2-3, 4 bytes) can share; C (ops 0-3, 2 bytes) cannot.
  const std::vector<lifetime> buffers = {{0, 1, 4}, {2, 3, 4}, {0, 3, 2}};
  for (const auto order : remat::detail::all_fit_orders) {
    const auto p = remat::detail::best_fit(buffers, order);
    CHECK(p.arena == 6);
    CHECK(p.offsets[0] == p.offsets[1]);
  }
  // Best fit, not first fit. At op 0: X [0, 6), W [6, 10), Z [10, 12), Y [12, 14); X and Z die
  // after it, leaving holes of 6 and 2 bytes under Y: V (2 bytes, ops 1-2) takes the small one.
  const std::vector<lifetime> holes = {{0, 0, 6}, {0, 2, 4}, {0, 0, 2}, {0, 2, 2}, {1, 2, 2}};
  const auto p = remat::detail::best_fit(holes, remat::detail::fit_order::start);
  CHECK(p.offsets[2] == 10);
  CHECK(p.offsets[4] == 10);
  CHECK(p.arena == 14);
}

TEST_CASE("zero sizes take no room") {
  remat::chain c;
  c.input_size = 0;
  c.stages.assign(4, remat::stage{1, 1, 0, 0, 0, 0});
  const auto r = remat::solve(c, 0, {.slots = remat::exact_units});
  REQUIRE(r.feasible);
  const memory_plan m = remat::make_memory_plan(c, r.schedule, {.alignment = 256});
  require_sound(c, r.schedule.ops, m);
  CHECK(m.arena_bytes == 0);
  CHECK(m.lower_bound == 0);
  CHECK(m.ratio() == 1.0);
}

TEST_CASE("alignment rounds every footprint up") {
  remat::chain c;
  c.input_size = 1;
  c.stages.assign(3, remat::stage{1, 1, 1, 1, 0, 0});
  const std::vector<op> ops = remat::detail::store_all_ops(3);
  const memory_plan m = remat::make_memory_plan(c, std::span<const op>(ops), {.alignment = 256});
  require_sound(c, ops, m);
  CHECK(m.lower_bound == 6);  // a_0, t_1..t_3, g_3 and nothing else at the loss
  CHECK(m.arena_bytes == 6 * 256);
  CHECK(m.ratio() == doctest::Approx(256.0));
}

TEST_CASE("make_memory_plan refuses invalid schedules and alignments") {
  const remat::chain c = two_stages();
  const std::vector<op> bad = {remat::f_all(0), remat::loss_op(2)};
  CHECK_THROWS_WITH_AS(remat::make_memory_plan(c, std::span<const op>(bad)),
                       doctest::Contains("op 1 (loss)"), std::invalid_argument);
  const std::vector<op> ops = remat::detail::store_all_ops(2);
  CHECK_THROWS_AS(remat::make_memory_plan(c, std::span<const op>(ops), {.alignment = 3}),
                  std::invalid_argument);
  CHECK_THROWS_AS(remat::make_memory_plan(c, std::span<const op>(ops), {.alignment = 0}),
                  std::invalid_argument);
}

namespace {
constexpr size_type constexpr_arena() {
  remat::chain c;
  c.input_size = 2;
  c.stages.assign(3, remat::stage{1, 1, 2, 3, 1, 1});
  const std::vector<op> ops = remat::detail::store_all_ops(3);
  const memory_plan m = remat::make_memory_plan(c, std::span<const op>(ops), {.alignment = 1});
  // check_memory_plan builds strings, which clang 14 cannot in a constant expression: check here.
  for (const remat::buffer& a : m.buffers)
    for (const remat::buffer& b : m.buffers) {
      const bool same_time = a.first_op <= b.last_op && b.first_op <= a.last_op;
      const bool same_space = a.offset < b.offset + b.size && b.offset < a.offset + a.size;
      if (&a != &b && same_time && same_space) return -1;
    }
  return m.arena_bytes;
}
}  // namespace

TEST_CASE("plans are computable at compile time") {
  // The peak is at B(2): a_0 2, three tapes 9, g_3 2, g_2 2 and the workspace 1.
  static_assert(constexpr_arena() >= 16);
  CHECK(constexpr_arena() == 16);
}

}  // namespace unit_memory_plan_test
