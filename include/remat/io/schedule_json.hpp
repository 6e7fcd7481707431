// Reading and writing schedules as JSON: the `ops` of remat-solve's --json output
// (docs/chain-format.md), one object per op, named by the op table (op_table.hpp):
//
//   {"op": "F_ck", "stage": 3}   {"op": "F_all", "stage": 3, "option": 1}   {"op": "loss"}
//   {"op": "B", "stage": 0}      {"op": "offload", "tensor": "t", "index": 2}
//
// `option` is written only where it is not 0; a transfer may be named `O`/`P`/`W` as well as
// `offload`/`prefetch`/`wait`. Reading checks the form only (each field's type and range, and
// that an op carries exactly its kind's fields); whether the ops make a schedule of a chain is the
// walk's to say (`remat::simulate`).
//
// Optional: needs nlohmann-json (>= 3.10), which the core headers do not.
//
//   std::vector<remat::op> ops = remat::io::read_schedule_file("plan.json", chain.length());
//   remat::simulate(chain, std::span<const remat::op>(ops)).peak_memory;
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/io/document.hpp>
#include <remat/op.hpp>
#include <remat/op_table.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <istream>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace remat::io {

/// A malformed schedule: the message names the source, the op and the field:
/// `plan.json: ops[3].stage: must be an integer (got string)`.
class schedule_file_error : public std::runtime_error {
 public:
  static constexpr std::size_t no_op = static_cast<std::size_t>(-1);
  schedule_file_error(std::string source, std::size_t op, std::string field,
                      const std::string& rule)
      : std::runtime_error(message(source, op, field, rule)),
        source_(std::move(source)),
        op_(op),
        field_(std::move(field)) {}
  [[nodiscard]] const std::string& source() const noexcept { return source_; }
  /// The op's index in `ops`, or `no_op` for the document as a whole.
  [[nodiscard]] std::size_t op_index() const noexcept { return op_; }
  [[nodiscard]] const std::string& field() const noexcept { return field_; }

 private:
  static std::string message(const std::string& source, std::size_t op, const std::string& field,
                             const std::string& rule) {
    std::string where = source + ": ";
    if (op != no_op) where += "ops[" + std::to_string(op) + "]" + (field.empty() ? "" : ".");
    if (!field.empty()) where += field;
    if (op != no_op || !field.empty()) where += ": ";
    return where + rule;
  }
  std::string source_;
  std::size_t op_;
  std::string field_;
};

/// `o` as an object of `ops` (its kind's JSON name).
inline nlohmann::ordered_json to_json(const op& o) {
  nlohmann::ordered_json j;
  const op_rule& r = rule(o.kind);
  j["op"] = std::string(r.json_name);
  if (r.transfer) {
    j["tensor"] = o.tensor == tensor_kind::tape ? "t" : "a";
    j["index"] = o.stage;
    return j;
  }
  if (r.indices != index_range::length) j["stage"] = o.stage;
  if (o.option != 0) j["option"] = o.option;
  return j;
}

/// The ops as a JSON array.
inline nlohmann::ordered_json to_json(std::span<const op> ops) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const op& o : ops) out.push_back(to_json(o));
  return out;
}

namespace detail {

inline std::int32_t index_field(const nlohmann::json& v, const auto& fail) {
  if (!v.is_number_integer())
    fail(std::string("must be an integer (got ") + (v.is_number() ? v.dump() : v.type_name()) +
         ")");
  constexpr auto most = static_cast<std::uint64_t>(std::numeric_limits<std::int32_t>::max());
  if (v.is_number_unsigned() ? v.get<std::uint64_t>() > most : v.get<std::int64_t>() < 0)
    fail("must be from 0 to 2^31 - 1 (got " + v.dump() + ")");
  return static_cast<std::int32_t>(v.get<std::int64_t>());
}

// One op of `ops` (its index `i`); the loss's stage is the chain's length.
inline op op_from_json(const nlohmann::json& j, std::size_t i, std::int32_t length,
                       const std::string& source) {
  const auto fail = [&](const std::string& field, const std::string& rule) {
    throw schedule_file_error(source, i, field, rule);
  };
  if (!j.is_object()) fail("", std::string("must be an object (got ") + j.type_name() + ")");
  const auto kind_field = j.find("op");
  if (kind_field == j.end()) fail("op", "missing");
  if (!kind_field->is_string())
    fail("op", std::string("must be a string (got ") + kind_field->type_name() + ")");
  const auto kind = op_kind_named(kind_field->get<std::string>());
  if (!kind)
    fail("op",
         "unknown kind '" + kind_field->get<std::string>() + "' (known: " + op_kind_names() + ")");
  const op_rule& r = rule(*kind);
  op o{*kind, length};
  // The fields a kind carries beside "op": a transfer its tensor and index, another op its stage
  // (not the loss); an op that takes an option may carry it.
  std::vector<std::string> fields;
  if (r.transfer)
    fields = {"tensor", "index"};
  else if (r.indices != index_range::length)
    fields = {"stage"};
  if (r.takes_option) fields.push_back("option");
  for (const auto& item : j.items()) {
    const std::string& key = item.key();
    const nlohmann::json& value = item.value();
    const auto field = [&](const std::string& rule_text) { fail(key, rule_text); };
    if (key == "op") continue;
    if (std::find(fields.begin(), fields.end(), key) == fields.end()) {
      std::string known = "op";
      for (const std::string& f : fields) {
        known += ", ";
        known += f;
      }
      field("is not a field of " + std::string(r.name) + " (its fields: " + known + ")");
    }
    if (key == "tensor") {
      if (!value.is_string() || (value != "a" && value != "t"))
        field("must be \"a\" (activation) or \"t\" (tape) (got " + value.dump() + ")");
      o.tensor = value == "t" ? tensor_kind::tape : tensor_kind::activation;
    } else if (key == "option") {
      const std::int32_t option = index_field(value, field);
      if (static_cast<std::size_t>(option) >= max_options)
        field("must be below " + std::to_string(max_options) + " (got " + value.dump() + ")");
      o.option = static_cast<std::uint16_t>(option);
    } else {  // "index" or "stage"
      o.stage = index_field(value, field);
    }
  }
  for (const std::string& f : fields)
    if (f != "option" && !j.contains(f)) fail(f, "missing");
  return o;
}

}  // namespace detail

/// The ops of a JSON array `ops` (`length`: the chain's, the loss's index). Throws
/// `schedule_file_error` naming `source`, the op and the field.
inline std::vector<op> ops_from_json(const nlohmann::json& ops, std::int32_t length,
                                     const std::string& source = "ops") {
  if (!ops.is_array())
    throw schedule_file_error(source, schedule_file_error::no_op, "ops",
                              std::string("must be an array (got ") + ops.type_name() + ")");
  std::vector<op> out;
  out.reserve(ops.size());
  for (std::size_t i = 0; i < ops.size(); ++i)
    out.push_back(detail::op_from_json(ops[i], i, length, source));
  return out;
}

/// A schedule document: an array of ops, or an object with `ops` (remat-solve --json's output).
inline std::vector<op> read_schedule(std::istream& in, std::string_view source_name,
                                     std::int32_t length) {
  const std::string source(source_name);
  const auto fail = [&](const std::string& rule) {
    throw schedule_file_error(source, schedule_file_error::no_op, "", rule);
  };
  const nlohmann::json doc = detail::read_document(
      in, detail::max_document_bytes, "is longer than the largest schedule read", fail);
  if (doc.is_object()) {
    const auto ops = doc.find("ops");
    if (ops == doc.end())
      throw schedule_file_error(source, schedule_file_error::no_op, "ops", "missing");
    return ops_from_json(*ops, length, source);
  }
  return ops_from_json(doc, length, source);
}

/// `read_schedule` of the file at `path`.
inline std::vector<op> read_schedule_file(const std::filesystem::path& path, std::int32_t length) {
  const std::string source = path.string();
  const auto fail = [&](const std::string& rule) {
    throw schedule_file_error(source, schedule_file_error::no_op, "", rule);
  };
  std::ifstream in = detail::open_document(path, fail);
  return read_schedule(in, source, length);
}

}  // namespace remat::io
