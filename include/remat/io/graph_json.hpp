// Reading and writing graph files (docs/graph-format.md, format "remat-graph/1").
//
// Optional: needs nlohmann-json (>= 3.10), like io/chain_json.hpp.
//
//   remat::io::graph_file f = remat::io::read_graph_file("unet.json");
//   remat::graph_solve_result r = remat::solve_graph(f.graph, budget);
//
// Every malformed file is a `graph_file_error` naming the file and where in it:
// `unet.json: nodes[3].inputs[1]: no value named "h7"`, or, for a rule of the graph itself,
// `unet.json: node 4 ("add"): reads value 7 ("h2"), which node 6 ("conv") makes later`.
// Values are named in nodes by their `name` (names are unique) or by their index.
#pragma once

#include <remat/detail/io/document.hpp>
#include <remat/detail/io/json_values.hpp>
#include <remat/graph.hpp>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <istream>
#include <map>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace remat::io {

/// The `format` value of graph files.
inline constexpr std::string_view graph_format = "remat-graph/1";

/// A graph with what its file says about it besides the graph.
struct graph_file {
  remat::graph graph;
  std::string name;         ///< the graph's `name`; empty when absent
  std::string time_unit;    ///< `units.time`; empty when absent
  std::string memory_unit;  ///< `units.memory`; empty when absent
  friend bool operator==(const graph_file&, const graph_file&) = default;
};

/// A graph file that cannot be read. `what()` is `SOURCE: WHERE: RULE`.
class graph_file_error : public std::runtime_error {
 public:
  graph_file_error(const std::string& source, const std::string& where, const std::string& rule)
      : std::runtime_error(source + ": " + (where.empty() ? "" : where + ": ") + rule) {}
};

namespace detail {

// Reads one JSON object's fields, reporting problems at `where` (`nodes[3]`, say).
class graph_fields {
 public:
  graph_fields(const std::string& source, std::string where, const json& obj)
      : source_(source), where_(std::move(where)), obj_(obj) {
    if (!obj.is_object())
      throw graph_file_error(source_, where_,
                             std::string("must be an object (got ") + obj.type_name() + ")");
  }
  [[noreturn]] void fail(std::string_view field, const std::string& rule) const {
    throw graph_file_error(source_, at(field), rule);
  }
  [[nodiscard]] std::string at(std::string_view field) const {
    return where_.empty() ? std::string(field) : where_ + "." + std::string(field);
  }
  const json* find(std::string_view field) const {
    const auto it = obj_.find(field);
    return it == obj_.end() ? nullptr : &*it;
  }
  const json& required(std::string_view field) const {
    const json* v = find(field);
    if (v == nullptr) fail(field, "missing (required)");
    return *v;
  }
  // The file's error for a wrong value of `field`.
  [[nodiscard]] auto error_at(std::string_view field) const {
    return [this, f = at(field)](const std::string& rule) {
      return graph_file_error(source_, f, rule);
    };
  }
  double time(std::string_view field) const {
    const json* v = find(field);
    return v == nullptr ? 0 : time_value(*v, error_at(field));
  }
  size_type size(std::string_view field, bool needed = false) const {
    const json* v = needed ? &required(field) : find(field);
    return v == nullptr ? 0 : size_value(*v, error_at(field));
  }
  std::string string(std::string_view field) const {
    const json* v = find(field);
    return v == nullptr ? std::string() : string_value(*v, error_at(field));
  }
  const json* array(std::string_view field) const {
    const json* v = find(field);
    if (v != nullptr && !v->is_array())
      fail(field, std::string("must be an array (got ") + v->type_name() + ")");
    return v;
  }

 private:
  const std::string& source_;
  std::string where_;
  const json& obj_;
};

// The values' names, for the nodes' references to them. A name several values carry cannot be a
// reference (those files name values by index).
class value_refs {
 public:
  void add(const std::string& name, std::size_t v) {
    if (!name.empty() && !by_name_.emplace(name, v).second) by_name_[name] = ambiguous;
  }

  // The value `v` (a name or an index) refers to, as field `field` of `f`.
  std::size_t ref(const graph_fields& f, const std::string& field, const json& v) const {
    if (v.is_string()) {
      const auto it = by_name_.find(v.get<std::string>());
      if (it == by_name_.end()) f.fail(field, "no value named " + v.dump());
      if (it->second == ambiguous) f.fail(field, "several values are named " + v.dump());
      return it->second;
    }
    if (v.is_number_unsigned()) return v.get<std::size_t>();
    f.fail(field, "must be a value's name or index (got " + v.dump() + ")");
  }

  // The values the array `field` of `f` refers to (none where it is absent).
  std::vector<std::size_t> refs(const graph_fields& f, const char* field) const {
    std::vector<std::size_t> out;
    if (const json* a = f.array(field))
      for (std::size_t i = 0; i < a->size(); ++i)
        out.push_back(ref(f, std::string(field) + "[" + std::to_string(i) + "]", (*a)[i]));
    return out;
  }

 private:
  static constexpr std::size_t ambiguous = static_cast<std::size_t>(-1);
  std::map<std::string, std::size_t, std::less<>> by_name_;
};

inline graph_value read_value(const graph_fields& f) {
  graph_value x;
  x.name = f.string("name");
  x.size = f.size("size", true);
  const std::string kind = f.string("kind");
  if (kind == "input")
    x.kind = value_kind::input;
  else if (kind == "global")
    x.kind = value_kind::global;
  else if (kind == "activation" || kind.empty())
    x.kind = value_kind::activation;
  else
    f.fail("kind", "must be \"input\", \"global\" or \"activation\" (got \"" + kind + "\")");
  return x;
}

inline graph_node read_node(const std::string& source, const graph_fields& f,
                            const value_refs& names) {
  graph_node node;
  node.name = f.string("name");
  node.inputs = names.refs(f, "inputs");
  node.outputs = names.refs(f, "outputs");
  node.forward_time = f.time("forward_time");
  node.backward_time = f.time("backward_time");
  node.forward_transient = f.size("forward_transient");
  node.backward_transient = f.size("backward_transient");
  node.saved = names.refs(f, "saved");
  node.saved_internal = f.size("saved_internal");
  if (const json* a = f.array("in_place"))
    for (std::size_t i = 0; i < a->size(); ++i) {
      const graph_fields p(source, f.at("in_place[" + std::to_string(i) + "]"), (*a)[i]);
      node.in_place.push_back({names.ref(p, "output", p.required("output")),
                               names.ref(p, "input", p.required("input"))});
    }
  return node;
}

inline graph_file graph_from_document(const json& doc, const std::string& source) {
  const graph_fields top(source, "", doc);
  if (const json* f = top.find("format");
      f != nullptr && !(f->is_string() && f->get<std::string>() == graph_format))
    top.fail("format", "must be \"" + std::string(graph_format) + "\" (got " + f->dump() + ")");
  graph_file out;
  out.name = top.string("name");
  if (const json* u = top.find("units")) {
    const graph_fields units(source, "units", *u);
    out.time_unit = units.string("time");
    out.memory_unit = units.string("memory");
  }
  graph& g = out.graph;
  const json* values = top.array("values");
  if (values == nullptr) top.fail("values", "missing (required)");
  value_refs names;
  for (std::size_t v = 0; v < values->size(); ++v) {
    const graph_fields f(source, "values[" + std::to_string(v) + "]", (*values)[v]);
    g.values.push_back(read_value(f));
    names.add(g.values.back().name, v);
  }
  const json* nodes = top.array("nodes");
  if (nodes == nullptr) top.fail("nodes", "missing (required)");
  for (std::size_t n = 0; n < nodes->size(); ++n) {
    const graph_fields f(source, "nodes[" + std::to_string(n) + "]", (*nodes)[n]);
    g.nodes.push_back(read_node(source, f, names));
  }
  if (const json* l = top.find("loss")) {
    const graph_fields loss(source, "loss", *l);
    g.loss_time = loss.time("backward_time");
    g.loss_overhead = loss.size("backward_overhead");
  }
  try {
    validate(g);
  } catch (const graph_error& e) {
    throw graph_file_error(source, "", e.what());
  }
  return out;
}

}  // namespace detail

/// Whether a parsed JSON document declares itself a graph file (`"format": "remat-graph/1"`).
inline bool is_graph_document(const nlohmann::json& doc) {
  const auto it = doc.is_object() ? doc.find("format") : doc.end();
  return doc.is_object() && it != doc.end() && it->is_string() &&
         it->get<std::string>() == graph_format;
}

/// Reads a graph file from `in`; `source_name` is the name errors give for it. Reading stops past
/// `max_bytes` (by default 256 MiB, as for chain files).
inline graph_file read_graph(std::istream& in, std::string_view source_name,
                             std::size_t max_bytes = detail::max_document_bytes) {
  const std::string source(source_name);
  const auto fail = [&](const std::string& rule) { throw graph_file_error(source, "", rule); };
  const detail::json doc = detail::read_document(
      in, max_bytes, "not a graph file: longer than " + std::to_string(max_bytes) + " bytes",
      fail);
  return detail::graph_from_document(doc, source);
}

/// Reads the graph file at `path`; errors name it as given.
inline graph_file read_graph_file(const std::filesystem::path& path) {
  const std::string source = path.string();
  std::ifstream in = detail::open_document(
      path, [&](const std::string& rule) { throw graph_file_error(source, "", rule); });
  return read_graph(in, source);
}

/// The graph file as a JSON document (docs/graph-format.md's key order). Validates the graph
/// (throws `remat::graph_error`). Values are named in nodes by name where every value has a
/// distinct non-empty name, else by index.
inline nlohmann::ordered_json to_json(const graph_file& f) {
  const graph& g = f.graph;
  validate(g);
  std::map<std::string, std::size_t, std::less<>> names;
  for (std::size_t v = 0; v < g.values.size(); ++v) names.emplace(g.values[v].name, v);
  const bool by_name = names.size() == g.values.size() && !names.contains("");
  auto ref = [&](std::size_t v) {
    return by_name ? nlohmann::ordered_json(g.values[v].name) : nlohmann::ordered_json(v);
  };
  auto refs = [&](const std::vector<std::size_t>& vs) {
    nlohmann::ordered_json a = nlohmann::ordered_json::array();
    for (const std::size_t v : vs) a.push_back(ref(v));
    return a;
  };
  nlohmann::ordered_json doc;
  doc["format"] = graph_format;
  if (!f.name.empty()) doc["name"] = f.name;
  if (!f.time_unit.empty()) doc["units"]["time"] = f.time_unit;
  if (!f.memory_unit.empty()) doc["units"]["memory"] = f.memory_unit;
  doc["values"] = nlohmann::ordered_json::array();
  for (const graph_value& x : g.values) {
    nlohmann::ordered_json v;
    if (!x.name.empty()) v["name"] = x.name;
    v["size"] = x.size;
    v["kind"] = x.kind == value_kind::input ? "input"
                : x.kind == value_kind::global ? "global" : "activation";
    doc["values"].push_back(std::move(v));
  }
  doc["nodes"] = nlohmann::ordered_json::array();
  for (const graph_node& n : g.nodes) {
    nlohmann::ordered_json o;
    if (!n.name.empty()) o["name"] = n.name;
    o["inputs"] = refs(n.inputs);
    o["outputs"] = refs(n.outputs);
    o["forward_time"] = n.forward_time;
    o["backward_time"] = n.backward_time;
    if (n.forward_transient != 0) o["forward_transient"] = n.forward_transient;
    if (n.backward_transient != 0) o["backward_transient"] = n.backward_transient;
    if (!n.saved.empty()) o["saved"] = refs(n.saved);
    if (n.saved_internal != 0) o["saved_internal"] = n.saved_internal;
    if (!n.in_place.empty()) {
      o["in_place"] = nlohmann::ordered_json::array();
      for (const in_place_output& a : n.in_place)
        o["in_place"].push_back({{"output", ref(a.output)}, {"input", ref(a.input)}});
    }
    doc["nodes"].push_back(std::move(o));
  }
  if (g.loss_time != 0 || g.loss_overhead != 0) {
    doc["loss"]["backward_time"] = g.loss_time;
    if (g.loss_overhead != 0) doc["loss"]["backward_overhead"] = g.loss_overhead;
  }
  return doc;
}

/// Writes `f` as a graph file (JSON, indented by 2).
inline void write_graph(std::ostream& out, const graph_file& f) {
  out << to_json(f).dump(2) << '\n';
}

/// Writes `f` to `path`.
inline void write_graph_file(const std::filesystem::path& path, const graph_file& f) {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw graph_file_error(path.string(), "", "cannot open for writing");
  write_graph(out, f);
  if (!out) throw graph_file_error(path.string(), "", "cannot write");
}

}  // namespace remat::io
