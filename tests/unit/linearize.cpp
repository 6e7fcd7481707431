// Tests of remat/linearize.hpp: the cut points against a brute-force reading of their definition
// (docs/graphs.md) on random graphs, block costs computed by hand, identical blocks costed once,
// and what a graph whose skips span everything becomes (one block).
#include <remat/linearize.hpp>

#include <doctest/doctest.h>

#include <random_graph.hpp>
#include <trials.hpp>

#include <cstddef>
#include <random>
#include <set>
#include <vector>

namespace unit_linearize_test {

namespace {

using remat::graph;
using remat::size_type;
using remat::value_kind;

// docs/graphs.md's definition, read literally: after node v runs in a plain forward, the
// activations held and still read later (or the graph's output) are exactly {v's single output},
// and no later node writes in place into a value made before v.
std::vector<std::size_t> brute_force_cuts(const graph& g) {
  const std::size_t n_nodes = g.nodes.size();
  auto maker = [&](std::size_t x) -> long {
    for (std::size_t n = 0; n < n_nodes; ++n)
      for (const std::size_t o : g.nodes[n].outputs)
        if (o == x) return static_cast<long>(n);
    return -1;  // the input (or a global)
  };
  auto overwriter = [&](std::size_t x) -> long {
    for (std::size_t n = 0; n < n_nodes; ++n)
      for (const auto& a : g.nodes[n].in_place)
        if (a.input == x) return static_cast<long>(n);
    return -2;
  };
  const std::size_t graph_output = g.nodes.back().outputs.front();
  std::vector<std::size_t> cuts;
  for (std::size_t v = 0; v < n_nodes; ++v) {
    const long at = static_cast<long>(v);
    std::set<std::size_t> held;
    for (std::size_t x = 0; x < g.values.size(); ++x) {
      if (g.values[x].kind == value_kind::global) continue;
      if (maker(x) > at) continue;
      const long w = overwriter(x);
      if (w != -2 && w <= at) continue;  // its life as a separate value ended
      bool read_later = x == graph_output;
      for (std::size_t n = v + 1; n < n_nodes; ++n)
        for (const std::size_t i : g.nodes[n].inputs) read_later = read_later || i == x;
      if (read_later) held.insert(x);
    }
    const auto& outs = g.nodes[v].outputs;
    bool cut = outs.size() == 1 && held == std::set<std::size_t>{outs.front()};
    for (std::size_t x = 0; x < g.values.size() && cut; ++x)
      if (g.values[x].kind != value_kind::global && maker(x) < at && overwriter(x) > at)
        cut = false;
    if (cut) cuts.push_back(v);
  }
  return cuts;
}

}  // namespace

TEST_CASE("linearize: the cut points are those of the definition, on random graphs") {
  std::mt19937_64 rng(4301);
  std::size_t with_skips = 0, in_place = 0;
  for (int trial = 0; trial < remat::testing::trials(4000); ++trial) {
    const graph g = remat::testing::random_graph(rng, {.min_nodes = 1, .max_nodes = 9});
    const remat::linearization lin = remat::linearize(g);
    CAPTURE(trial);
    REQUIRE(lin.cut_nodes == brute_force_cuts(g));
    // The blocks partition the nodes in order, each ending at a cut point.
    REQUIRE(lin.blocks.size() == lin.cut_nodes.size());
    REQUIRE(lin.chain.length() == lin.blocks.size());
    CHECK(lin.cut_nodes.back() == g.nodes.size() - 1);
    std::size_t first = 0;
    for (std::size_t k = 0; k < lin.blocks.size(); ++k) {
      CHECK(lin.blocks[k].first == first);
      CHECK(lin.blocks[k].end == lin.cut_nodes[k] + 1);
      CHECK(lin.chain.stages[k].output_size == g.values[lin.blocks[k].output].size);
      for (std::size_t n = lin.blocks[k].first; n < lin.blocks[k].end; ++n)
        CHECK(lin.block_of[n] == k);
      first = lin.blocks[k].end;
    }
    CHECK(lin.chain.input_size == g.values[0].size);
    if (lin.blocks.size() < g.nodes.size()) ++with_skips;
    for (const auto& n : g.nodes) in_place += n.in_place.size();
  }
  // The generator reaches what the test is about.
  CHECK(with_skips > static_cast<std::size_t>(remat::testing::trials(4000)) / 4);
  CHECK(in_place > 100);
}

TEST_CASE("linearize: a residual block's costs, by hand") {
  // x -> fc (saves x, w) -> relu_ in place (saves its output) -> add(relu, x) -> out; twice.
  graph g;
  const auto x = g.input("x", 100);
  const auto w = g.global("w", 1000);
  auto h = x;
  for (int i = 0; i < 2; ++i) {
    const auto a = g.apply("fc", {h, w}, 200, {.forward_time = 1, .backward_time = 2,
                                               .forward_transient = 7, .saved = {h, w}});
    const auto r = g.apply_in_place("relu", a, {}, {.forward_time = 0.5, .backward_time = 0.5,
                                                    .saves_output = true});
    h = g.apply("add", {r, h}, 100, {.forward_time = 0.25, .backward_time = 0.25,
                                     .backward_transient = 11});
  }
  const remat::linearization lin = remat::linearize(g);
  CHECK(lin.cut_nodes == std::vector<std::size_t>{2, 5});
  CHECK(lin.distinct_blocks == 1);
  CHECK(lin.global_bytes == 1000);
  CHECK(lin.block_of == std::vector<std::size_t>{0, 0, 0, 1, 1, 1});
  for (const remat::stage& s : lin.chain.stages) {
    CHECK(s.forward_time == 1.75);
    CHECK(s.backward_time == 2.75);
    CHECK(s.output_size == 100);
    // The tape: fc's output (relu saves it, in place) and the block's output.
    CHECK(s.tape_size == 300);
    // Plain forward: fc holds its 200-byte output and 7 transient bytes; add makes its output
    // (100) while fc's output is alive: 300 in all, of which the chain counts the output.
    CHECK(s.forward_overhead == 200);
    // Recording: the same peak, but the tape (300) counts fc's output already.
    CHECK(remat::recording_overhead(s) == 0);
    // Backward, above g_out + the tape (400): add makes relu's gradient (200) with 11 transient
    // bytes: 611; then it frees g_out (100); relu makes fc's gradient (200): 700, then frees
    // relu's gradient and its tape entry: 300 left, which fc frees.
    CHECK(s.backward_overhead == 300);
  }
}

TEST_CASE("linearize: blocks that differ only by their globals are costed once") {
  graph g;
  const auto x = g.input("x", 10);
  auto h = x;
  for (int i = 0; i < 6; ++i) {
    const auto w = g.global("w" + std::to_string(i), 50 + i);
    h = g.apply("fc", {h, w}, 10, {.forward_time = 1, .backward_time = 2, .saved = {h, w}});
  }
  // A different block: another size.
  h = g.apply("head", {h}, 3, {.forward_time = 1, .backward_time = 1});
  const remat::linearization lin = remat::linearize(g);
  CHECK(lin.blocks.size() == 7);
  CHECK(lin.distinct_blocks == 2);
  for (std::size_t k = 0; k < 6; ++k) CHECK(lin.blocks[k].kind == lin.blocks[0].kind);
  CHECK(lin.blocks[6].kind != lin.blocks[0].kind);
}

TEST_CASE("linearize: a long skip from the first node to the last leaves one block") {
  // A U-Net-like graph: the input's encoding is read again by the last node, so no node between
  // is a cut point; the chain is the encoder and one stage holding every other node.
  graph g;
  const auto x = g.input("x", 10);
  const auto e = g.apply("enc", {x}, 20, {.forward_time = 1, .backward_time = 1});
  auto h = e;
  for (int i = 0; i < 5; ++i)
    h = g.apply("mid", {h}, 5, {.forward_time = 1, .backward_time = 1, .saved = {h}});
  g.apply("dec", {h, e}, 10, {.forward_time = 1, .backward_time = 1, .saved = {h, e}});
  const remat::linearization lin = remat::linearize(g);
  CHECK(lin.cut_nodes == std::vector<std::size_t>{0, 6});
  REQUIRE(lin.blocks.size() == 2);
  CHECK(remat::activation_share(g, lin.blocks[1]) == doctest::Approx(35.0 / 65.0));
}

TEST_CASE("linearize: a graph whose memory overflows 64 bits is an error") {
  graph g;
  const auto x = g.input("x", remat::max_size);
  const auto a = g.apply("a", {x}, remat::max_size);
  g.apply("b", {a}, remat::max_size, {.saves_output = true});
  CHECK_THROWS_WITH_AS(remat::linearize(g),
                       doctest::Contains("the graph's total memory"), remat::graph_error);
}

}  // namespace unit_linearize_test
