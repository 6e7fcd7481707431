// Graphs of ops (docs/graphs.md): values and nodes, a builder, and the validation that every
// other graph function relies on. `remat::linearize` (linearize.hpp) cuts a valid graph into a
// chain of blocks.
//
//   remat::graph g;
//   const auto x = g.input("x", 4096);
//   const auto w = g.global("w", 1 << 20);
//   const auto h = g.apply("fc", {x, w}, 8192, {.forward_time = 1, .backward_time = 2,
//                                               .saved = {x, w}});
//   const auto y = g.apply_in_place("relu", h, {}, {.forward_time = 0.1, .backward_time = 0.1,
//                                                   .saves_output = true});
//   remat::validate(g);  // throws remat::graph_error naming the node or value
#pragma once

#include <remat/chain.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace remat {

/// What a value is (docs/graphs.md): the graph's one input, a global (parameters, buffers,
/// constants: held for the whole step, outside the budget like the weights; no node makes one),
/// or an activation (made by exactly one node).
enum class value_kind : std::uint8_t { input, global, activation };

/// One value of a graph: a tensor, by its size in bytes (or any memory unit).
struct graph_value {
  std::string name;
  size_type size = 0;
  value_kind kind = value_kind::activation;
  friend bool operator==(const graph_value&, const graph_value&) = default;
};

/// An output of a node that aliases one of its inputs (an in-place op): the output takes no new
/// bytes, and the input's life as a separate value ends there (no node may read it afterwards).
struct in_place_output {
  std::size_t output = 0;  ///< a value the node makes
  std::size_t input = 0;   ///< the value among its inputs whose bytes the output takes over
  friend bool operator==(const in_place_output&, const in_place_output&) = default;
};

/// One op of a graph. `saved` are the values its backward reads (among its inputs and outputs);
/// `saved_internal` the bytes it keeps besides for its backward (a dropout mask, say).
struct graph_node {
  std::string name;
  std::vector<std::size_t> inputs{};
  std::vector<std::size_t> outputs{};
  double forward_time = 0;
  double backward_time = 0;
  size_type forward_transient = 0;
  size_type backward_transient = 0;
  std::vector<std::size_t> saved{};
  size_type saved_internal = 0;
  std::vector<in_place_output> in_place{};
  friend bool operator==(const graph_node&, const graph_node&) = default;
};

/// The costs of a node made by `graph::apply` and `graph::apply_in_place`.
struct node_costs {
  double forward_time = 0;
  double backward_time = 0;
  size_type forward_transient = 0;
  size_type backward_transient = 0;
  std::vector<std::size_t> saved{};  ///< among the node's inputs
  bool saves_output = false;         ///< the backward also reads the node's output
  size_type saved_internal = 0;
};

/// A graph: values, and nodes listed in an order where each node comes after the makers of its
/// inputs. The last node's single output is what the loss reads; `loss_time` and
/// `loss_overhead` are the loss's time and transient (model.md's bw[L], bt[L]).
struct graph {
  std::vector<graph_value> values;
  std::vector<graph_node> nodes;
  double loss_time = 0;
  size_type loss_overhead = 0;

  /// Adds a value; returns its index.
  std::size_t add_value(std::string name, size_type size, value_kind kind) {
    values.push_back({std::move(name), size, kind});
    return values.size() - 1;
  }
  /// The graph's input (one per graph).
  std::size_t input(std::string name, size_type size) {
    return add_value(std::move(name), size, value_kind::input);
  }
  /// A global: a parameter, buffer or constant.
  std::size_t global(std::string name, size_type size) {
    return add_value(std::move(name), size, value_kind::global);
  }
  /// Adds a node; returns its index.
  std::size_t add_node(graph_node n) {
    nodes.push_back(std::move(n));
    return nodes.size() - 1;
  }
  /// A node `name` reading `inputs` and making one new activation (also named `name`) of
  /// `bytes` bytes; returns the activation's index.
  std::size_t apply(std::string name, std::vector<std::size_t> inputs, size_type bytes,
                    const node_costs& c = {}) {
    const std::size_t out = add_value(name, bytes, value_kind::activation);
    add_node(make_node(std::move(name), std::move(inputs), out, c));
    return out;
  }
  /// A node `name` that writes in place into `target` (reading `others` besides): its output
  /// takes over `target`'s bytes. Returns the output's index.
  std::size_t apply_in_place(std::string name, std::size_t target,
                             std::vector<std::size_t> others = {}, const node_costs& c = {}) {
    const size_type size = target < values.size() ? values[target].size : 0;
    const std::size_t out = add_value(name, size, value_kind::activation);
    others.insert(others.begin(), target);
    graph_node n = make_node(std::move(name), std::move(others), out, c);
    n.in_place.push_back({out, target});
    add_node(std::move(n));
    return out;
  }

  friend bool operator==(const graph&, const graph&) = default;

 private:
  static graph_node make_node(std::string name, std::vector<std::size_t> inputs, std::size_t out,
                              const node_costs& c) {
    graph_node n;
    n.name = std::move(name);
    n.inputs = std::move(inputs);
    n.outputs = {out};
    n.forward_time = c.forward_time;
    n.backward_time = c.backward_time;
    n.forward_transient = c.forward_transient;
    n.backward_transient = c.backward_transient;
    n.saved = c.saved;
    if (c.saves_output) n.saved.push_back(out);
    n.saved_internal = c.saved_internal;
    return n;
  }
};

/// A graph that breaks the rules of docs/graphs.md. `what()` names the node or the value, e.g.
/// `node 4 ("add"): reads value 7 ("h2"), which node 6 ("conv") makes later`.
class graph_error : public std::invalid_argument {
 public:
  static constexpr std::size_t none = static_cast<std::size_t>(-1);

  graph_error(std::size_t node, std::size_t value, const std::string& what)
      : std::invalid_argument(what), node_(node), value_(value) {}

  /// The offending node, or `none`.
  [[nodiscard]] std::size_t node() const noexcept { return node_; }
  /// The offending value, or `none`.
  [[nodiscard]] std::size_t value() const noexcept { return value_; }

 private:
  std::size_t node_;
  std::size_t value_;
};

namespace detail {

inline std::string node_label(const graph& g, std::size_t n) {
  return "node " + std::to_string(n) + " (\"" + g.nodes[n].name + "\")";
}
inline std::string value_label(const graph& g, std::size_t v) {
  if (v >= g.values.size()) return "value " + std::to_string(v);
  return "value " + std::to_string(v) + " (\"" + g.values[v].name + "\")";
}
inline bool contains(const std::vector<std::size_t>& xs, std::size_t x) {
  for (const std::size_t y : xs)
    if (y == x) return true;
  return false;
}

[[noreturn]] inline void node_fail(const graph& g, std::size_t n, std::size_t v,
                                   const std::string& rule) {
  throw graph_error(n, v, node_label(g, n) + ": " + rule);
}
[[noreturn]] inline void value_fail(const graph& g, std::size_t v, const std::string& rule) {
  throw graph_error(graph_error::none, v, value_label(g, v) + ": " + rule);
}
[[noreturn]] inline void graph_fail(const std::string& rule) {
  throw graph_error(graph_error::none, graph_error::none, rule);
}

// The values' sizes and kinds, exactly one input, and the loss's time and overhead.
inline void validate_values(const graph& g) {
  std::size_t inputs = 0;
  for (std::size_t v = 0; v < g.values.size(); ++v) {
    const graph_value& x = g.values[v];
    if (x.size < 0) value_fail(g, v, "size must be >= 0 (" + std::to_string(x.size) + ")");
    if (x.size > max_size)
      value_fail(g, v, "size must be <= 2^62 (" + std::to_string(x.size) + ")");
    if (x.kind != value_kind::input && x.kind != value_kind::global &&
        x.kind != value_kind::activation)
      value_fail(g, v, "kind is none of input, global, activation");
    if (x.kind == value_kind::input && ++inputs > 1) value_fail(g, v, "a second input value");
  }
  if (inputs == 0) graph_fail("graph: no input value");
  if (!(g.loss_time - g.loss_time == 0) || g.loss_time < 0)
    graph_fail("graph: loss_time must be finite and >= 0");
  if (g.loss_overhead < 0 || g.loss_overhead > max_size)
    graph_fail("graph: loss_overhead must be in 0..2^62");
}

// What `validate` knows of the values as it goes through the nodes in order.
struct graph_check {
  static constexpr std::size_t unmade = static_cast<std::size_t>(-1);
  const graph& g;
  std::vector<std::size_t> maker;           // per value: the first node listing it as an output
  std::vector<std::size_t> overwritten_by;  // per value: the last node writing it in place
  std::vector<char> saved_somewhere;

  explicit graph_check(const graph& gr)
      : g(gr),
        maker(gr.values.size(), unmade),
        overwritten_by(gr.values.size(), unmade),
        saved_somewhere(gr.values.size(), 0) {
    for (std::size_t n = 0; n < g.nodes.size(); ++n)
      for (const std::size_t v : g.nodes[n].outputs)
        if (v < g.values.size() && maker[v] == unmade) maker[v] = n;
  }

  void known(std::size_t n, std::size_t v, const char* role) const {
    if (v >= g.values.size())
      node_fail(g, n, v,
                std::string(role) + " value " + std::to_string(v) + ", which does not exist (" +
                    std::to_string(g.values.size()) + " values)");
  }

  // Node n's times and sizes, and that it makes something.
  void costs(std::size_t n) const {
    const graph_node& node = g.nodes[n];
    auto check_size = [&](size_type s, const char* field) {
      if (s < 0 || s > max_size)
        node_fail(g, n, graph_error::none,
                  std::string(field) + " must be in 0..2^62 (" + std::to_string(s) + ")");
    };
    auto check_time = [&](double t, const char* field) {
      if (!(t - t == 0) || t < 0)
        node_fail(g, n, graph_error::none,
                  std::string(field) + " must be finite and >= 0 (" + std::to_string(t) + ")");
    };
    check_time(node.forward_time, "forward_time");
    check_time(node.backward_time, "backward_time");
    check_size(node.forward_transient, "forward_transient");
    check_size(node.backward_transient, "backward_transient");
    check_size(node.saved_internal, "saved_internal");
    if (node.outputs.empty()) node_fail(g, n, graph_error::none, "makes no value");
  }

  // Node n reads only values made before it, and none overwritten in place.
  void reads(std::size_t n) const {
    for (const std::size_t v : g.nodes[n].inputs) {
      known(n, v, "reads");
      if (g.values[v].kind == value_kind::activation) {
        if (maker[v] == unmade)
          node_fail(g, n, v, "reads " + value_label(g, v) + ", which no node makes");
        if (maker[v] >= n)
          node_fail(g, n, v,
                    "reads " + value_label(g, v) + ", which " +
                        (maker[v] == n ? std::string("it makes itself")
                                       : node_label(g, maker[v]) + " makes later") +
                        " (the nodes must be in an order where makers come first; a cycle has "
                        "none)");
      }
      if (overwritten_by[v] != unmade)
        node_fail(g, n, v,
                  "reads " + value_label(g, v) + ", which " + node_label(g, overwritten_by[v]) +
                      " overwrote in place");
    }
  }

  // Node n makes activations no other node makes, each listed once.
  void makes(std::size_t n) const {
    const graph_node& node = g.nodes[n];
    for (std::size_t i = 0; i < node.outputs.size(); ++i) {
      const std::size_t v = node.outputs[i];
      known(n, v, "makes");
      if (g.values[v].kind != value_kind::activation)
        node_fail(g, n, v,
                  "makes " + value_label(g, v) + ", which is " +
                      (g.values[v].kind == value_kind::input ? "the graph's input" : "a global") +
                      " (no node makes one)");
      if (maker[v] != n)
        node_fail(
            g, n, v,
            "makes " + value_label(g, v) + ", which " + node_label(g, maker[v]) + " makes already");
      for (std::size_t j = 0; j < i; ++j)
        if (node.outputs[j] == v)
          node_fail(g, n, v, "lists output " + value_label(g, v) + " twice");
    }
  }

  // Node n saves only its inputs and outputs.
  void saves(std::size_t n) {
    const graph_node& node = g.nodes[n];
    for (const std::size_t v : node.saved) {
      known(n, v, "saves");
      if (!contains(node.inputs, v) && !contains(node.outputs, v))
        node_fail(g, n, v,
                  "saves " + value_label(g, v) + ", which is neither its input nor its output");
      saved_somewhere[v] = 1;
    }
  }

  // Node n's in-place outputs: each an output of it aliasing an activation among its inputs of
  // the same size, no output or input twice.
  void in_place(std::size_t n) const {
    const graph_node& node = g.nodes[n];
    for (std::size_t i = 0; i < node.in_place.size(); ++i) {
      const in_place_output& a = node.in_place[i];
      known(n, a.output, "aliases from");
      known(n, a.input, "aliases to");
      if (!contains(node.outputs, a.output))
        node_fail(g, n, a.output,
                  "in-place output " + value_label(g, a.output) + " is not its output");
      if (!contains(node.inputs, a.input))
        node_fail(g, n, a.input,
                  "writes in place into " + value_label(g, a.input) + ", which is not its input");
      if (g.values[a.input].kind != value_kind::activation)
        node_fail(
            g, n, a.input,
            "writes in place into " + value_label(g, a.input) + ", which is " +
                (g.values[a.input].kind == value_kind::input ? "the graph's input" : "a global"));
      if (g.values[a.input].size != g.values[a.output].size)
        node_fail(g, n, a.output,
                  "in-place output " + value_label(g, a.output) + " has size " +
                      std::to_string(g.values[a.output].size) + ", not that of " +
                      value_label(g, a.input) + " (" + std::to_string(g.values[a.input].size) +
                      ")");
      for (std::size_t j = 0; j < i; ++j) {
        if (node.in_place[j].output == a.output)
          node_fail(g, n, a.output,
                    "in-place output " + value_label(g, a.output) + " aliases twice");
        if (node.in_place[j].input == a.input)
          node_fail(g, n, a.input, "writes in place into " + value_label(g, a.input) + " twice");
      }
    }
  }

  // Node n, after the nodes before it.
  void node(std::size_t n) {
    costs(n);
    reads(n);
    makes(n);
    saves(n);
    in_place(n);
    for (const in_place_output& a : g.nodes[n].in_place) overwritten_by[a.input] = n;
  }

  // Saved values must keep their bytes until their backward: none may be overwritten in place.
  void saved_kept() const {
    for (std::size_t v = 0; v < g.values.size(); ++v)
      if (saved_somewhere[v] && overwritten_by[v] != unmade)
        node_fail(g, overwritten_by[v], v,
                  "writes in place into " + value_label(g, v) +
                      ", which a node's backward reads (saved)");
  }
};

// Every figure derived from the graph (a block's tape, peaks with gradients and transients, the
// chain's totals) is at most three times the activations' bytes (value, tape copy, gradient)
// plus the internal bytes and the largest transient: that must fit a signed 64-bit integer.
inline void validate_total_memory(const graph& g) {
  size_type total = 0, largest = g.loss_overhead;
  bool overflow = false;
  auto add = [&](size_type v) {
    if (total > std::numeric_limits<size_type>::max() - v)
      overflow = true;
    else
      total += v;
  };
  for (const graph_value& x : g.values)
    if (x.kind != value_kind::global)
      for (int i = 0; i < 3; ++i) add(x.size);
  for (const graph_node& node : g.nodes) {
    add(node.saved_internal);
    largest = std::max({largest, node.forward_transient, node.backward_transient});
  }
  add(largest);
  if (overflow)
    graph_fail(
        "graph: the graph's total memory (three times the activations' bytes, the internal bytes "
        "and the largest transient) overflows 64 bits");
}

}  // namespace detail

/// Checks `g` against docs/graphs.md; throws `graph_error` naming the first offending node or
/// value. The rules: at least one node; exactly one input value; sizes >= 0 and <= 2^62; times
/// finite and >= 0, transients and internal bytes >= 0; every value a node names exists; each
/// activation is made by exactly one node, inputs and globals by none; a node reads only values
/// made by earlier nodes (or the input and globals), so the order has no cycle; a node has at
/// least one output and lists no output twice; `saved` lies among the node's inputs and outputs;
/// an in-place output aliases an activation among the node's inputs (not the graph's input, which
/// the step keeps), of the same size, which no later node reads, no other node writes in place
/// and no node saves (its bytes change under its readers' backward); the last node has exactly
/// one output; the graph's total memory fits 64 bits.
inline void validate(const graph& g) {
  if (g.nodes.empty()) detail::graph_fail("graph: no nodes");
  detail::validate_values(g);
  detail::graph_check check(g);
  for (std::size_t n = 0; n < g.nodes.size(); ++n) check.node(n);
  check.saved_kept();
  detail::validate_total_memory(g);
  const graph_node& last = g.nodes.back();
  if (last.outputs.size() != 1)
    detail::node_fail(g, g.nodes.size() - 1, graph_error::none,
                      "the last node must make exactly one value, the one the loss reads (it "
                      "makes " +
                          std::to_string(last.outputs.size()) + ")");
}

}  // namespace remat
