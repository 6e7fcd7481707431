// Cuts a graph into a chain of blocks (docs/graphs.md): the cut points, one stage per block with
// its costs from a liveness sweep over the block's nodes (plain autograd: every saved value
// kept), and the map from nodes to blocks. Identical blocks are costed once.
//
//   remat::linearization lin = remat::linearize(g);
//   remat::solve(lin.chain, budget);   // or remat::solve_graph(g, budget), which also replays
//                                      // the schedule node by node (graph_simulate.hpp)
//
// The chain's input is the graph's input; its stage k is block k, whose output is the k-th cut
// value; the loss reads the last node's single output (the last cut value), with the graph's
// `loss_time` and `loss_overhead`. Globals are outside the budget: no figure of the chain counts
// them, and parameter gradients are not counted either (like the weights, they are the
// optimizer's memory, not the schedule's).
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/graph/block.hpp>
#include <remat/detail/graph/block_options.hpp>
#include <remat/graph.hpp>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace remat {

/// A block of a linearized graph: nodes `first .. end - 1`, reading the cut value `input` and
/// making the cut value `output`.
struct graph_block {
  std::size_t first = 0;
  std::size_t end = 0;
  std::size_t input = 0;
  std::size_t output = 0;
  /// Blocks with equal `kind` have the same structure and costs (costed once).
  std::size_t kind = 0;
  /// With block options (`linearize_options::block_options`): what each option of the stage
  /// leaves out of its tape and re-runs in its backward, `options[o]` for the stage's option o
  /// (option 0 is plain autograd and drops nothing); empty when the stage lists no options.
  std::vector<block_recompute> options{};
  friend bool operator==(const graph_block&, const graph_block&) = default;
};

/// How `linearize` costs blocks. By default each block is one stage of one option, plain
/// autograd (every saved value kept). With `block_options`, each block whose insides allow it
/// also gets options that keep fewer of its saved values and recompute the others in its
/// backward (docs/graphs.md, "Options from a block's insides"): the non-dominated ones, plain
/// autograd staying option 0, found exactly (every subset) for blocks with at most
/// `exact_limit` droppable values and by a greedy order beyond, at most `max_options` kept.
struct linearize_options {
  bool block_options = false;
  std::size_t exact_limit = 16;  ///< at most 30: 2^exact_limit subsets are costed
  std::size_t max_options = 8;   ///< at least 1
};

/// What `linearize` finds.
struct linearization {
  /// One stage per block; `chain.input_size` is the graph input's size.
  remat::chain chain;
  /// The cut points: the nodes after which only their output is alive, in order (the last node
  /// is always one). The graph's input is the cut point before the first node, not listed.
  std::vector<std::size_t> cut_nodes;
  /// The blocks, one per stage.
  std::vector<graph_block> blocks;
  /// `block_of[n]`: the block (stage) node `n` belongs to.
  std::vector<std::size_t> block_of;
  /// How many blocks have distinct structures (the number of liveness sweeps run).
  std::size_t distinct_blocks = 0;
  /// The globals' bytes: held for the whole step, outside the budget.
  size_type global_bytes = 0;
};

namespace detail::graphs {

// The cut points of a valid graph, by docs/graphs.md's definition: node v is one when, right
// after v in a plain forward, the only activation held and still read later (or the graph's
// output) is v's single output, and no later node writes in place into a value made before v.
// The graph's input counts as an activation. The second clause follows from the first (a node
// writing in place reads the value it overwrites, so that value is alive across v), so one
// count of the values alive suffices.
inline std::vector<std::size_t> cut_points(const graph& g) {
  const std::size_t n_nodes = g.nodes.size();
  std::vector<std::size_t> last_read(g.values.size(), none);
  for (std::size_t n = 0; n < n_nodes; ++n)
    for (const std::size_t v : g.nodes[n].inputs) last_read[v] = n;
  const std::size_t graph_output = g.nodes.back().outputs.front();
  last_read[graph_output] = n_nodes;  // the loss reads it
  // Alive after node n: made at or before n (the input: before all), read after n.
  std::vector<std::size_t> dying_at(n_nodes, 0);
  std::size_t alive = 0;
  for (std::size_t v = 0; v < g.values.size(); ++v) {
    if (g.values[v].kind == value_kind::input && last_read[v] != none) {
      ++alive;
      dying_at[last_read[v]] += 1;
    }
  }
  std::vector<std::size_t> cuts;
  for (std::size_t n = 0; n < n_nodes; ++n) {
    const graph_node& node = g.nodes[n];
    for (const std::size_t o : node.outputs)
      if (last_read[o] != none && last_read[o] > n) {
        ++alive;
        if (last_read[o] < n_nodes) dying_at[last_read[o]] += 1;
      }
    alive -= dying_at[n];
    if (node.outputs.size() == 1 && alive == 1 && last_read[node.outputs.front()] != none &&
        last_read[node.outputs.front()] > n)
      cuts.push_back(n);
  }
  return cuts;
}

// A block's structure and costs as a key: values numbered within the block (input 0, the values
// its nodes make 1, 2, ... in order, every global -1), sizes, times, transients, saves and
// aliases. Blocks with equal keys have equal layouts up to renaming, hence equal stages.
inline std::vector<std::int64_t> signature(const graph& g, std::size_t first, std::size_t end,
                                           std::size_t input) {
  std::map<std::size_t, std::int64_t> local{{input, 0}};
  auto id = [&](std::size_t v) -> std::int64_t {
    if (g.values[v].kind == value_kind::global) return -1;
    const auto it = local.find(v);
    return it == local.end() ? -2 : it->second;
  };
  std::vector<std::int64_t> key{g.values[input].size};
  for (std::size_t j = first; j < end; ++j) {
    const graph_node& node = g.nodes[j];
    for (const std::size_t o : node.outputs)
      local.emplace(o, static_cast<std::int64_t>(local.size()));
    key.push_back(std::bit_cast<std::int64_t>(node.forward_time));
    key.push_back(std::bit_cast<std::int64_t>(node.backward_time));
    key.insert(key.end(), {node.forward_transient, node.backward_transient, node.saved_internal,
                           static_cast<std::int64_t>(node.inputs.size())});
    for (const std::size_t v : node.inputs) key.push_back(id(v));
    key.push_back(static_cast<std::int64_t>(node.outputs.size()));
    for (const std::size_t o : node.outputs) {
      const std::size_t a = aliased_input(node, o);
      key.insert(key.end(), {id(o), g.values[o].size, a == none ? -3 : id(a)});
    }
    key.push_back(static_cast<std::int64_t>(node.saved.size()));
    for (const std::size_t s : node.saved) key.push_back(id(s));
  }
  return key;
}

}  // namespace detail::graphs

namespace detail::graphs {

// The values nodes [first, end) make, in order: the block-local numbering of signature().
inline std::vector<std::size_t> made_values(const graph& g, std::size_t first, std::size_t end) {
  std::vector<std::size_t> out;
  for (std::size_t j = first; j < end; ++j)
    for (const std::size_t o : g.nodes[j].outputs) out.push_back(o);
  return out;
}

}  // namespace detail::graphs

/// Validates `g` (throws `graph_error`), finds its cut points and returns the chain of its
/// blocks, costed as `options` says. A chain the blocks' costs make invalid (its total memory
/// overflowing 64 bits, say) is a `graph_error` naming the block's nodes; bad `options` are a
/// `std::invalid_argument` naming the field.
inline linearization linearize(const graph& g, const linearize_options& options = {}) {
  if (options.exact_limit > 30)
    throw std::invalid_argument("linearize_options::exact_limit must be at most 30 (" +
                                std::to_string(options.exact_limit) + ")");
  if (options.max_options < 1 || options.max_options > max_options)
    throw std::invalid_argument("linearize_options::max_options must be in 1..65536 (" +
                                std::to_string(options.max_options) + ")");
  validate(g);
  linearization lin;
  lin.cut_nodes = detail::graphs::cut_points(g);
  lin.block_of.assign(g.nodes.size(), 0);
  std::size_t input = 0;
  for (std::size_t v = 0; v < g.values.size(); ++v) {
    if (g.values[v].kind == value_kind::input) input = v;
    if (g.values[v].kind == value_kind::global) lin.global_bytes += g.values[v].size;
  }
  lin.chain.input_size = g.values[input].size;
  lin.chain.loss_time = g.loss_time;
  lin.chain.loss_overhead = g.loss_overhead;
  // Per distinct block: its kind, its stage and its options' plans in block-local numbers
  // (values by made_values' positions, nodes by their offset from the block's first).
  struct costed {
    std::size_t kind = 0;
    stage costs;
    std::vector<block_recompute> local;
  };
  std::map<std::vector<std::int64_t>, costed> kinds;
  std::size_t first = 0;
  for (const std::size_t cut : lin.cut_nodes) {
    const std::size_t end = cut + 1;
    graph_block b{first, end, input, g.nodes[cut].outputs.front(), 0, {}};
    auto key = detail::graphs::signature(g, first, end, input);
    auto it = kinds.find(key);
    const std::vector<std::size_t> made = detail::graphs::made_values(g, first, end);
    if (it == kinds.end()) {
      const detail::graphs::block_layout layout =
          detail::graphs::layout_block(g, first, end, input);
      costed c{kinds.size(), detail::graphs::block_stage(g, layout), {}};
      if (options.block_options) {
        auto found = detail::graphs::block_options(
            g, layout, {options.exact_limit, options.max_options});
        if (found.size() > 1) {
          for (auto& [o, plan] : found) {
            c.costs.options.push_back(o);
            for (std::size_t& v : plan.dropped)
              v = static_cast<std::size_t>(std::find(made.begin(), made.end(), v) - made.begin());
            for (std::size_t& n : plan.recompute) n -= first;
            c.local.push_back(std::move(plan));
          }
        }
      }
      it = kinds.emplace(std::move(key), std::move(c)).first;
    }
    b.kind = it->second.kind;
    lin.chain.stages.push_back(it->second.costs);
    for (block_recompute plan : it->second.local) {
      for (std::size_t& v : plan.dropped) v = made[v];
      for (std::size_t& n : plan.recompute) n += first;
      std::sort(plan.dropped.begin(), plan.dropped.end());
      b.options.push_back(std::move(plan));
    }
    for (std::size_t n = first; n < end; ++n) lin.block_of[n] = lin.blocks.size();
    lin.blocks.push_back(b);
    first = end;
    input = b.output;
  }
  lin.distinct_blocks = kinds.size();
  try {
    validate(lin.chain);
  } catch (const chain_error& e) {
    std::string where = "graph";
    if (e.stage_index() != chain_error::no_stage) {
      const graph_block& b = lin.blocks[e.stage_index()];
      where = "block " + std::to_string(e.stage_index()) + " (nodes " + std::to_string(b.first) +
              ".." + std::to_string(b.end - 1) + ")";
    }
    throw graph_error(graph_error::none, graph_error::none, where + ": " + e.what());
  }
  return lin;
}

/// The share of the activation bytes (the values of kind input and activation) that the values
/// made in `block` take: how much of the network one block holds.
inline double activation_share(const graph& g, const graph_block& block) {
  size_type all = 0, in_block = 0;
  for (const graph_value& v : g.values)
    if (v.kind != value_kind::global) all += v.size;
  for (std::size_t n = block.first; n < block.end; ++n)
    for (const std::size_t o : g.nodes[n].outputs)
      if (detail::graphs::aliased_input(g.nodes[n], o) == detail::graphs::none)
        in_block += g.values[o].size;
  return all == 0 ? 0 : static_cast<double>(in_block) / static_cast<double>(all);
}

}  // namespace remat
