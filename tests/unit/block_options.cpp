// Tests of a block's options from its insides (remat/detail/graph/block_options.hpp, through
// remat::linearize with block_options): hand-computed options of two small blocks, one whose
// backward overhead and least budget go down because a dropped value comes back only before the
// backward node that reads it; the exact enumeration against a brute force whose costs come from
// the node-level replay; schedules that pick options replay node by node within the chain-level
// figures, which are tight (one byte less and the check fails); and options never make a budget
// infeasible or a schedule slower, and lower the least budget of many random graphs.
#include <remat/detail/graph/block_options.hpp>
#include <remat/graph_simulate.hpp>
#include <remat/linearize.hpp>
#include <remat/solve_graph.hpp>

#include <doctest/doctest.h>

#include <random_graph.hpp>
#include <trials.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <random>
#include <tuple>
#include <vector>

namespace unit_block_options_test {

namespace {

using remat::size_type;
using remat::stage_option;
namespace gr = remat::detail::graphs;

// x -> a = f(x) -> b = g(a) -> y = h(b, x): one block (x is alive across f and g). f saves x
// (the block's input, never taped), g saves a, h saves b; the output y is taped as always.
remat::graph hand_block() {
  remat::graph g;
  const auto x = g.input("x", 10);
  const auto a = g.apply("f", {x}, 100, {.forward_time = 4, .backward_time = 2, .saved = {x}});
  const auto b = g.apply("g", {a}, 50, {.forward_time = 1, .backward_time = 2, .saved = {a}});
  const auto y = g.apply("h", {b, x}, 10, {.forward_time = 1, .backward_time = 2, .saved = {b}});
  (void)y;
  return g;
}

std::tuple<size_type, double, size_type, size_type> key(const stage_option& o) {
  return {o.tape_size, o.backward_time, o.forward_overhead, o.backward_overhead};
}

// The bytes of each buffer the steps leave held (made and not freed), in order of making.
std::vector<std::pair<remat::node_buffer, size_type>> left_held(
    const std::vector<remat::node_step>& steps) {
  std::map<remat::node_buffer, size_type> held;
  for (const remat::node_step& s : steps) {
    for (const auto& [b, bytes] : s.makes) held[b] = bytes;
    for (const remat::node_buffer& b : s.frees) held.erase(b);
  }
  return {held.begin(), held.end()};
}

// Option `plan`'s costs measured by the node-level replay of its expansion: F_all(0) alone from
// the input, then B(0) from a step that makes what F_all left held and the output's gradient.
stage_option replayed_costs(const remat::graph& g, const gr::block_layout& b,
                            const remat::block_recompute& plan) {
  const size_type x_in = g.values[b.input].size;
  const size_type x_out = g.values[b.output].size;
  const remat::node_buffer in{'a', 0, 0};
  std::vector<remat::node_step> forward;
  gr::expand_forward(g, gr::recorded_layout(g, b, plan), 0, true, in, 0, forward);
  const remat::node_replay f = remat::replay_nodes(forward, x_in);
  REQUIRE(f.valid());
  std::vector<remat::node_step> backward(1);
  backward[0].dir = remat::node_step::direction::loss;
  backward[0].makes = left_held(forward);
  size_type tape = 0;
  for (const auto& m : backward[0].makes) tape += m.second;
  backward[0].makes.emplace_back(remat::node_buffer{'g', 0, static_cast<std::int64_t>(b.output)},
                                 x_out);
  gr::expand_backward(g, b, 0, in, false, plan, 1, backward);
  // The input's gradient g_0, which the chain model counts through all of B, is made by the
  // block's last node at node level: make it in the first step instead, as the chain counts it.
  const remat::node_buffer g_in{'g', 0, static_cast<std::int64_t>(b.input)};
  for (remat::node_step& s : backward)
    std::erase_if(s.makes, [&](const auto& m) { return m.first == g_in; });
  backward[0].makes.emplace_back(g_in, x_in);
  const remat::node_replay r = remat::replay_nodes(backward, x_in);
  REQUIRE(r.valid());
  stage_option o;
  o.tape_size = tape;
  for (std::size_t j = b.first; j < b.end; ++j) {
    o.forward_time += g.nodes[j].forward_time;
    o.backward_time += g.nodes[j].backward_time;
  }
  for (const std::size_t j : plan.recompute) o.backward_time += g.nodes[j].forward_time;
  o.forward_overhead = std::max<size_type>(0, f.peak_memory - x_in - tape);
  o.backward_overhead = std::max<size_type>(0, r.peak_memory - 2 * x_in - tape - x_out);
  return o;
}

}  // namespace

TEST_CASE("block options: a hand-built block's options, computed by hand") {
  const remat::graph g = hand_block();
  const remat::linearization lin = remat::linearize(g, {.block_options = true});
  REQUIRE(lin.blocks.size() == 1);
  const remat::stage& s = lin.chain.stages[0];
  // Plain autograd: tape a + b + y = 160; F_all peaks at 160 (fo 0); B starts at 170 (tape and
  // y's gradient), h's backward makes b's gradient (220) and frees y's gradient and b (160), g's
  // makes a's gradient (peak 260): bo 260 - 170 = 90.
  // Dropping a: tape 60, f re-run (+4); F_all peaks at 150 (a and b both held in g): fo 90; B
  // starts at 70, h's backward (120, then 60), f re-run just before g's backward makes a back
  // (160), g's backward peaks as plain at 260: bo 260 - 70 = 190. Dropping b: tape 110, g re-run
  // (+1) before h's backward (170, 220 in h's); F_all 160 (fo 50); bo 260 - 120 = 140. Both: tape
  // 10, +5, f and g re-run before h's backward, a held until g's; fo 140, bo 240.
  const std::vector<stage_option> expected{{6, 6, 160, 0, 90},
                                           {6, 7, 110, 50, 140},
                                           {6, 10, 60, 90, 190},
                                           {6, 11, 10, 140, 240}};
  CHECK(s.options == expected);
  CHECK(s.tape_size == 160);
  CHECK(s.backward_time == 6);
  REQUIRE(lin.blocks[0].options.size() == 4);
  CHECK(lin.blocks[0].options[0] == remat::block_recompute{});
  CHECK(lin.blocks[0].options[1] == remat::block_recompute{{2}, {1}});
  CHECK(lin.blocks[0].options[2] == remat::block_recompute{{1}, {0}});
  CHECK(lin.blocks[0].options[3] == remat::block_recompute{{1, 2}, {0, 1}});
  // Without block options, the stage is plain autograd's, equal to option 0.
  const remat::linearization plain = remat::linearize(g);
  CHECK(plain.chain.stages[0].options.empty());
  CHECK(remat::option_at(plain.chain.stages[0], 0) == expected[0]);
  CHECK(plain.blocks[0].options.empty());
  // max_options thins to option 0 and the cheapest tape.
  const remat::linearization two = remat::linearize(g, {.block_options = true, .max_options = 2});
  CHECK(two.chain.stages[0].options == std::vector<stage_option>{expected[0], expected[3]});
  // One block alone: B peaks at g's backward, which reads a and makes its gradient, whatever the
  // option, so the least budget stays.
  CHECK(remat::solve(lin.chain, 0).min_feasible_budget ==
        remat::solve(plain.chain, 0).min_feasible_budget);
  // Two such blocks: holding block 0's smaller tape through block 1 saves a recomputation at
  // some budgets, and the node-level replay confirms each schedule.
  remat::graph two_blocks = hand_block();
  {
    const std::size_t y0 = two_blocks.nodes.back().outputs.front();
    const auto a = two_blocks.apply("f2", {y0}, 100, {.forward_time = 4, .backward_time = 2,
                                                      .saved = {y0}});
    const auto b = two_blocks.apply("g2", {a}, 50, {.forward_time = 1, .backward_time = 2,
                                                    .saved = {a}});
    two_blocks.apply("h2", {b, y0}, 10, {.forward_time = 1, .backward_time = 2, .saved = {b}});
  }
  const remat::linearization lin2 = remat::linearize(two_blocks, {.block_options = true});
  const remat::linearization plain2 = remat::linearize(two_blocks);
  REQUIRE(lin2.blocks.size() == 2);
  CHECK(lin2.distinct_blocks == 1);
  CHECK(lin2.blocks[1].options[3] == remat::block_recompute{{4, 5}, {3, 4}});
  bool faster = false;
  for (size_type budget = 250; budget <= 600; budget += 10) {
    CAPTURE(budget);
    const remat::graph_solve_result with = remat::solve_graph(two_blocks, lin2, budget);
    const remat::solve_result without = remat::solve(plain2.chain, budget);
    CHECK(with.result.feasible == without.feasible);
    if (!without.feasible) continue;
    CHECK(with.replay.fits(budget));
    CHECK(with.result.schedule.makespan <= without.schedule.makespan);
    faster = faster || with.result.schedule.makespan < without.schedule.makespan;
  }
  CHECK(faster);
  CHECK_THROWS_AS(remat::linearize(g, {.block_options = true, .exact_limit = 31}),
                  std::invalid_argument);
  CHECK_THROWS_AS(remat::linearize(g, {.block_options = true, .max_options = 0}),
                  std::invalid_argument);
}

// x -> a = f(x) -> b = g(a) -> c = h(b) -> y = k(c, x): one block whose backward peaks at its
// first backward node (k's, which makes c's gradient while the whole tape is held). Each node
// saves its input; y is taped as the output.
remat::graph late_reader_block() {
  remat::graph g;
  const auto x = g.input("x", 10);
  const auto a = g.apply("f", {x}, 100, {.forward_time = 4, .backward_time = 2, .saved = {x}});
  const auto b = g.apply("g", {a}, 100, {.forward_time = 1, .backward_time = 2, .saved = {a}});
  const auto c = g.apply("h", {b}, 100, {.forward_time = 1, .backward_time = 2, .saved = {b}});
  g.apply("k", {c, x}, 10, {.forward_time = 1, .backward_time = 2, .saved = {c}});
  return g;
}

TEST_CASE("block options: a dropped value comes back just before the backward node that reads it") {
  const remat::graph g = late_reader_block();
  const remat::linearization lin = remat::linearize(g, {.block_options = true});
  const remat::linearization plain = remat::linearize(g);
  REQUIRE(lin.blocks.size() == 1);
  const remat::stage& s = lin.chain.stages[0];
  // Plain autograd: tape a + b + c + y = 310; B starts at 320 (tape and y's gradient), k's
  // backward makes c's gradient (420) and frees y's gradient and c (310), h's makes b's (410,
  // frees c's gradient and b: 210), g's a's (310, then 110), f's frees the rest: bo 420 - 320 =
  // 100.
  CHECK(remat::option_at(s, 0) == stage_option{7, 8, 310, 0, 100});
  // Dropping a (tape 210, f re-run: bw 8 + 4): B starts at 220; k's backward peaks at 320 (then
  // 210), h's at 310 (then 110); only then f is re-run, making a back (210), and g's backward
  // makes a's gradient (310): bo 320 - 220 = 100, as plain autograd's. Re-running f at the start
  // of B instead would hold a through k's backward: 420 above the input, bo 200. The recording
  // forward peaks at 210 (b, c, y; a freed after g): fo 0.
  REQUIRE(lin.blocks[0].options.size() == s.options.size());
  std::size_t drop_a = s.options.size();
  for (std::size_t o = 0; o < s.options.size(); ++o)
    if (lin.blocks[0].options[o] == remat::block_recompute{{1}, {0}}) drop_a = o;
  REQUIRE(drop_a < s.options.size());
  CHECK(s.options[drop_a] == stage_option{7, 12, 210, 0, 100});
  // Dropping b (g re-run, reading the kept a): k's backward peaks at 320 (then 210), g re-makes b
  // (310), h's backward makes b's gradient: 410, bo 190 (re-run at the start: b held through k's
  // backward too, 420, bo 200). The recording forward holds a, b and c after h: fo 300 - 210.
  for (std::size_t o = 0; o < s.options.size(); ++o)
    if (lin.blocks[0].options[o] == remat::block_recompute{{2}, {1}})
      CHECK(s.options[o] == stage_option{7, 9, 210, 90, 190});
  // The least budget: B(0) counts a_0, g_1, the tape, g_0 and bo: 10 + 10 + 310 + 10 + 100 = 440
  // plain, 10 + 10 + 210 + 10 + 100 = 340 dropping a (the start order: 440 again).
  CHECK(remat::solve(plain.chain, 0).min_feasible_budget == 440);
  CHECK(remat::solve(lin.chain, 0).min_feasible_budget == 340);
  const remat::graph_solve_result r = remat::solve_graph(g, lin, 340);
  REQUIRE(r.result.feasible);
  CHECK(r.result.schedule.ops ==
        std::vector<remat::op>{remat::f_all(0, static_cast<std::uint16_t>(drop_a)),
                               remat::loss_op(1), remat::backward(0)});
  CHECK(r.replay.peak_memory == 340);
  // The costs are tight: the same schedule, its option's bo one byte smaller, is refused by the
  // node-level check.
  remat::linearization lower = lin;
  lower.chain.stages[0].options[drop_a].backward_overhead -= 1;
  CHECK_THROWS_AS(remat::solve_graph(g, lower, 339), std::logic_error);
}

TEST_CASE("block options: the enumeration is the brute-force Pareto set of replayed costs") {
  std::mt19937_64 rng(4310);
  std::size_t with_options = 0;
  for (int trial = 0; trial < remat::testing::trials(400); ++trial) {
    const remat::graph g = remat::testing::random_graph(rng, {.min_nodes = 2, .max_nodes = 9});
    const remat::linearization lin = remat::linearize(g);
    for (const remat::graph_block& blk : lin.blocks) {
      CAPTURE(trial);
      CAPTURE(blk.first);
      const gr::block_layout b = gr::layout_block(g, blk.first, blk.end, blk.input);
      const auto found = gr::block_options(g, b, {.exact_limit = 16, .max_options = 1 << 16});
      // Every subset of the taped values other than the output: those the node level can
      // rebuild, costed by replaying their expansion.
      std::vector<std::size_t> taped;
      for (std::size_t v = 0; v < b.taped.size(); ++v)
        if (b.taped[v] && v != b.output_root) taped.push_back(v);
      if (taped.size() > 10) continue;
      const std::vector<char> plain = gr::plain_values(g, b);
      const std::vector<std::size_t> maker = gr::makers(g, b);
      std::vector<stage_option> all;
      for (std::uint32_t m = 0; m < (1U << taped.size()); ++m) {
        remat::block_recompute plan;
        std::vector<char> mask(g.values.size(), 0);
        for (std::size_t i = 0; i < taped.size(); ++i)
          if ((m >> i) & 1U) {
            plan.dropped.push_back(taped[i]);
            mask[taped[i]] = 1;
          }
        bool ok = std::all_of(plan.dropped.begin(), plan.dropped.end(),
                              [&](std::size_t v) { return plain[v] != 0; });
        const auto rerun = gr::recompute_nodes(g, b, plain, maker, plan.dropped, mask);
        if (!ok || !rerun) continue;
        plan.recompute = *rerun;
        all.push_back(replayed_costs(g, b, plan));
      }
      REQUIRE(!all.empty());
      std::vector<std::tuple<size_type, double, size_type, size_type>> brute{key(all.front())};
      for (const stage_option& c : all) {
        const bool dominated = std::any_of(all.begin(), all.end(), [&](const stage_option& d) {
          return key(d) != key(c) && gr::dominates(d, c);
        });
        if (!dominated) brute.push_back(key(c));
      }
      std::sort(brute.begin(), brute.end());
      brute.erase(std::unique(brute.begin(), brute.end()), brute.end());
      std::vector<std::tuple<size_type, double, size_type, size_type>> got;
      for (const auto& f : found) got.push_back(key(f.first));
      CHECK(key(found.front().first) == key(all.front()));
      std::sort(got.begin(), got.end());
      CHECK(got == brute);
      if (found.size() > 1) ++with_options;
    }
  }
  CHECK(with_options > 20);
}

TEST_CASE("block options: schedules picking options replay node by node within their figures") {
  std::mt19937_64 rng(4311);
  const remat::solver solvers[] = {remat::solver::optimal, remat::solver::checkpoint_only,
                                   remat::solver::min_memory, remat::solver::exhaustive};
  std::size_t picked = 0, feasible = 0, tight = 0, lower = 0, lowered_costs = 0;
  for (int trial = 0; trial < remat::testing::trials(500); ++trial) {
    const remat::graph g = remat::testing::random_graph(rng, {.min_nodes = 1, .max_nodes = 14});
    const remat::linearization lin = remat::linearize(g, {.block_options = true});
    const remat::linearization plain = remat::linearize(g);
    remat::linearization lowered = lin;
    // Option 0 of every stage is the stage without options.
    for (std::size_t k = 0; k < lin.chain.stages.size(); ++k) {
      remat::stage s = lin.chain.stages[k];
      if (!s.options.empty()) CHECK(s.options.front() == remat::option_at(plain.chain.stages[k], 0));
      s.options.clear();
      CHECK(s == plain.chain.stages[k]);
    }
    const size_type most = remat::solve(lin.chain, remat::max_size,
                                        {.solver = remat::solver::store_all})
                               .schedule.peak_memory;
    const size_type least = remat::solve(lin.chain, 0).min_feasible_budget;
    const size_type least_plain = remat::solve(plain.chain, 0).min_feasible_budget;
    CHECK(least <= least_plain);
    if (least < least_plain) ++lower;
    for (int draw = 0; draw < 3; ++draw) {
      const size_type budget = std::uniform_int_distribution<size_type>(least, most)(rng);
      for (const remat::solver s : solvers) {
        if (s == remat::solver::exhaustive && lin.chain.length() > 4) continue;
        CAPTURE(trial);
        CAPTURE(budget);
        CAPTURE(remat::name(s));
        const remat::graph_solve_result r = remat::solve_graph(g, lin, budget, {.solver = s});
        if (!r.result.feasible) continue;
        ++feasible;
        REQUIRE(r.replay.valid());
        CHECK(r.replay.fits(budget));
        CHECK(r.replay.peak_memory <= r.result.schedule.peak_memory);
        CHECK(std::fabs(r.replay.makespan - r.result.schedule.makespan) <=
              1e-9 * (1 + r.result.schedule.makespan));
        const bool picks = std::any_of(r.result.schedule.ops.begin(), r.result.schedule.ops.end(),
                                       [](const remat::op& o) { return o.option != 0; });
        picked += picks ? 1 : 0;
        // Each picked option's backward overhead made one byte smaller: how often the chain
        // then claims less than the node level holds (the check would fail).
        for (const remat::op& o : r.result.schedule.ops) {
          if (o.kind != remat::op_kind::forward_all || o.option == 0) continue;
          remat::stage_option& c =
              lowered.chain.stages[static_cast<std::size_t>(o.stage)].options[o.option];
          if (c.backward_overhead == 0) continue;
          c.backward_overhead -= 1;
          const remat::replay_result less = remat::simulate(lowered.chain, r.result.schedule.ops);
          c.backward_overhead += 1;
          ++lowered_costs;
          if (less.peak_memory < r.replay.peak_memory) ++tight;
        }
      }
      // The optimal solver with options is never slower than without at the same budget.
      const remat::solve_result with = remat::solve(lin.chain, budget);
      const remat::solve_result without = remat::solve(plain.chain, budget);
      if (without.feasible) {
        REQUIRE(with.feasible);
        CHECK(with.schedule.makespan <= without.schedule.makespan + 1e-9 * (1 + without.schedule.makespan));
      }
    }
  }
  CHECK(feasible > 100);
  CHECK(picked > 20);
  // The re-runs just before their first backward reader lower the least budget of many graphs.
  CHECK(lower > 20);
  // The options' backward overheads are not loose: one byte less, and most schedules that pick
  // an option would claim less than the node level holds.
  CHECK(tight > lowered_costs / 2);
}

}  // namespace unit_block_options_test
