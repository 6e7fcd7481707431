// One block of a linearized graph at node level (docs/graphs.md, "Blocks as stages"): which
// buffer each of its values lives in, what each node reads, makes and frees in a plain forward,
// a recording forward and a backward, and the stage costs that follow from a liveness sweep over
// those steps. The expansion of chain schedules (graph_simulate.hpp) builds its node steps from
// the same layout; its replay is what checks that the costs below are safe.
#pragma once

#include <remat/graph.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace remat::detail::graphs {

inline constexpr std::size_t none = static_cast<std::size_t>(-1);

// A block: nodes [first, end), reading `input` (the cut value before it) and making `output`.
struct block_layout {
  std::size_t first = 0, end = 0;
  std::size_t input = 0, output = 0;
  // Per value of the graph, meaningful for the values the block makes:
  //   root[v]: the value whose bytes v lives in (v itself, or for an in-place output the root of
  //            the input it overwrote; an in-place write into the block's input copies instead,
  //            since the chain keeps that input: F_ck, F_all and tapes hold it);
  //   last_reader[v] (roots): the last node of the block that makes or reads a value living in v;
  //   taped[v] (roots): a recording forward keeps it (a block node saves a value living in it,
  //            or it holds the block's output);
  //   tape_free[v] (roots, taped): the node whose backward frees it (the first node saving it; the
  //            output's root, when no node saves it: the block's first node, the end of B);
  //   has_grad[v]: a gradient reaches v in the backward (it is the output, or a block node reads
  //            it);
  //   grad_maker[v]: for v read in the block (the input aside), the last reader: its backward is
  //            the first to produce v's gradient.
  std::vector<std::size_t> root, last_reader, grad_maker;
  std::vector<char> taped, has_grad;
  std::size_t output_root = 0;
  size_type tape = 0;  // xb: the taped roots and every node's internal bytes
};

// A value the block makes or reads as an activation (not a global).
inline bool is_activation(const graph& g, std::size_t v) {
  return g.values[v].kind != value_kind::global;
}

// The value `node` writes into in place for output `o`, or `none`.
inline std::size_t aliased_input(const graph_node& node, std::size_t o) {
  for (const in_place_output& a : node.in_place)
    if (a.output == o) return a.input;
  return none;
}

// The layout of nodes [first, end) of a valid graph, its input the cut value `input`.
inline block_layout layout_block(const graph& g, std::size_t first, std::size_t end,
                                 std::size_t input) {
  const std::size_t nv = g.values.size();
  block_layout b;
  b.first = first;
  b.end = end;
  b.input = input;
  b.output = g.nodes[end - 1].outputs.front();
  b.root.assign(nv, none);
  b.last_reader.assign(nv, none);
  b.grad_maker.assign(nv, none);
  b.taped.assign(nv, 0);
  b.has_grad.assign(nv, 0);
  for (std::size_t j = first; j < end; ++j) {
    const graph_node& node = g.nodes[j];
    for (const std::size_t v : node.inputs) {
      if (!is_activation(g, v)) continue;
      if (v != input) {
        b.last_reader[b.root[v]] = j;
        b.has_grad[v] = 1;
      }
      b.grad_maker[v] = j;
    }
    for (const std::size_t o : node.outputs) {
      const std::size_t a = aliased_input(node, o);
      b.root[o] = (a == none || a == input) ? o : b.root[a];
      b.last_reader[b.root[o]] = j;
    }
  }
  b.output_root = b.root[b.output];
  b.has_grad[b.output] = 1;
  b.taped[b.output_root] = 1;
  for (std::size_t j = first; j < end; ++j)
    for (const std::size_t s : g.nodes[j].saved)
      if (is_activation(g, s) && s != input) b.taped[b.root[s]] = 1;
  for (std::size_t j = first; j < end; ++j) {
    for (const std::size_t o : g.nodes[j].outputs)
      if (b.root[o] == o && b.taped[o]) b.tape += g.values[o].size;
    b.tape += g.nodes[j].saved_internal;
  }
  return b;
}

// What a step of the block's expansion does, in bytes only: what it makes at its start, its
// transient, what it frees at its end.
struct step_bytes {
  size_type makes = 0, transient = 0, frees = 0;
};

// The liveness sweep of one forward over the block (the input excluded: it is held throughout,
// by the chain's rules and at node level alike).
inline std::vector<step_bytes> forward_bytes(const graph& g, const block_layout& b,
                                             bool recording) {
  std::vector<step_bytes> out;
  for (std::size_t j = b.first; j < b.end; ++j) {
    const graph_node& node = g.nodes[j];
    step_bytes s;
    s.transient = node.forward_transient;
    for (const std::size_t o : node.outputs)
      if (b.root[o] == o) s.makes += g.values[o].size;
    if (recording) s.makes += node.saved_internal;
    // Buffers whose last use is this node: made or read here, and no later reader.
    auto dies = [&](std::size_t r) {
      return b.last_reader[r] == j && r != b.output_root && !(recording && b.taped[r]);
    };
    std::vector<std::size_t> seen;
    for (const std::size_t v : node.inputs)
      if (is_activation(g, v) && v != b.input) seen.push_back(b.root[v]);
    for (const std::size_t o : node.outputs) seen.push_back(b.root[o]);
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (const std::size_t r : seen)
      if (dies(r)) s.frees += g.values[r].size;
    out.push_back(s);
  }
  return out;
}

// One step of a block's backward: node `node`'s backward, or (`rerun`) a re-run of its forward
// that rebuilds what an option's tape left out (block_options.hpp); `frees`: the buffers whose
// last reader it is, freed at its end (taped roots, and values re-made by re-runs that no tape
// holds).
struct backward_step {
  std::size_t node = none;
  bool rerun = false;
  std::vector<std::size_t> frees{};
};

// The re-runs (of `remaker`'s nodes, not yet `ran`) that make the values `wanted` the backward
// does not hold, and recursively what those read, appended to `steps` in graph order.
inline void append_reruns(const graph& g, const block_layout& b, const std::vector<char>& gone,
                          const std::vector<std::size_t>& remaker, std::vector<char>& ran,
                          const std::vector<std::size_t>& wanted,
                          std::vector<backward_step>& steps) {
  std::vector<std::size_t> stack(wanted.begin(), wanted.end()), pending;
  while (!stack.empty()) {
    const std::size_t v = stack.back();
    stack.pop_back();
    if (!is_activation(g, v) || v == b.input || (b.taped[b.root[v]] && !gone[b.root[v]])) continue;
    const std::size_t j = remaker[v];
    if (j == none)
      throw std::logic_error("remat internal error: a block's backward reads value " +
                             std::to_string(v) + ", which neither its tape nor its re-runs hold");
    if (ran[j - b.first]) continue;
    ran[j - b.first] = 1;
    pending.push_back(j);
    stack.insert(stack.end(), g.nodes[j].inputs.begin(), g.nodes[j].inputs.end());
  }
  std::sort(pending.begin(), pending.end());
  for (const std::size_t j : pending) steps.push_back({j, true, {}});
}

// The steps of the block's backward when its recording forward left out the taped roots
// `dropped` and the nodes `rerun` (one plain output each) may rebuild them: the nodes' backwards
// in reverse, each preceded by the re-runs, in graph order, that make what it saves and the tape
// lacks (and, recursively, what those read and nothing holds), so that each dropped value comes
// back just before the first backward node that reads it. Every buffer is freed after its last
// reader in that sequence (a backward node that saves it, a re-run that reads it), as autograd
// frees; the output's root, when nothing reads it, at the end. With nothing dropped this is the
// plain backward: each taped root freed by the backward of the first node that saves it.
inline std::vector<backward_step> backward_order(const graph& g, const block_layout& b,
                                                 const std::vector<std::size_t>& dropped,
                                                 const std::vector<std::size_t>& rerun) {
  const std::size_t nv = g.values.size();
  std::vector<char> gone(nv, 0);
  for (const std::size_t v : dropped) gone[v] = 1;
  std::vector<std::size_t> remaker(nv, none);
  for (const std::size_t j : rerun) remaker[g.nodes[j].outputs.front()] = j;
  std::vector<char> ran(b.end - b.first, 0);
  std::vector<backward_step> steps;
  for (std::size_t j = b.end; j-- > b.first;) {
    append_reruns(g, b, gone, remaker, ran, g.nodes[j].saved, steps);
    steps.push_back({j, false, {}});
  }
  std::vector<std::size_t> last(nv, none);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const graph_node& node = g.nodes[steps[i].node];
    if (steps[i].rerun && last[node.outputs.front()] == none) last[node.outputs.front()] = i;
    for (const std::size_t v : steps[i].rerun ? node.inputs : node.saved)
      if (is_activation(g, v) && v != b.input) last[b.root[v]] = i;
  }
  for (std::size_t j = b.first; j < b.end; ++j)
    for (const std::size_t o : g.nodes[j].outputs) {
      if (b.root[o] != o || (!b.taped[o] && last[o] == none)) continue;
      steps[last[o] == none ? steps.size() - 1 : last[o]].frees.push_back(o);
    }
  return steps;
}

// The liveness sweep of a backward's steps (the input's gradient g_k aside: made at the
// backward's start, as the chain's B(k) makes it). A re-run makes its output and holds its
// forward transient; a node's backward makes the gradients of the activations it is the last
// reader of and frees its outputs' gradients and its internal bytes.
inline std::vector<step_bytes> backward_bytes(const graph& g, const block_layout& b,
                                              const std::vector<backward_step>& order) {
  std::vector<step_bytes> out;
  for (const backward_step& step : order) {
    const std::size_t j = step.node;
    const graph_node& node = g.nodes[j];
    step_bytes s;
    for (const std::size_t v : step.frees) s.frees += g.values[v].size;
    if (step.rerun) {
      s.makes = g.values[node.outputs.front()].size;
      s.transient = node.forward_transient;
      out.push_back(s);
      continue;
    }
    s.transient = node.backward_transient;
    std::vector<std::size_t> ins;
    for (const std::size_t v : node.inputs)
      if (is_activation(g, v) && v != b.input && b.grad_maker[v] == j) ins.push_back(v);
    std::sort(ins.begin(), ins.end());
    ins.erase(std::unique(ins.begin(), ins.end()), ins.end());
    for (const std::size_t v : ins) s.makes += g.values[v].size;
    for (const std::size_t o : node.outputs)
      if (b.has_grad[o]) s.frees += g.values[o].size;
    s.frees += node.saved_internal;
    out.push_back(s);
  }
  return out;
}

// The most a sequence of steps holds at once above what it starts with (`start`).
inline size_type sweep_peak(const std::vector<step_bytes>& steps, size_type start) {
  size_type held = start, peak = start;
  for (const step_bytes& s : steps) {
    held += s.makes;
    peak = std::max(peak, held + s.transient);
    held -= s.frees;
  }
  return peak;
}

// The block's stage: fw/bw the sums of its nodes' times; xb its tape; ft, fa, bt the excess of
// the node-level peak of F_ck, F_all and B over what the chain model counts for the op (its
// output, resp. its tape, resp. g_{k+1}, t_{k+1} and g_k; the input is counted by both).
inline stage block_stage(const graph& g, const block_layout& b) {
  stage s;
  for (std::size_t j = b.first; j < b.end; ++j) {
    s.forward_time += g.nodes[j].forward_time;
    s.backward_time += g.nodes[j].backward_time;
  }
  const size_type x_out = g.values[b.output].size;
  s.output_size = x_out;
  s.tape_size = b.tape;
  const size_type plain = sweep_peak(forward_bytes(g, b, false), 0);
  const size_type recording = sweep_peak(forward_bytes(g, b, true), 0);
  const size_type backward =
      sweep_peak(backward_bytes(g, b, backward_order(g, b, {}, {})), x_out + b.tape);
  s.forward_overhead = std::max<size_type>(0, plain - x_out);
  const size_type fa = std::max<size_type>(0, recording - b.tape);
  if (fa != s.forward_overhead) s.recording_overhead = fa;
  s.backward_overhead = std::max<size_type>(0, backward - x_out - b.tape);
  return s;
}

}  // namespace remat::detail::graphs
