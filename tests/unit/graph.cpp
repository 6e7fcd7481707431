// Tests of remat/graph.hpp: the builder, and validation: every rule broken once, each error
// naming the node or value at fault.
#include <remat/graph.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <functional>
#include <limits>
#include <string>

namespace unit_graph_test {

namespace {

using remat::graph;
using remat::graph_error;
using remat::value_kind;

// x -> fc (reads w) -> relu (in place) -> out
struct small {
  graph g;
  std::size_t x, w, h, r, out;
  small() {
    x = g.input("x", 4);
    w = g.global("w", 100);
    h = g.apply("fc", {x, w}, 8, {.forward_time = 1, .backward_time = 2, .saved = {x, w}});
    r = g.apply_in_place("relu", h, {}, {.forward_time = 0.5, .backward_time = 0.5,
                                         .saves_output = true});
    out = g.apply("head", {r, w}, 2, {.forward_time = 1, .backward_time = 1, .saved = {r}});
  }
};

// The error `change` makes: its message, its node and value.
struct caught {
  std::string what;
  std::size_t node = graph_error::none, value = graph_error::none;
};
caught error_of(const std::function<void(small&)>& change) {
  small s;
  change(s);
  try {
    remat::validate(s.g);
  } catch (const graph_error& e) {
    return {e.what(), e.node(), e.value()};
  }
  FAIL("no graph_error");
  return {};
}

}  // namespace

TEST_CASE("graph: the builder makes the values and nodes it says") {
  small s;
  CHECK_NOTHROW(remat::validate(s.g));
  REQUIRE(s.g.nodes.size() == 3);
  CHECK(s.g.values[s.x].kind == value_kind::input);
  CHECK(s.g.values[s.w].kind == value_kind::global);
  CHECK(s.g.values[s.h].kind == value_kind::activation);
  CHECK(s.g.values[s.h].name == "fc");
  CHECK(s.g.nodes[0].inputs == std::vector<std::size_t>{s.x, s.w});
  CHECK(s.g.nodes[0].saved == std::vector<std::size_t>{s.x, s.w});
  CHECK(s.g.nodes[1].inputs == std::vector<std::size_t>{s.h});
  CHECK(s.g.nodes[1].saved == std::vector<std::size_t>{s.r});
  REQUIRE(s.g.nodes[1].in_place.size() == 1);
  CHECK(s.g.nodes[1].in_place[0].output == s.r);
  CHECK(s.g.nodes[1].in_place[0].input == s.h);
  CHECK(s.g.values[s.r].size == 8);
}

TEST_CASE("graph: every broken rule is an error naming its node or value") {
  using n = std::size_t;
  const n none = graph_error::none;
  struct expect {
    const char* text;
    n node, value;
    std::function<void(small&)> change;
  };
  const expect cases[] = {
      {"node 1 (\"relu\"): reads value 99, which does not exist", 1, 99,
       [](small& s) { s.g.nodes[1].inputs.push_back(99); }},
      {"node 0 (\"fc\"): reads value 3 (\"relu\"), which node 1 (\"relu\") makes later", 0, 3,
       [](small& s) { s.g.nodes[0].inputs.push_back(s.r); }},
      {"node 1 (\"relu\"): reads value 3 (\"relu\"), which it makes itself", 1, 3,
       [](small& s) { s.g.nodes[1].inputs.push_back(s.r); }},
      {"value 2 (\"fc\"): size must be >= 0 (-1)", none, 2,
       [](small& s) { s.g.values[s.h].size = -1; }},
      {"value 1 (\"w\"): size must be <= 2^62", none, 1,
       [](small& s) { s.g.values[s.w].size = std::numeric_limits<remat::size_type>::max(); }},
      {"node 2 (\"head\"): forward_time must be finite and >= 0", 2, none,
       [](small& s) { s.g.nodes[2].forward_time = -1; }},
      {"node 0 (\"fc\"): backward_time must be finite and >= 0", 0, none,
       [](small& s) { s.g.nodes[0].backward_time = std::numeric_limits<double>::infinity(); }},
      {"node 2 (\"head\"): backward_transient must be in 0..2^62 (-3)", 2, none,
       [](small& s) { s.g.nodes[2].backward_transient = -3; }},
      {"node 2 (\"head\"): saved_internal must be in 0..2^62 (-1)", 2, none,
       [](small& s) { s.g.nodes[2].saved_internal = -1; }},
      {"node 2 (\"head\"): makes no value", 2, none,
       [](small& s) { s.g.nodes[2].outputs.clear(); }},
      {"node 2 (\"head\"): makes value 0 (\"x\"), which is the graph's input", 2, 0,
       [](small& s) { s.g.nodes[2].outputs.push_back(s.x); }},
      {"node 2 (\"head\"): makes value 1 (\"w\"), which is a global", 2, 1,
       [](small& s) { s.g.nodes[2].outputs.push_back(s.w); }},
      {"node 2 (\"head\"): makes value 2 (\"fc\"), which node 0 (\"fc\") makes already", 2, 2,
       [](small& s) { s.g.nodes[2].outputs.push_back(s.h); }},
      {"node 1 (\"relu\"): reads value 5 (\"orphan\"), which no node makes", 1, 5,
       [](small& s) {
         s.g.nodes[1].inputs.push_back(s.g.add_value("orphan", 1, value_kind::activation));
       }},
      {"node 2 (\"head\"): saves value 0 (\"x\"), which is neither its input nor its output", 2, 0,
       [](small& s) { s.g.nodes[2].saved.push_back(s.x); }},
      {"node 2 (\"head\"): writes in place into value 2 (\"fc\"), which is not its input", 2, 2,
       [](small& s) { s.g.nodes[2].in_place.push_back({s.out, s.h}); }},
      {"node 2 (\"head\"): in-place output value 2 (\"fc\") is not its output", 2, 2,
       [](small& s) { s.g.nodes[2].in_place.push_back({s.h, s.r}); }},
      {"node 0 (\"fc\"): writes in place into value 0 (\"x\"), which is the graph's input", 0, 0,
       [](small& s) { s.g.nodes[0].in_place.push_back({s.h, s.x}); }},
      {"node 1 (\"relu\"): in-place output value 3 (\"relu\") has size 3, not that of value 2 "
       "(\"fc\") (8)",
       1, 3, [](small& s) { s.g.values[s.r].size = 3; }},
      {"node 2 (\"head\"): reads value 2 (\"fc\"), which node 1 (\"relu\") overwrote in place", 2,
       2, [](small& s) { s.g.nodes[2].inputs.push_back(s.h); }},
      {"node 1 (\"relu\"): writes in place into value 2 (\"fc\"), which a node's backward reads",
       1, 2, [](small& s) { s.g.nodes[1].saved.push_back(s.h); }},
      {"node 2 (\"head\"): the last node must make exactly one value", 2, none,
       [](small& s) { s.g.nodes[2].outputs.push_back(s.g.add_value("extra", 1, value_kind::activation)); }},
      {"value 5 (\"x2\"): a second input value", none, 5, [](small& s) { s.g.input("x2", 1); }},
  };
  for (const expect& e : cases) {
    CAPTURE(e.text);
    const caught c = error_of(e.change);
    CHECK(c.what.find(e.text) == 0);
    CHECK(c.node == e.node);
    CHECK(c.value == e.value);
  }
}

TEST_CASE("graph: graph-level errors") {
  graph empty;
  empty.input("x", 1);
  CHECK_THROWS_WITH_AS(remat::validate(empty), "graph: no nodes", graph_error);
  graph no_input;
  const auto w = no_input.global("w", 1);
  no_input.apply("f", {w}, 1);
  CHECK_THROWS_WITH_AS(remat::validate(no_input), "graph: no input value", graph_error);
  small s;
  s.g.loss_time = -1;
  CHECK_THROWS_WITH_AS(remat::validate(s.g), "graph: loss_time must be finite and >= 0",
                       graph_error);
}

TEST_CASE("graph: a cycle is an error naming the node that reads ahead") {
  graph g;
  const auto x = g.input("x", 1);
  remat::graph_node a{.name = "a", .inputs = {x, 2}, .outputs = {1}};
  remat::graph_node b{.name = "b", .inputs = {1}, .outputs = {2}};
  g.add_value("a.out", 1, value_kind::activation);
  g.add_value("b.out", 1, value_kind::activation);
  g.add_node(a);
  g.add_node(b);
  CHECK_THROWS_WITH_AS(remat::validate(g),
                       "node 0 (\"a\"): reads value 2 (\"b.out\"), which node 1 (\"b\") makes "
                       "later (the nodes must be in an order where makers come first; a cycle has "
                       "none)",
                       graph_error);
}

}  // namespace unit_graph_test
