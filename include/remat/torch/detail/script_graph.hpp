// The inside of remat::torch::split_script (script.hpp): a TorchScript forward, inlined, read as
// a remat::graph of its top-level nodes, and one interpreter graph per block.
//
// What each top-level node of the inlined forward is:
//
//   free     a node any block can recompute: a constant, a module attribute (prim::GetAttr on
//            `self`: parameters, buffers, submodules, flags such as `training`), or a pure op
//            that reads only free values and gives no tensor (a list of constants). Not in
//            remat's graph; each block that reads one re-emits it.
//   a node   everything else, in order (control flow is one node, its sub-blocks inside). Its
//            values (tensors, and values that are not tensors: an int from `x.size(0)`) are
//            activations of remat's graph with unit sizes: the cut points depend only on what is
//            alive where, and the executor profiles every stage for the sizes it solves with.
#pragma once

#include <remat/graph.hpp>
#include <remat/torch/stage.hpp>

#include <ATen/ATen.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/alias_analysis.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/runtime/interpreter.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace remat::torch::detail::script {

namespace jit = ::torch::jit;
using value_set = std::unordered_set<const jit::Value*>;

inline bool is_tensor(const jit::Value* v) {
  return v->type()->kind() == c10::TypeKind::TensorType;
}

inline std::string label(const jit::Value* v) {
  return "%" + v->debugName() + " (" + v->type()->str() + ")";
}

inline model_error refusal(const std::string& what) {
  return model_error(model_error::no_stage, "split_script: " + what);
}

// Refuses a forward that does not map one tensor to one tensor, naming what it takes or gives.
inline void check_signature(const c10::FunctionSchema& schema) {
  const auto& args = schema.arguments();
  std::string taken;
  for (std::size_t i = 1; i < args.size(); ++i)
    taken += (i > 1 ? ", " : "") + args[i].name() + ": " + args[i].type()->str();
  if (args.size() != 2 || args[1].type()->kind() != c10::TypeKind::TensorType)
    throw refusal("forward takes (" + taken +
                  "); it must take one tensor (pass the stages by hand for more inputs)");
  const auto& rets = schema.returns();
  if (rets.size() != 1 || rets[0].type()->kind() != c10::TypeKind::TensorType) {
    std::string given;
    for (std::size_t i = 0; i < rets.size(); ++i) given += (i ? ", " : "") + rets[i].type()->str();
    throw refusal("forward returns " + given + ", not one tensor");
  }
}

// Every node of `b`, nested blocks included, in order.
inline void each_node(jit::Block* b, const std::function<void(jit::Node*)>& f) {
  for (jit::Node* n : b->nodes()) {
    f(n);
    for (jit::Block* sub : n->blocks()) each_node(sub, f);
  }
}

// forward's graph, copied, with every call inlined and branches on constants folded (a ReLU's
// `inplace`). Refuses a forward that assigns a module attribute: a stage can protect state it
// updates in place (a buffer), not an attribute it replaces.
inline std::shared_ptr<jit::Graph> inlined_forward(const jit::Module& m) {
  const auto method = m.find_method("forward");
  if (!method) throw refusal("the module has no forward method");
  check_signature(method->function().getSchema());
  std::shared_ptr<jit::Graph> g = method->graph()->copy();
  jit::Inline(*g);
  jit::ConstantPropagationImmutableTypes(g);
  jit::EliminateDeadCode(g);
  each_node(g->block(), [](jit::Node* n) {
    if (n->kind() == c10::prim::SetAttr)
      throw refusal("forward assigns the module attribute '" + n->s(c10::attr::name) +
                    "' (prim::SetAttr): state a stage updates must be a buffer updated in place");
  });
  return g;
}

// The values `n` reads that are made outside it (its sub-blocks' included), in order of use.
inline std::vector<jit::Value*> outer_inputs(jit::Node* n) {
  value_set inner, seen;
  std::vector<jit::Value*> out;
  auto use = [&](jit::Value* v) {
    if (inner.count(v) == 0 && seen.insert(v).second) out.push_back(v);
  };
  std::function<void(jit::Node*)> visit = [&](jit::Node* node) {
    for (jit::Value* v : node->inputs()) use(v);
    for (jit::Block* b : node->blocks()) {
      for (jit::Value* p : b->inputs()) inner.insert(p);
      for (jit::Node* k : b->nodes()) {
        visit(k);
        for (jit::Value* o : k->outputs()) inner.insert(o);
      }
      for (jit::Value* v : b->outputs()) use(v);
    }
  };
  visit(n);
  return out;
}

// Whether a top-level node can be recomputed by any block that reads it (see the top).
inline bool is_free(jit::Node* n, const value_set& free, const jit::AliasDb& aliases) {
  if (!n->blocks().empty()) return false;
  for (const jit::Value* v : n->inputs())
    if (free.count(v) == 0) return false;
  if (n->kind() == c10::prim::Constant || n->kind() == c10::prim::GetAttr) return true;
  if (n->hasSideEffects() || aliases.isMutable(n) || aliases.hasWriters(n)) return false;
  for (const jit::Value* o : n->outputs())
    if (is_tensor(o)) return false;
  return true;
}

// The inlined forward and what its nodes are.
struct analysis {
  std::shared_ptr<jit::Graph> graph;
  std::unique_ptr<jit::AliasDb> aliases;
  std::vector<jit::Node*> nodes;  // the top-level nodes that are not free, in order
  value_set free;                 // `self` and the free nodes' values
  jit::Value* input = nullptr;    // forward's tensor argument
  jit::Value* output = nullptr;   // what forward returns
  std::size_t last = 0;           // nodes[last] makes `output`; later nodes join its unit
};

inline analysis analyse(const jit::Module& m) {
  analysis a;
  a.graph = inlined_forward(m);
  a.aliases = std::make_unique<jit::AliasDb>(a.graph);
  a.input = a.graph->inputs()[1];
  a.output = a.graph->outputs()[0];
  a.free.insert(a.graph->inputs()[0]);
  for (jit::Node* n : a.graph->nodes()) {
    if (is_free(n, a.free, *a.aliases)) {
      for (const jit::Value* o : n->outputs()) a.free.insert(o);
      continue;
    }
    if (n == a.output->node()) a.last = a.nodes.size();
    a.nodes.push_back(n);
  }
  if (a.output == a.input) throw refusal("forward returns its input");
  if (a.free.count(a.output) != 0 || a.nodes.empty() || a.nodes[a.last] != a.output->node())
    throw refusal("forward returns " + label(a.output) +
                  ", which no op computes from its input (a parameter or a constant)");
  return a;
}

// remat's graph of an analysis: one node per unit of top-level nodes (each node its own unit,
// except that the node making forward's output and every node after it are one unit, so that
// the last node of the graph makes what the loss reads). With `non_tensors` false, values that
// are not tensors are left out (to find the cuts they alone prevent).
struct built {
  remat::graph graph;
  std::vector<std::size_t> unit_first;  // unit u: nodes [unit_first[u], unit_first[u + 1])
  std::vector<jit::Value*> jit_value;   // per value of `graph`: its TorchScript value (or null)
};

inline built build(const analysis& a, bool non_tensors) {
  built b;
  std::unordered_map<const jit::Value*, std::size_t> id{{a.input, b.graph.input("x", 1)}};
  b.jit_value.push_back(a.input);
  auto tracked = [&](const jit::Value* v) { return non_tensors || is_tensor(v); };
  for (std::size_t i = 0; i < a.nodes.size();) {
    const std::size_t end = i < a.last ? i + 1 : a.nodes.size();
    graph_node node;
    node.name = a.nodes[i]->kind().toQualString();
    value_set made;
    for (std::size_t k = i; k < end; ++k) {
      for (jit::Value* v : outer_inputs(a.nodes[k]))
        if (a.free.count(v) == 0 && made.count(v) == 0 && tracked(v) &&
            !remat::detail::contains(node.inputs, id.at(v)))
          node.inputs.push_back(id.at(v));
      for (jit::Value* o : a.nodes[k]->outputs()) {
        made.insert(o);
        if (tracked(o) && (end < a.nodes.size() || o == a.output)) {
          id[o] =
              b.graph.add_value("%" + o->debugName(), is_tensor(o) ? 1 : 0, value_kind::activation);
          b.jit_value.push_back(o);
          node.outputs.push_back(id[o]);
        }
      }
    }
    if (node.outputs.empty()) {  // an op for its effect only (a check, a buffer update)
      node.outputs.push_back(b.graph.add_value(node.name, 0, value_kind::activation));
      b.jit_value.push_back(nullptr);
    }
    b.unit_first.push_back(i);
    b.graph.add_node(std::move(node));
    i = end;
  }
  b.unit_first.push_back(a.nodes.size());
  return b;
}

}  // namespace remat::torch::detail::script
