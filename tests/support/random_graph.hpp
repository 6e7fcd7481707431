// Random op graphs for property tests: mostly chain-like (a node reads recent values) with skip
// connections to older ones, nodes with several outputs, in-place ops, globals read by several
// nodes (shared parameters), nodes reading only globals, and zero sizes.
#pragma once

#include <remat/graph.hpp>

#include <algorithm>
#include <cstddef>
#include <random>
#include <string>
#include <vector>

namespace remat::testing {

struct random_graph_options {
  int min_nodes = 1;
  int max_nodes = 10;
  size_type max_size = 10;
};

inline graph random_graph(std::mt19937_64& rng, const random_graph_options& o = {}) {
  auto uniform = [&](size_type lo, size_type hi) {
    return std::uniform_int_distribution<size_type>(lo, hi)(rng);
  };
  auto chance = [&](int percent) { return uniform(0, 99) < percent; };
  auto time = [&] { return static_cast<double>(uniform(0, 8)) * 0.5; };
  graph g;
  g.input("x", uniform(0, o.max_size));
  std::vector<std::size_t> globals;
  for (size_type i = uniform(0, 3); i > 0; --i)
    globals.push_back(g.global("w" + std::to_string(globals.size()), uniform(0, o.max_size)));
  // Values a later node may read: the input and made activations not overwritten in place.
  std::vector<std::size_t> readable{0};
  std::vector<char> saved(g.values.size(), 0);  // saved by some node
  const auto n_nodes = static_cast<int>(uniform(o.min_nodes, o.max_nodes));
  for (int n = 0; n < n_nodes; ++n) {
    const bool last = n + 1 == n_nodes;
    graph_node node;
    node.name = "n" + std::to_string(n);
    node.forward_time = time();
    node.backward_time = time();
    node.forward_transient = chance(50) ? uniform(0, o.max_size) : 0;
    node.backward_transient = chance(50) ? uniform(0, o.max_size) : 0;
    node.saved_internal = chance(20) ? uniform(0, o.max_size) : 0;
    // Inputs: usually the newest value, sometimes older ones (skips), a global now and then.
    const size_type reads = chance(10) ? 0 : uniform(1, 3);
    for (size_type r = 0; r < reads && !readable.empty(); ++r) {
      const std::size_t back =
          chance(60) ? 0 : static_cast<std::size_t>(uniform(0, static_cast<size_type>(readable.size()) - 1));
      const std::size_t v = readable[readable.size() - 1 - back];
      if (!detail::contains(node.inputs, v)) node.inputs.push_back(v);
    }
    if (!globals.empty() && (node.inputs.empty() || chance(40)))
      node.inputs.push_back(globals[static_cast<std::size_t>(
          uniform(0, static_cast<size_type>(globals.size()) - 1))]);
    // In place: into an activation input nobody saved.
    std::size_t target = static_cast<std::size_t>(-1);
    if (chance(25))
      for (const std::size_t v : node.inputs)
        if (g.values[v].kind == value_kind::activation && !saved[v]) target = v;
    const size_type outputs = last ? 1 : (chance(20) ? 2 : 1);
    for (size_type i = 0; i < outputs; ++i) {
      const bool aliasing = i == 0 && target != static_cast<std::size_t>(-1);
      const size_type size = aliasing ? g.values[target].size : uniform(0, o.max_size);
      const std::size_t out = g.add_value(node.name + "." + std::to_string(i), size,
                                          value_kind::activation);
      node.outputs.push_back(out);
      if (aliasing) node.in_place.push_back({out, target});
    }
    for (const std::size_t v : node.inputs)
      if (v != target && chance(50)) node.saved.push_back(v);
    for (const std::size_t v : node.outputs)
      if (chance(40)) node.saved.push_back(v);
    saved.resize(g.values.size(), 0);
    for (const std::size_t v : node.saved) saved[v] = 1;
    if (target != static_cast<std::size_t>(-1))
      readable.erase(std::find(readable.begin(), readable.end(), target));
    for (const std::size_t v : node.outputs) readable.push_back(v);
    g.add_node(std::move(node));
  }
  g.loss_time = time();
  g.loss_overhead = uniform(0, o.max_size);
  return g;
}

}  // namespace remat::testing
