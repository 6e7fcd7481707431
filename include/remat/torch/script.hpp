// A whole TorchScript module as a chain of stages, cut at its graph's cut points
// (docs/libtorch.md, "A whole TorchScript module").
//
//   torch::jit::Module m = torch::jit::load("resnet18.pt");   // torch.jit.script(model).save
//   remat::torch::script_split s = remat::torch::split_script(m);
//   remat::torch::executor ex(s.stages);                     // s.cuts, s.dropped, s.block_nodes
//
// forward's graph is inlined and read as a remat::graph of its top-level nodes (see
// detail/script_graph.hpp for what each node is); remat::linearize finds the cut points; the cuts
// a stage boundary cannot be (a value the next stage would write into in place, a block that
// would return a view of its input) are dropped and said why; each block becomes a graph of its
// own, run by TorchScript's interpreter. Sizes in that graph are units: the cut points depend
// only on what is alive where, and the executor profiles every stage for the bytes it solves with.
#pragma once

#include <remat/torch/detail/script_blocks.hpp>
#include <remat/torch/detail/script_graph.hpp>
#include <remat/torch/stage.hpp>

#include <torch/csrc/jit/api/module.h>

#include <cstddef>
#include <string>
#include <vector>

namespace remat::torch {

/// A cut point of the module's graph that is no stage boundary, and why.
struct dropped_cut {
  std::string value;   ///< the value the cut would pass: `%x.5 (Tensor)`
  std::string reason;  ///< "a later op (aten::relu_) writes into it, or into a view of it, ..."
};

/// What `split_script` makes of a module: the stages, and what it found.
struct script_split {
  std::vector<stage> stages;
  /// The values the stages pass on, in order (`%name (Tensor)`); the last is forward's output.
  std::vector<std::string> cuts;
  /// The cut points not used: a value that is no tensor crossing it (an int from `x.size(0)`
  /// read further on), a later op writing into its value in place, a block that would return a
  /// view of its input.
  std::vector<dropped_cut> dropped;
  /// Per stage, how many top-level nodes of the inlined forward it runs (control flow counts as
  /// one; constants and attribute reads, re-emitted where read, are not counted).
  std::vector<std::size_t> block_nodes;
};

/// `m`'s forward, one tensor to one tensor, cut into stages at its graph's cut points. Each
/// stage runs its block in TorchScript's interpreter, in whatever mode (`train()`, `eval()`) the
/// module is in, and declares the buffers and parameters its block reads. Refuses, with a
/// `model_error` that says what it found: a module without forward, a forward that takes other
/// than one tensor or returns other than one tensor, one that assigns a module attribute, or
/// returns its input, a view of it, or a tensor no op computes from it.
inline script_split split_script(const ::torch::jit::Module& m) {
  namespace ds = detail::script;
  const ds::analysis a = ds::analyse(m);
  auto [units, dropped] = ds::choose_cuts(a);
  const ds::built b = ds::build(a, true);
  script_split out;
  for (ds::dropped& d : dropped) out.dropped.push_back({std::move(d.value), std::move(d.reason)});
  std::size_t first = 0;
  ::torch::jit::Value* in = a.input;
  for (const std::size_t u : units) {
    const std::size_t end = b.unit_first[u + 1];
    ::torch::jit::Value* v = b.jit_value[b.graph.nodes[u].outputs[0]];
    out.stages.push_back(
        ds::block_stage(m, ds::block_graph(a, first, end, in, v), out.stages.size()));
    out.cuts.push_back(ds::label(v));
    out.block_nodes.push_back(end - first);
    first = end;
    in = v;
  }
  return out;
}

}  // namespace remat::torch
