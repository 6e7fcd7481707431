// Graphs for Python: remat::graph (values, nodes, the builder), validation and remat::linearize,
// so that Python finds a model's cut points by the library's one definition (docs/graphs.md)
// rather than by a second implementation. Errors are remat::graph_error, raised as
// remat.GraphError with the node and the value (errors.cpp).
#include "bindings.hpp"

#include <remat/graph.hpp>
#include <remat/io/chain_json.hpp>
#include <remat/io/size.hpp>
#include <remat/linearize.hpp>

#include <pybind11/stl.h>

#include <cstddef>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace remat::python {

namespace {

using remat::size_type;

value_kind kind_named(const std::string& k) {
  if (k == "input") return value_kind::input;
  if (k == "global") return value_kind::global;
  if (k == "activation") return value_kind::activation;
  throw py::value_error("value kind must be 'input', 'global' or 'activation', not '" + k + "'");
}

const char* kind_name(value_kind k) {
  switch (k) {
    case value_kind::input: return "input";
    case value_kind::global: return "global";
    case value_kind::activation: return "activation";
  }
  return "?";
}

remat::node_costs costs_of(double forward_time, double backward_time, size_type forward_transient,
                           size_type backward_transient, std::vector<std::size_t> saved,
                           bool saves_output, size_type saved_internal) {
  remat::node_costs c;
  c.forward_time = forward_time;
  c.backward_time = backward_time;
  c.forward_transient = forward_transient;
  c.backward_transient = backward_transient;
  c.saved = std::move(saved);
  c.saves_output = saves_output;
  c.saved_internal = saved_internal;
  return c;
}

std::string graph_repr(const remat::graph& g) {
  std::ostringstream o;
  o << "Graph(values=" << g.values.size() << ", nodes=" << g.nodes.size() << ")";
  return o.str();
}

// What `linearize` returns, with the graph it was computed on (for activation_share).
struct py_linearization {
  remat::graph graph;
  remat::linearization lin;
};

}  // namespace

void bind_graphs(py::module_& m) {
  py::class_<remat::graph_value>(m, "GraphValue", "One value of a Graph: name, size, kind.")
      .def_readonly("name", &remat::graph_value::name)
      .def_readonly("size", &remat::graph_value::size)
      .def_property_readonly("kind", [](const remat::graph_value& v) { return kind_name(v.kind); })
      .def("__repr__", [](const remat::graph_value& v) {
        return "GraphValue(name='" + v.name + "', size=" + std::to_string(v.size) + ", kind='" +
               kind_name(v.kind) + "')";
      });

  py::class_<remat::graph_node>(m, "GraphNode",
                                "One op of a Graph: the values it reads and makes, its costs, "
                                "what its backward reads and which outputs alias an input.")
      .def_readonly("name", &remat::graph_node::name)
      .def_readonly("inputs", &remat::graph_node::inputs)
      .def_readonly("outputs", &remat::graph_node::outputs)
      .def_readonly("forward_time", &remat::graph_node::forward_time)
      .def_readonly("backward_time", &remat::graph_node::backward_time)
      .def_readonly("forward_transient", &remat::graph_node::forward_transient)
      .def_readonly("backward_transient", &remat::graph_node::backward_transient)
      .def_readonly("saved", &remat::graph_node::saved)
      .def_readonly("saved_internal", &remat::graph_node::saved_internal)
      .def_property_readonly("in_place", [](const remat::graph_node& n) {
        std::vector<std::pair<std::size_t, std::size_t>> out;
        for (const remat::in_place_output& a : n.in_place) out.emplace_back(a.output, a.input);
        return out;
      });

  py::class_<remat::graph>(m, "Graph",
                           "An op graph (docs/graphs.md): values (bytes; the one input, globals, "
                           "activations) and nodes in an order where makers come first. Built "
                           "with input, add_global, apply, apply_in_place and add_node; each "
                           "returns an index.")
      .def(py::init<>())
      .def("input", &remat::graph::input, py::arg("name"), py::arg("size"),
           "The graph's one input value; returns its index.")
      .def("add_global", &remat::graph::global, py::arg("name"), py::arg("size"),
           "A global (parameter, buffer, constant, a value that needs no gradient): held for the "
           "whole step, outside the budget. Returns its index.")
      .def(
          "add_value",
          [](remat::graph& g, std::string name, size_type size, const std::string& kind) {
            return g.add_value(std::move(name), size, kind_named(kind));
          },
          py::arg("name"), py::arg("size"), py::arg("kind"),
          "A value of kind 'input', 'global' or 'activation' (made by a node of add_node).")
      .def(
          "apply",
          [](remat::graph& g, std::string name, std::vector<std::size_t> inputs, size_type size,
             double forward_time, double backward_time, size_type forward_transient,
             size_type backward_transient, std::vector<std::size_t> saved, bool saves_output,
             size_type saved_internal) {
            return g.apply(std::move(name), std::move(inputs), size,
                           costs_of(forward_time, backward_time, forward_transient,
                                    backward_transient, std::move(saved), saves_output,
                                    saved_internal));
          },
          py::arg("name"), py::arg("inputs"), py::arg("size"), py::kw_only(),
          py::arg("forward_time") = 0.0, py::arg("backward_time") = 0.0,
          py::arg("forward_transient") = 0, py::arg("backward_transient") = 0,
          py::arg("saved") = std::vector<std::size_t>{}, py::arg("saves_output") = false,
          py::arg("saved_internal") = 0,
          "A node reading `inputs` and making one new activation of `size` bytes (named as the "
          "node); returns the activation's index.")
      .def(
          "apply_in_place",
          [](remat::graph& g, std::string name, std::size_t target,
             std::vector<std::size_t> others, double forward_time, double backward_time,
             size_type forward_transient, size_type backward_transient,
             std::vector<std::size_t> saved, bool saves_output, size_type saved_internal) {
            return g.apply_in_place(std::move(name), target, std::move(others),
                                    costs_of(forward_time, backward_time, forward_transient,
                                             backward_transient, std::move(saved), saves_output,
                                             saved_internal));
          },
          py::arg("name"), py::arg("target"), py::arg("others") = std::vector<std::size_t>{},
          py::kw_only(), py::arg("forward_time") = 0.0, py::arg("backward_time") = 0.0,
          py::arg("forward_transient") = 0, py::arg("backward_transient") = 0,
          py::arg("saved") = std::vector<std::size_t>{}, py::arg("saves_output") = false,
          py::arg("saved_internal") = 0,
          "A node writing in place into `target` (reading `others` besides): its output takes "
          "over target's bytes, and no later node may read target. Returns the output's index.")
      .def(
          "add_node",
          [](remat::graph& g, std::string name, std::vector<std::size_t> inputs,
             std::vector<std::size_t> outputs, double forward_time, double backward_time,
             size_type forward_transient, size_type backward_transient,
             std::vector<std::size_t> saved, size_type saved_internal,
             const std::vector<std::pair<std::size_t, std::size_t>>& in_place) {
            remat::graph_node n;
            n.name = std::move(name);
            n.inputs = std::move(inputs);
            n.outputs = std::move(outputs);
            n.forward_time = forward_time;
            n.backward_time = backward_time;
            n.forward_transient = forward_transient;
            n.backward_transient = backward_transient;
            n.saved = std::move(saved);
            n.saved_internal = saved_internal;
            for (const auto& [out, in] : in_place) n.in_place.push_back({out, in});
            return g.add_node(std::move(n));
          },
          py::arg("name"), py::arg("inputs"), py::arg("outputs"), py::kw_only(),
          py::arg("forward_time") = 0.0, py::arg("backward_time") = 0.0,
          py::arg("forward_transient") = 0, py::arg("backward_transient") = 0,
          py::arg("saved") = std::vector<std::size_t>{}, py::arg("saved_internal") = 0,
          py::arg("in_place") = std::vector<std::pair<std::size_t, std::size_t>>{},
          "A node with several outputs (values made by add_value(..., 'activation')); "
          "in_place lists (output, input) pairs. Returns the node's index.")
      .def_readwrite("loss_time", &remat::graph::loss_time)
      .def_readwrite("loss_overhead", &remat::graph::loss_overhead)
      .def_property_readonly("values", [](const remat::graph& g) { return g.values; })
      .def_property_readonly("nodes", [](const remat::graph& g) { return g.nodes; })
      .def("validate", [](const remat::graph& g) { remat::validate(g); },
           "Checks the graph against docs/graphs.md; raises GraphError naming the node or value.")
      .def("__repr__", &graph_repr);

  py::class_<remat::graph_block>(m, "GraphBlock",
                                 "Nodes first .. end - 1 of a graph, reading the cut value `input` "
                                 "and making the cut value `output`; blocks of equal `kind` have "
                                 "equal structure and costs.")
      .def_readonly("first", &remat::graph_block::first)
      .def_readonly("end", &remat::graph_block::end)
      .def_readonly("input", &remat::graph_block::input)
      .def_readonly("output", &remat::graph_block::output)
      .def_readonly("kind", &remat::graph_block::kind)
      .def_property_readonly(
          "options",
          [](const remat::graph_block& b) {
            std::vector<std::pair<std::vector<std::size_t>, std::vector<std::size_t>>> out;
            for (const remat::block_recompute& r : b.options)
              out.emplace_back(r.dropped, r.recompute);
            return out;
          },
          "With block options: per option of the stage, (values its recording forward drops, "
          "nodes its backward re-runs); option 0 drops nothing. Empty without options.")
      .def("__repr__", [](const remat::graph_block& b) {
        return "GraphBlock(first=" + std::to_string(b.first) + ", end=" + std::to_string(b.end) +
               ", input=" + std::to_string(b.input) + ", output=" + std::to_string(b.output) +
               ", kind=" + std::to_string(b.kind) + ")";
      });

  py::class_<py_linearization>(m, "Linearization", "What `linearize` found.")
      .def_property_readonly(
          "chain",
          [](const py_linearization& p) {
            remat::io::chain_file f;
            f.chain = p.lin.chain;
            f.name = "linearized graph";
            return f;
          },
          "One stage per block, costed by a liveness sweep over the block's nodes.")
      .def_property_readonly("cut_nodes",
                             [](const py_linearization& p) { return p.lin.cut_nodes; },
                             "The nodes after which only their output is alive, in order (the "
                             "last node always).")
      .def_property_readonly("blocks", [](const py_linearization& p) { return p.lin.blocks; })
      .def_property_readonly("block_of", [](const py_linearization& p) { return p.lin.block_of; },
                             "block_of[n]: the block node n belongs to.")
      .def_property_readonly("distinct_blocks",
                             [](const py_linearization& p) { return p.lin.distinct_blocks; })
      .def_property_readonly("global_bytes",
                             [](const py_linearization& p) { return p.lin.global_bytes; })
      .def(
          "activation_share",
          [](const py_linearization& p, std::size_t block) {
            if (block >= p.lin.blocks.size())
              throw py::index_error("block " + std::to_string(block) + " of " +
                                    std::to_string(p.lin.blocks.size()));
            return remat::activation_share(p.graph, p.lin.blocks[block]);
          },
          py::arg("block"),
          "The share of the graph's activation bytes that the values made in `block` take.");

  m.def(
      "linearize",
      [](const remat::graph& g, bool block_options, std::size_t exact_limit,
         std::size_t max_options) {
        if (exact_limit > 30) throw py::value_error("linearize: exact_limit must be at most 30");
        if (max_options < 1) throw py::value_error("linearize: max_options must be at least 1");
        py_linearization out;
        out.graph = g;
        {
          const py::gil_scoped_release no_gil;
          out.lin = remat::linearize(out.graph, {.block_options = block_options,
                                                 .exact_limit = exact_limit,
                                                 .max_options = max_options});
        }
        return out;
      },
      py::arg("graph"), py::kw_only(), py::arg("block_options") = false,
      py::arg("exact_limit") = 16, py::arg("max_options") = 8,
      "Validates the graph (GraphError naming the node or value), finds its cut points and cuts "
      "it into a chain of blocks. With block_options, each block also gets the options of "
      "keeping fewer of its saved values (docs/graphs.md): exact over every subset of up to "
      "exact_limit droppable values, greedy beyond, at most max_options kept.");

  m.def(
      "parse_size",
      [](const std::string& text) {
        try {
          return remat::io::parse_size(text);
        } catch (const std::invalid_argument& e) {
          throw py::value_error(e.what());
        }
      },
      py::arg("text"),
      "A size as remat-solve's --budget reads it: '800', '12GB', '1536MiB' (bytes).");
}

}  // namespace remat::python
