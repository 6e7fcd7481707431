// remat-solve's graph files (docs/graph-format.md): a file whose "format" is "remat-graph/1" is
// linearized into the chain of its blocks (remat/linearize.hpp), which every command then takes
// as it takes a chain file; the single solve's schedule is replayed node by node before it is
// printed, and --info says where the graph was cut.
#pragma once

#include <remat/graph_simulate.hpp>
#include <remat/io/chain_json.hpp>
#include <remat/io/graph_json.hpp>
#include <remat/linearize.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

namespace remat::tools {

/// A graph file and the chain of its blocks, as a chain file.
struct graph_input {
  io::graph_file file;
  linearization lin;
  io::chain_file chain;
};

/// The graph at `path` when the file says it is one (`"format": "remat-graph/1"`), else nullopt
/// (a chain file, or a file the chain reader will report on); linearized with `options`.
inline std::optional<graph_input> read_graph_input(const std::string& path,
                                                   const linearize_options& options = {}) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in, nullptr, false);
  } catch (const std::exception&) {
    return std::nullopt;  // the chain reader reports what is wrong with the file
  }
  if (doc.is_discarded() || !io::is_graph_document(doc)) return std::nullopt;
  graph_input g;
  g.file = io::read_graph_file(path);
  try {
    g.lin = linearize(g.file.graph, options);
  } catch (const graph_error& e) {
    throw io::graph_file_error(path, "", e.what());
  }
  g.chain.chain = g.lin.chain;
  g.chain.name = g.file.name.empty() ? "graph" : g.file.name;
  g.chain.time_unit = g.file.time_unit;
  g.chain.memory_unit = g.file.memory_unit;
  for (const graph_block& b : g.lin.blocks) {
    const std::string& last = g.file.graph.nodes[b.end - 1].name;
    g.chain.stage_names.push_back(last.empty() ? "node " + std::to_string(b.end - 1) : last);
  }
  return g;
}

/// The node-level replay of a schedule of the graph's chain: an internal error when it is
/// invalid or peaks above the chain-level replay (the block costs would be unsafe).
inline node_replay confirm_at_node_level(const graph_input& g, const schedule& s,
                                         size_type chain_peak) {
  const node_replay r = simulate_nodes(g.file.graph, g.lin, s.ops);
  if (!r.valid() || r.peak_memory > chain_peak)
    throw std::logic_error("the node-level replay of the schedule " +
                           (r.valid() ? "peaks at " + std::to_string(r.peak_memory) +
                                            ", above the chain-level " +
                                            std::to_string(chain_peak)
                                      : "fails: " + r.error));
  return r;
}

/// The lines --info adds for a graph: its size, cut points, blocks and the largest block.
inline std::string format_graph_info(const graph_input& g, const std::string& memory_unit) {
  const graph& gr = g.file.graph;
  const linearization& lin = g.lin;
  std::string out;
  const auto line = [&](std::string_view key, const std::string& text) {
    std::string l(key);
    l.resize(15, ' ');
    out += l + text + '\n';
  };
  std::string globals = std::to_string(lin.global_bytes);
  if (!memory_unit.empty()) globals += " " + memory_unit;
  line("graph", std::to_string(gr.nodes.size()) + " nodes, " + std::to_string(gr.values.size()) +
                    " values; globals " + globals + " (outside the budget)");
  std::string cuts = std::to_string(lin.cut_nodes.size()) + ":";
  const std::size_t shown = std::min<std::size_t>(lin.cut_nodes.size(), 8);
  for (std::size_t i = 0; i < shown; ++i) {
    const std::size_t n = lin.cut_nodes[i];
    cuts += " " + (gr.nodes[n].name.empty() ? "node " + std::to_string(n) : gr.nodes[n].name);
  }
  if (shown < lin.cut_nodes.size()) cuts += " ...";
  line("cut points", cuts);
  std::size_t largest = 0;
  double largest_share = -1;
  for (std::size_t k = 0; k < lin.blocks.size(); ++k) {
    const double s = activation_share(gr, lin.blocks[k]);
    if (s > largest_share) {
      largest_share = s;
      largest = k;
    }
  }
  line("blocks", std::to_string(lin.blocks.size()) + " (the chain's stages), " +
                     std::to_string(lin.distinct_blocks) + " distinct (each costed once)");
  const graph_block& b = lin.blocks[largest];
  char share[32];
  std::snprintf(share, sizeof share, "%.1f%%", 100 * largest_share);
  line("largest block", "stage " + std::to_string(largest) + " (nodes " +
                            std::to_string(b.first) + ".." + std::to_string(b.end - 1) + ", " +
                            std::to_string(b.end - b.first) + " nodes): " + share +
                            " of the activation bytes");
  return out;
}

}  // namespace remat::tools
