// Tests of remat/graph_simulate.hpp: node-level replays of random chain schedules on random
// graphs stay within the chain-level peak at the chain-level makespan (the proof that block costs
// are safe, for every op and every input form: a_k or the tape t_k); a hand-made residual graph's
// node-level figures; and the errors of the expansion and of the replay.
#include <remat/graph_simulate.hpp>

#include <remat/simulate.hpp>

#include <doctest/doctest.h>

#include <random_graph.hpp>
#include <random_schedule.hpp>
#include <trials.hpp>

#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

namespace unit_graph_simulate_test {

namespace {

using remat::graph;
using remat::size_type;

bool same_time(double a, double b) { return std::fabs(a - b) <= 1e-9 * (1 + std::fabs(a)); }

graph residual() {
  graph g;
  const auto x = g.input("x", 100);
  const auto w = g.global("w", 1000);
  auto h = x;
  for (int i = 0; i < 3; ++i) {
    const auto a = g.apply("fc", {h, w}, 200, {.forward_time = 1, .backward_time = 2,
                                               .forward_transient = 7, .saved = {h, w}});
    const auto r = g.apply_in_place("relu", a, {}, {.forward_time = 0.5, .backward_time = 0.5,
                                                    .saves_output = true});
    h = g.apply("add", {r, h}, 100, {.forward_time = 0.25, .backward_time = 0.25,
                                     .backward_transient = 11});
  }
  return g;
}

}  // namespace

TEST_CASE("simulate_nodes: random schedules on random graphs stay within the chain's peak") {
  std::mt19937_64 rng(4302);
  std::size_t replayed = 0, tight = 0;
  for (int trial = 0; trial < remat::testing::trials(3000); ++trial) {
    const graph g = remat::testing::random_graph(rng, {.min_nodes = 1, .max_nodes = 10});
    const remat::linearization lin = remat::linearize(g);
    const auto ops = remat::testing::random_schedule(lin.chain, rng, 120);
    if (!ops) continue;
    const remat::replay_result chain_level = remat::simulate(lin.chain, *ops);
    REQUIRE(chain_level.valid());
    const remat::node_replay nodes = remat::simulate_nodes(g, lin, *ops);
    CAPTURE(trial);
    CAPTURE(nodes.error);
    REQUIRE(nodes.valid());
    CHECK(nodes.peak_memory <= chain_level.peak_memory);
    CHECK(same_time(nodes.makespan, chain_level.makespan));
    ++replayed;
    if (nodes.peak_memory == chain_level.peak_memory) ++tight;
  }
  CHECK(replayed > static_cast<std::size_t>(remat::testing::trials(3000)) / 2);
  // The costs are not loose everywhere: many replays reach the chain's peak exactly.
  CHECK(tight > replayed / 4);
}

TEST_CASE("simulate_nodes: store-all on a residual graph, by hand") {
  const graph g = residual();
  const remat::linearization lin = remat::linearize(g);
  REQUIRE(lin.chain.length() == 3);
  using remat::backward;
  using remat::f_all;
  const std::vector<remat::op> ops{f_all(0), f_all(1), f_all(2), remat::loss_op(3),
                                   backward(2), backward(1), backward(0)};
  const remat::node_replay r = remat::simulate_nodes(g, lin, ops);
  REQUIRE(r.valid());
  CHECK(r.steps == 3 * 3 + 1 + 3 * 3);
  CHECK(r.makespan == 3 * (1.75 + 2.75));
  // B(2) starts from the input, the three tapes (300 each), g_3 and g_2: 1200. add makes relu's
  // gradient (1400, and 11 transient bytes) and frees g_3; relu makes fc's gradient: 1500, the
  // chain's peak too (held 1200 + bt 300).
  CHECK(r.peak_memory == 1500);
  CHECK(remat::simulate(lin.chain, ops).peak_memory == 1500);
}

TEST_CASE("simulate_nodes: transfer ops and invalid chain schedules are refused") {
  const graph g = residual();
  const remat::linearization lin = remat::linearize(g);
  const std::vector<remat::op> offload{remat::f_ck(0), remat::offload(1)};
  CHECK_THROWS_WITH_AS(remat::simulate_nodes(g, lin, offload),
                       doctest::Contains("op 1 (O(1,a)): transfer ops have no node-level"),
                       std::invalid_argument);
  const std::vector<remat::op> bad{remat::backward(0)};
  CHECK_THROWS_WITH_AS(remat::simulate_nodes(g, lin, bad),
                       doctest::Contains("the chain schedule is invalid: op 0 (B(0))"),
                       std::invalid_argument);
}

TEST_CASE("replay_nodes: a step reading what is not held, or making what is, is named") {
  using remat::node_buffer;
  using remat::node_step;
  std::vector<node_step> steps(2);
  steps[0].node = 0;
  steps[0].makes = {{node_buffer{'w', 0, 5}, 10}};
  steps[0].transient = 3;
  steps[1].node = 1;
  steps[1].reads = {node_buffer{'w', 0, 6}};
  const remat::node_replay r = remat::replay_nodes(steps, 4);
  CHECK(r.error == "step 1 (forward of node 1, chain op 0): reads value 6, which is not held");
  CHECK(r.peak_memory == 17);
  steps[1].reads.clear();
  steps[1].makes = {{node_buffer{'w', 0, 5}, 1}};
  CHECK(remat::replay_nodes(steps, 4).error ==
        "step 1 (forward of node 1, chain op 0): makes value 5, which is already held");
  steps[1].makes.clear();
  steps[1].frees = {node_buffer{'t', 2, -4}};
  CHECK(remat::replay_nodes(steps, 4).error ==
        "step 1 (forward of node 1, chain op 0): frees t_2[internal of node 3], which is not held");
}

}  // namespace unit_graph_simulate_test
