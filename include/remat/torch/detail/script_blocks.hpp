// The inside of remat::torch::split_script (script.hpp), continued: which of remat's cut points
// a TorchScript forward can be cut at, and each block as a graph the interpreter runs.
#pragma once

#include <remat/linearize.hpp>
#include <remat/torch/detail/script_graph.hpp>
#include <remat/torch/stage.hpp>

#include <ATen/ATen.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/interpreter.h>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace remat::torch::detail::script {

struct dropped {
  std::string value;
  std::string reason;
};

// The cut points of a remat graph, as units.
inline std::vector<std::size_t> cut_units(const built& b) {
  return remat::linearize(b.graph).cut_nodes;
}

// A value that is no tensor, made at or before unit `c` and read after it: what makes the
// tensor-only cut point `c` no cut point of the whole graph.
inline std::string crossing(const built& b, std::size_t c) {
  const remat::graph& g = b.graph;
  for (std::size_t n = 0; n <= c; ++n)
    for (const std::size_t v : g.nodes[n].outputs)
      if (b.jit_value[v] != nullptr && !is_tensor(b.jit_value[v]))
        for (std::size_t r = c + 1; r < g.nodes.size(); ++r)
          if (remat::detail::contains(g.nodes[r].inputs, v)) return label(b.jit_value[v]);
  return "a value that is no tensor";
}

// Why the cut at `v` (a cut point after unit `c`, not the last) cannot be a stage boundary, or
// "" if it can: the next stage gets a leaf that requires grad, which no op may write into, and
// a stage must return a new tensor.
inline std::string unusable(const analysis& a, const built& b, std::size_t c, jit::Value* v,
                            jit::Value* start) {
  if (!is_tensor(v)) return "its value " + label(v) + " is no tensor";
  for (std::size_t k = b.unit_first[c + 1]; k < a.nodes.size(); ++k)
    if (a.aliases->writesToAlias(a.nodes[k], jit::ValueSet{v}))
      return std::string("a later op (") + a.nodes[k]->kind().toQualString() +
             ") writes into it, or into a view of it, in place";
  if (a.aliases->mayAlias(v, start)) return "the block would return its input or a view of it";
  return "";
}

// The cuts used (units after which a stage ends; the last unit is always one), and the cut
// points dropped, with why.
inline std::pair<std::vector<std::size_t>, std::vector<dropped>> choose_cuts(const analysis& a) {
  const built whole = build(a, true);
  const std::vector<std::size_t> cuts = cut_units(whole);
  std::vector<dropped> out;
  const built tensors = build(a, false);
  for (const std::size_t c : cut_units(tensors))
    if (!std::binary_search(cuts.begin(), cuts.end(), c))
      out.push_back({label(tensors.jit_value[tensors.graph.nodes[c].outputs[0]]),
                     "the value " + crossing(whole, c) + " crosses it"});
  std::vector<std::size_t> used;
  jit::Value* start = a.input;
  auto value_of = [&](std::size_t c) { return whole.jit_value[whole.graph.nodes[c].outputs[0]]; };
  for (const std::size_t c : cuts) {
    jit::Value* v = value_of(c);
    if (c + 1 < whole.graph.nodes.size()) {
      const std::string why = unusable(a, whole, c, v, start);
      if (why.empty()) {
        used.push_back(c);
        start = v;
      } else {
        out.push_back({label(v), why});
      }
    } else if (a.aliases->mayAlias(v, start)) {  // the last block returns a view of its input
      if (used.empty()) throw refusal("forward returns a view of its input");
      out.push_back({label(value_of(used.back())),
                     "the last block would return a view of its "
                     "input"});
      used.pop_back();
    }
  }
  used.push_back(whole.graph.nodes.size() - 1);
  return {used, out};
}

// Block graph `(self, x) -> y`: the top-level nodes [first, end) cloned, after the free values
// they read (re-emitted in the block, which is what lets a constant or an attribute cross a cut).
inline std::shared_ptr<jit::Graph> block_graph(const analysis& a, std::size_t first,
                                               std::size_t end, jit::Value* in, jit::Value* out) {
  auto g = std::make_shared<jit::Graph>();
  std::unordered_map<const jit::Value*, jit::Value*> map;
  jit::Value* self = a.graph->inputs()[0];
  map[self] = g->addInput("self")->setType(self->type());
  map[in] = g->addInput("x")->setType(in->type());
  auto lookup = [&](jit::Value* v) -> jit::Value* {
    const auto it = map.find(v);
    if (it == map.end())
      throw std::logic_error("remat::torch::split_script: " + label(v) +
                             " crosses a cut (please report)");
    return it->second;
  };
  auto clone = [&](jit::Node* n) {
    jit::Node* c = g->insertNode(g->createClone(n, lookup));
    for (std::size_t i = 0; i < n->outputs().size(); ++i) map[n->output(i)] = c->output(i);
  };
  std::function<void(jit::Value*)> emit = [&](jit::Value* v) {
    if (map.count(v) != 0 || a.free.count(v) == 0) return;
    for (jit::Value* i : v->node()->inputs()) emit(i);
    clone(v->node());
  };
  for (std::size_t k = first; k < end; ++k) {
    for (jit::Value* v : outer_inputs(a.nodes[k])) emit(v);
    clone(a.nodes[k]);
  }
  g->registerOutput(lookup(out));
  return g;
}

// Block `g` of module `m` as a stage: run by TorchScript's interpreter as it is (no graph
// executor: no fusion, no autodiff subgraphs; each op runs as in eager mode and autograd records
// it), declaring the module's buffers and parameters its attributes reach.
inline stage block_stage(const jit::Module& m, std::shared_ptr<jit::Graph> g, std::size_t k) {
  stage s;
  s.buffers.emplace();
  const auto buffers = m.buffers(/*recurse=*/true);
  const auto parameters = m.parameters(/*recurse=*/true);
  auto among = [](const auto& list, const at::Tensor& t) {
    for (const at::Tensor& u : list)
      if (u.is_same(t)) return true;
    return false;
  };
  std::unordered_map<const jit::Value*, c10::IValue> held{{g->inputs()[0], m._ivalue()}};
  each_node(g->block(), [&](jit::Node* n) {
    const auto it = held.find(n->kind() == c10::prim::GetAttr ? n->input() : nullptr);
    if (it == held.end() || !it->second.isObject()) return;
    const c10::IValue v = it->second.toObject()->getAttr(n->s(c10::attr::name));
    held.emplace(n->output(), v);
    if (v.isTensor() && among(buffers, v.toTensor())) add_unique(*s.buffers, v.toTensor());
    if (v.isTensor() && among(parameters, v.toTensor())) add_unique(s.parameters, v.toTensor());
  });
  auto code = std::make_shared<jit::Code>(g, "remat_block_" + std::to_string(k));
  s.forward = [code, self = m._ivalue()](const at::Tensor& x) {
    jit::Stack stack{c10::IValue(self), c10::IValue(x)};
    jit::InterpreterState(*code).run(stack);
    return stack.back().toTensor();
  };
  return s;
}

}  // namespace remat::torch::detail::script
