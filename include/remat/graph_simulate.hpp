// Node-level schedules of a linearized graph (docs/graphs.md): any chain schedule of compute ops
// expanded into the steps of the graph's nodes, and the replay of those steps buffer by buffer
// (a `simulate` for graphs). The replay is the proof that a block's stage costs are safe: a
// schedule whose chain-level replay fits a budget must replay here within the same peak.
//
//   const remat::linearization lin = remat::linearize(g);
//   const remat::node_replay r = remat::simulate_nodes(g, lin, schedule.ops);
//   r.valid(); r.peak_memory; r.makespan;
//
// Each chain op runs its block's nodes in order (a forward) or in reverse (a backward); buffers
// are named by what they belong to: a_k, a tape t_k's parts, the working values of the op
// running, gradients. Transfer ops (offloading) have no node-level meaning here and are refused.
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/graph/block.hpp>
#include <remat/detail/graph/block_options.hpp>
#include <remat/graph.hpp>
#include <remat/linearize.hpp>
#include <remat/schedule.hpp>
#include <remat/simulate.hpp>
#include <remat/walk.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace remat {

/// A buffer of a node-level schedule. `space`: 'a' the chain's a_k (`index` k), 't' a part of
/// the tape t_k (`index` k; `item` the value whose bytes it holds, or -(n + 1) for node n's
/// internal bytes), 'w' a working value of the op running (`item` the value), 'g' the gradient
/// of value `item`.
struct node_buffer {
  char space = 'a';
  std::int32_t index = 0;
  std::int64_t item = 0;
  friend constexpr auto operator<=>(const node_buffer&, const node_buffer&) = default;
};

inline std::string to_string(const node_buffer& b) {
  switch (b.space) {
    case 'a': return "a_" + std::to_string(b.index);
    case 't':
      return b.item < 0 ? "t_" + std::to_string(b.index) + "[internal of node " +
                              std::to_string(-b.item - 1) + "]"
                        : "t_" + std::to_string(b.index) + "[value " + std::to_string(b.item) + "]";
    case 'w': return "value " + std::to_string(b.item);
    default: return "gradient of value " + std::to_string(b.item);
  }
}

/// One step of a node-level schedule: node `node`'s forward or backward, or the loss (`node`
/// is then `none`), as part of chain op `chain_op`. It needs `reads` held, makes `makes` at its
/// start (with their bytes), holds `transient` while it runs, and frees `frees` at its end.
struct node_step {
  static constexpr std::size_t none = static_cast<std::size_t>(-1);
  enum class direction : std::uint8_t { forward, backward, loss };
  direction dir = direction::forward;
  std::size_t node = none;
  std::size_t chain_op = 0;
  std::vector<node_buffer> reads;
  std::vector<std::pair<node_buffer, size_type>> makes;
  std::vector<node_buffer> frees;
  double time = 0;
  size_type transient = 0;
};

/// What replaying a node-level schedule found.
struct node_replay {
  std::string error;          ///< empty when valid; else which step and buffer
  size_type peak_memory = 0;  ///< the most held at once, the input and transients included
  double makespan = 0;        ///< the sum of the steps' times
  std::size_t steps = 0;      ///< node steps replayed
  [[nodiscard]] bool valid() const noexcept { return error.empty(); }
  [[nodiscard]] bool fits(size_type budget) const noexcept {
    return valid() && peak_memory <= budget;
  }
};

/// Replays node steps: every read must be held, every make not held, every free held; memory is
/// the sum of held buffers plus the running step's transient. Starts holding a_0 (`input_bytes`
/// bytes).
inline node_replay replay_nodes(std::span<const node_step> steps, size_type input_bytes) {
  node_replay r;
  std::map<node_buffer, size_type> held{{node_buffer{'a', 0, 0}, input_bytes}};
  size_type memory = input_bytes;
  r.peak_memory = memory;
  auto where = [&](std::size_t i) {
    const node_step& s = steps[i];
    std::string what = s.dir == node_step::direction::loss ? std::string("the loss")
                       : (s.dir == node_step::direction::forward ? "forward of node "
                                                                 : "backward of node ") +
                             std::to_string(s.node);
    return "step " + std::to_string(i) + " (" + what + ", chain op " + std::to_string(s.chain_op) +
           ")";
  };
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const node_step& s = steps[i];
    for (const node_buffer& b : s.reads)
      if (!held.contains(b)) {
        r.error = where(i) + ": reads " + to_string(b) + ", which is not held";
        return r;
      }
    for (const auto& [b, bytes] : s.makes) {
      if (!held.emplace(b, bytes).second) {
        r.error = where(i) + ": makes " + to_string(b) + ", which is already held";
        return r;
      }
      memory += bytes;
    }
    r.peak_memory = std::max(r.peak_memory, memory + s.transient);
    r.makespan += s.time;
    for (const node_buffer& b : s.frees) {
      const auto it = held.find(b);
      if (it == held.end()) {
        r.error = where(i) + ": frees " + to_string(b) + ", which is not held";
        return r;
      }
      memory -= it->second;
      held.erase(it);
    }
    ++r.steps;
  }
  return r;
}

namespace detail::graphs {

// Where an op on stage k (the loss: k = L) finds its input: a_k, or in the tape t_k the buffer
// of block k - 1's output.
inline node_buffer input_buffer(std::int32_t k, bool from_tape,
                                const std::vector<block_layout>& layouts) {
  if (!from_tape) return {'a', k, 0};
  return {'t', k, static_cast<std::int64_t>(layouts[static_cast<std::size_t>(k - 1)].output_root)};
}

// Node j's step in direction `dir` (forward or backward) for chain op `chain_op`: the node's
// time and transient that way, its buffers left to the caller.
inline node_step node_step_of(const graph_node& node, std::size_t j, node_step::direction dir,
                              std::size_t chain_op) {
  node_step s;
  s.dir = dir;
  s.node = j;
  s.chain_op = chain_op;
  const bool forward = dir == node_step::direction::forward;
  s.time = forward ? node.forward_time : node.backward_time;
  s.transient = forward ? node.forward_transient : node.backward_transient;
  return s;
}

// The node steps of one forward of block k (recording or not), reading its input from `in`.
inline void expand_forward(const graph& g, const block_layout& b, std::int32_t k, bool recording,
                           node_buffer in, std::size_t chain_op, std::vector<node_step>& out) {
  auto buffer = [&](std::size_t r) -> node_buffer {
    if (recording && b.taped[r]) return {'t', k + 1, static_cast<std::int64_t>(r)};
    if (r == b.output_root) return {'a', k + 1, 0};
    return {'w', 0, static_cast<std::int64_t>(r)};
  };
  for (std::size_t j = b.first; j < b.end; ++j) {
    const graph_node& node = g.nodes[j];
    node_step s = node_step_of(node, j, node_step::direction::forward, chain_op);
    std::vector<std::size_t> roots;
    for (const std::size_t v : node.inputs) {
      if (!is_activation(g, v)) continue;
      if (v == b.input) {
        s.reads.push_back(in);
      } else {
        s.reads.push_back(buffer(b.root[v]));
        roots.push_back(b.root[v]);
      }
    }
    for (const std::size_t o : node.outputs) {
      if (b.root[o] == o) s.makes.emplace_back(buffer(o), g.values[o].size);
      roots.push_back(b.root[o]);
    }
    if (recording && node.saved_internal > 0)
      s.makes.emplace_back(node_buffer{'t', k + 1, -static_cast<std::int64_t>(j) - 1},
                           node.saved_internal);
    std::sort(roots.begin(), roots.end());
    roots.erase(std::unique(roots.begin(), roots.end()), roots.end());
    for (const std::size_t r : roots)
      if (b.last_reader[r] == j && r != b.output_root && !(recording && b.taped[r]))
        s.frees.push_back(buffer(r));
    out.push_back(std::move(s));
  }
}

// `b` as option `plan` records it: the dropped roots are working values of the recording forward
// (freed after their last reader), not parts of the tape.
inline block_layout recorded_layout(const graph& g, block_layout b, const block_recompute& plan) {
  for (const std::size_t v : plan.dropped) {
    b.taped[v] = 0;
    b.tape -= g.values[v].size;
  }
  return b;
}

// The node steps of block k's backward, its input read from `in`; `drop_input`: the chain op
// frees a_k at its end. `plan`: the option of the tape it consumes; its re-run nodes are forward
// steps, each just before the first backward node that needs what it makes (backward_order): it
// reads the block's input, kept parts of the tape or values re-run before it, and makes its output
// back into the tape (a dropped value) or as a working value; every buffer is freed after its last
// reader.
inline void expand_backward(const graph& g, const block_layout& b, std::int32_t k, node_buffer in,
                            bool drop_input, const block_recompute& plan, std::size_t chain_op,
                            std::vector<node_step>& out) {
  auto grad = [](std::size_t v) { return node_buffer{'g', 0, static_cast<std::int64_t>(v)}; };
  auto held = [&](std::size_t v) {
    return node_buffer{b.taped[v] ? 't' : 'w', b.taped[v] ? k + 1 : 0,
                       static_cast<std::int64_t>(v)};
  };
  for (const backward_step& step : backward_order(g, b, plan.dropped, plan.recompute)) {
    const std::size_t j = step.node;
    const graph_node& node = g.nodes[j];
    const auto dir = step.rerun ? node_step::direction::forward : node_step::direction::backward;
    node_step s = node_step_of(node, j, dir, chain_op);
    const node_buffer own_internal{'t', k + 1, -static_cast<std::int64_t>(j) - 1};
    if (step.rerun) {
      for (const std::size_t v : node.inputs)
        if (is_activation(g, v)) s.reads.push_back(v == b.input ? in : held(v));
      for (const std::size_t o : node.outputs) s.makes.emplace_back(held(o), g.values[o].size);
    } else {
      if (j + 1 == b.end) s.makes.emplace_back(grad(b.input), g.values[b.input].size);
      for (const std::size_t o : node.outputs)
        if (b.has_grad[o]) s.reads.push_back(grad(o));
      for (const std::size_t v : node.saved)
        if (is_activation(g, v)) s.reads.push_back(v == b.input ? in : held(b.root[v]));
      if (node.saved_internal > 0) s.reads.push_back(own_internal);
      std::vector<std::size_t> ins;
      for (const std::size_t v : node.inputs)
        if (is_activation(g, v) && v != b.input && b.grad_maker[v] == j) ins.push_back(v);
      std::sort(ins.begin(), ins.end());
      ins.erase(std::unique(ins.begin(), ins.end()), ins.end());
      for (const std::size_t v : ins) s.makes.emplace_back(grad(v), g.values[v].size);
      for (const std::size_t o : node.outputs)
        if (b.has_grad[o]) s.frees.push_back(grad(o));
      if (node.saved_internal > 0) s.frees.push_back(own_internal);
      if (j == b.first && drop_input) s.frees.push_back(in);
    }
    for (const std::size_t v : step.frees) s.frees.push_back(held(v));
    out.push_back(std::move(s));
  }
}

}  // namespace detail::graphs

/// Expands a chain schedule on `lin.chain` (compute ops only) into node steps on `g`, the graph
/// `lin` was made from. Throws `std::invalid_argument` for a transfer op or an op the chain's
/// replay finds invalid (naming it).
inline std::vector<node_step> expand_to_nodes(const graph& g, const linearization& lin,
                                              std::span<const op> ops) {
  std::vector<detail::graphs::block_layout> layouts;
  layouts.reserve(lin.blocks.size());
  for (const graph_block& b : lin.blocks)
    layouts.push_back(detail::graphs::layout_block(g, b.first, b.end, b.input));
  for (std::size_t i = 0; i < ops.size(); ++i)
    if (is_transfer(ops[i].kind))
      throw std::invalid_argument("op " + std::to_string(i) + " (" + to_string(ops[i]) +
                                  "): transfer ops have no node-level expansion (graphs are "
                                  "solved without offloading)");
  std::vector<node_step> steps;
  const walk_failure f =
      walk(lin.chain, ops, [&](const walked_op& w, const std::vector<walked_value>& values) {
        const std::int32_t k = w.o.stage;
        const bool from_tape = values[w.read(operand::input)].kind == 't';
        bool drops_input = false;
        for (const value_id v : w.frees)
          if (v != no_value && values[v].kind == 'a' && values[v].index == k) drops_input = true;
        if (w.o.kind == op_kind::loss) {
          const detail::graphs::block_layout& last = layouts.back();
          const node_buffer in = detail::graphs::input_buffer(k, from_tape, layouts);
          node_step s;
          s.dir = node_step::direction::loss;
          s.chain_op = w.index;
          s.time = lin.chain.loss_time;
          s.transient = lin.chain.loss_overhead;
          s.reads.push_back(in);
          s.makes.emplace_back(node_buffer{'g', 0, static_cast<std::int64_t>(last.output)},
                               g.values[last.output].size);
          if (drops_input) s.frees.push_back(in);
          steps.push_back(std::move(s));
          return;
        }
        const detail::graphs::block_layout& b = layouts[static_cast<std::size_t>(k)];
        const node_buffer in = detail::graphs::input_buffer(k, from_tape, layouts);
        const graph_block& block = lin.blocks[static_cast<std::size_t>(k)];
        const block_recompute none_dropped;
        const block_recompute& plan =
            w.option < block.options.size() ? block.options[w.option] : none_dropped;
        if (w.option != 0 && w.option >= block.options.size())
          throw std::invalid_argument(
              "op " + std::to_string(w.index) + " (" + to_string(w.o) + "): block " +
              std::to_string(k) + " has no plan for option " + std::to_string(w.option) +
              " (a linearization's stage options come with its blocks' plans)");
        if (w.o.kind == op_kind::backward) {
          detail::graphs::expand_backward(g, b, k, in, drops_input, plan, w.index, steps);
          return;
        }
        if (w.o.kind == op_kind::forward_all && !plan.dropped.empty())
          detail::graphs::expand_forward(g, detail::graphs::recorded_layout(g, b, plan), k, true,
                                         in, w.index, steps);
        else
          detail::graphs::expand_forward(g, b, k, w.o.kind == op_kind::forward_all, in, w.index,
                                         steps);
        if (drops_input) steps.back().frees.push_back(in);
      });
  if (f.error != replay_error::none) {
    replay_result r;
    r.error = f.error;
    r.first_invalid = f.at;
    r.tensor = f.tensor;
    throw std::invalid_argument("the chain schedule is invalid: " + describe(r, ops));
  }
  return steps;
}

/// Expands `ops` (a chain schedule on `lin.chain`) and replays it node by node.
inline node_replay simulate_nodes(const graph& g, const linearization& lin,
                                  std::span<const op> ops) {
  const std::vector<node_step> steps = expand_to_nodes(g, lin, ops);
  return replay_nodes(steps, lin.chain.input_size);
}

}  // namespace remat
