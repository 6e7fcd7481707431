// Reading and writing chain files (docs: chain-format.md, format "remat-chain/1").
//
// Optional: needs nlohmann-json (>= 3.10), which the core headers do not.
//
//   remat::io::chain_file f = remat::io::read_chain_file("resnet.json");
//   remat::solve_result r = remat::solve(f.chain, budget);
//
// Every malformed file is a `chain_file_error` whose message names the file, the stage and the
// field: `chain.json: stages[3].tape_size: must be >= output_size (12 < 40)`.
//
// Numbers: sizes must be written as JSON integers (`1000`, not `1000.0` or `1e3`). A writer that
// emits a float for a size may already have rounded it (doubles hold integers exactly only up to
// 2^53, sizes go to 2^62), so the reader refuses every float rather than guessing which are
// exact. Times are any JSON number.
//
// One compatible extension of chain-format.md (docs/recording-overhead.md): a stage may carry
// `recording_overhead`, the overhead of its recording forward F_all where it differs from
// `forward_overhead`. Absent, it is the forward_overhead; it is written only where it differs, so
// files without it read and write as before.
//
// A second one (docs/chain-format.md, "Extensions"): a top-level `transfer` object with
// `offload_bandwidth` and `prefetch_bandwidth`, the chain's `remat::transfer_rates` in memory units
// per time unit (each optional, 0 when absent). It is written only when a bandwidth is > 0.
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/io/document.hpp>
#include <remat/detail/io/json_values.hpp>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <istream>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace remat::io {

/// The `format` value this library reads and writes.
inline constexpr std::string_view chain_format = "remat-chain/1";

/// A chain with what a chain file says about it besides the numbers.
struct chain_file {
  remat::chain chain;
  std::string name;                      ///< the chain's `name`; empty when absent
  std::vector<std::string> stage_names;  ///< empty, or one per stage (empty: that stage unnamed)
  std::string time_unit;                 ///< `units.time`, e.g. "ms"; empty when absent
  std::string memory_unit;               ///< `units.memory`, e.g. "bytes"; empty when absent

  friend bool operator==(const chain_file&, const chain_file&) = default;
};

/// A chain file that cannot be read: not found, not JSON, or not a valid chain.
/// `what()` is `SOURCE: LOCATION: RULE`, e.g. `chain.json: stages[1].forward_time: missing
/// (required)`, or `SOURCE: RULE` when the problem is the whole file.
class chain_file_error : public std::runtime_error {
 public:
  static constexpr std::size_t no_stage = chain_error::no_stage;

  /// `field` empty with `stage_index == no_stage`: the whole file; with a stage: that stage.
  chain_file_error(std::string source, std::size_t stage_index, std::string field,
                   const std::string& rule)
      : std::runtime_error(message(source, stage_index, field, rule)),
        source_(std::move(source)),
        stage_index_(stage_index),
        field_(std::move(field)) {}

  /// A value rule broken (from `remat::validate`), placed in `source`.
  chain_file_error(std::string source, const chain_error& e)
      : std::runtime_error(source + ": " + e.what()),
        source_(std::move(source)),
        stage_index_(e.stage_index()),
        field_(e.field()) {}

  /// The file name (or the name given to `read_chain`).
  [[nodiscard]] const std::string& source() const noexcept { return source_; }
  /// Index of the offending stage, or `no_stage`.
  [[nodiscard]] std::size_t stage_index() const noexcept { return stage_index_; }
  /// The field as in the file (`tape_size`, `loss.backward_time`, ...); empty for the whole
  /// file or a whole stage.
  [[nodiscard]] const std::string& field() const noexcept { return field_; }

 private:
  static std::string message(const std::string& source, std::size_t stage_index,
                             const std::string& field, const std::string& rule) {
    std::string where;
    if (stage_index != no_stage) where = "stages[" + std::to_string(stage_index) + "]";
    if (!field.empty()) where += (where.empty() ? "" : ".") + field;
    return source + ": " + (where.empty() ? "" : where + ": ") + rule;
  }

  std::string source_;
  std::size_t stage_index_;
  std::string field_;
};

namespace detail {

using json = nlohmann::json;

// Reads the fields of one JSON object, reporting problems at `stage` (or the top level).
class field_reader {
 public:
  field_reader(const std::string& source, std::size_t stage, std::string prefix, const json& obj)
      : source_(source), stage_(stage), prefix_(std::move(prefix)), obj_(obj) {}

  [[noreturn]] void fail(std::string_view field, const std::string& rule) const {
    throw chain_file_error(source_, stage_, prefix_ + std::string(field), rule);
  }

  // The value of `field`, or nullptr when the object has none.
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
    return [this, f = prefix_ + std::string(field)](const std::string& rule) {
      return chain_file_error(source_, stage_, f, rule);
    };
  }

  double time(std::string_view field, const json& v) const {
    return time_value(v, error_at(field));
  }
  size_type size(std::string_view field, const json& v) const {
    return size_value(v, error_at(field));
  }
  std::string string(std::string_view field, const json& v) const {
    return string_value(v, error_at(field));
  }

  double optional_time(std::string_view field) const {
    const json* v = find(field);
    return v == nullptr ? 0.0 : time(field, *v);
  }
  size_type optional_size(std::string_view field) const {
    const json* v = find(field);
    return v == nullptr ? 0 : size(field, *v);
  }
  std::string optional_string(std::string_view field) const {
    const json* v = find(field);
    return v == nullptr ? std::string() : string(field, *v);
  }

  // The object at `field` (absent: nullptr), checked to be an object.
  const json* optional_object(std::string_view field) const {
    const json* v = find(field);
    if (v != nullptr && !v->is_object())
      fail(field, std::string("must be an object (got ") + v->type_name() + ")");
    return v;
  }

 private:
  const std::string& source_;
  std::size_t stage_;
  std::string prefix_;
  const json& obj_;
};

// Stage k's "options" (docs/model.md, "Several options per stage"): the ways to run F_all and B.
inline void read_stage_options(const std::string& source, std::size_t k, const field_reader& r,
                               const json& options, stage& st) {
  if (!options.is_array())
    r.fail("options", std::string("must be an array (got ") + options.type_name() + ")");
  for (std::size_t o = 0; o < options.size(); ++o) {
    const std::string prefix = "options[" + std::to_string(o) + "].";
    const json& p = options[o];
    if (!p.is_object())
      throw chain_file_error(source, k, prefix.substr(0, prefix.size() - 1),
                             std::string("must be an object (got ") + p.type_name() + ")");
    const field_reader q(source, k, prefix, p);
    stage_option opt;
    opt.forward_time = q.time("forward_time", q.required("forward_time"));
    opt.backward_time = q.time("backward_time", q.required("backward_time"));
    opt.tape_size = q.size("tape_size", q.required("tape_size"));
    opt.forward_overhead = q.optional_size("forward_overhead");
    opt.backward_overhead = q.optional_size("backward_overhead");
    st.options.push_back(opt);
  }
}

// Stage k of "stages", and its name (empty where it has none).
inline stage read_stage(const std::string& source, std::size_t k, const json& s,
                        std::string& name) {
  if (!s.is_object())
    throw chain_file_error(source, k, "",
                           std::string("must be an object (got ") + s.type_name() + ")");
  const field_reader r(source, k, "", s);
  stage st;
  st.forward_time = r.time("forward_time", r.required("forward_time"));
  st.backward_time = r.time("backward_time", r.required("backward_time"));
  st.output_size = r.size("output_size", r.required("output_size"));
  st.tape_size = r.size("tape_size", r.required("tape_size"));
  st.forward_overhead = r.optional_size("forward_overhead");
  st.backward_overhead = r.optional_size("backward_overhead");
  // An extension of chain-format.md (docs/recording-overhead.md): absent, it is the
  // forward_overhead.
  if (const json* v = r.find("recording_overhead"))
    st.recording_overhead = r.size("recording_overhead", *v);
  if (const json* options = r.find("options")) read_stage_options(source, k, r, *options, st);
  name = r.optional_string("name");
  return st;
}

inline chain_file from_document(const json& doc, const std::string& source) {
  if (!doc.is_object())
    throw chain_file_error(source, chain_file_error::no_stage, "",
                           std::string("must be a JSON object (got ") + doc.type_name() + ")");
  const field_reader top(source, chain_file_error::no_stage, "", doc);
  chain_file out;

  if (const json* format = top.find("format")) {
    const std::string f = top.string("format", *format);
    if (f != chain_format)
      top.fail("format", "unsupported \"" + f + "\" (this reader knows \"" +
                             std::string(chain_format) + "\")");
  }
  out.name = top.optional_string("name");
  if (const json* units = top.optional_object("units")) {
    const field_reader u(source, chain_file_error::no_stage, "units.", *units);
    out.time_unit = u.optional_string("time");
    out.memory_unit = u.optional_string("memory");
  }
  out.chain.input_size = top.size("input_size", top.required("input_size"));
  if (const json* loss = top.optional_object("loss")) {
    const field_reader l(source, chain_file_error::no_stage, "loss.", *loss);
    out.chain.loss_time = l.optional_time("backward_time");
    out.chain.loss_overhead = l.optional_size("backward_overhead");
  }
  if (const json* transfer = top.optional_object("transfer")) {
    // A bandwidth is read as a time is: any JSON number, its sign left to remat::validate.
    const field_reader t(source, chain_file_error::no_stage, "transfer.", *transfer);
    out.chain.transfer.offload_bandwidth = t.optional_time("offload_bandwidth");
    out.chain.transfer.prefetch_bandwidth = t.optional_time("prefetch_bandwidth");
  }

  const json& stages = top.required("stages");
  if (!stages.is_array())
    top.fail("stages", std::string("must be an array (got ") + stages.type_name() + ")");
  out.chain.stages.reserve(stages.size());
  out.stage_names.reserve(stages.size());
  for (std::size_t k = 0; k < stages.size(); ++k) {
    std::string name;
    out.chain.stages.push_back(read_stage(source, k, stages[k], name));
    out.stage_names.push_back(std::move(name));
  }

  // The value rules (empty chain, signs, finiteness, tape >= output, totals) are the model's.
  try {
    validate(out.chain);
  } catch (const chain_error& e) {
    throw chain_file_error(source, e);
  }
  return out;
}

}  // namespace detail

/// The most a chain file may hold by default (256 MiB): far above any real chain (JSON takes about
/// 150 bytes per stage, and the DP solvers stop at a few thousand stages). Reading stops there, so
/// that a path such as /dev/zero is an error, not a read until memory runs out.
inline constexpr std::size_t max_chain_file_bytes = detail::max_document_bytes;

/// Reads a chain file from `in`; `source_name` is the name errors give for it.
/// Throws `chain_file_error` for anything chain-format.md calls an error, and for more than
/// `max_bytes` of input.
inline chain_file read_chain(std::istream& in, std::string_view source_name,
                             std::size_t max_bytes = max_chain_file_bytes) {
  const std::string source(source_name);
  const auto fail = [&](const std::string& rule) {
    throw chain_file_error(source, chain_file_error::no_stage, "", rule);
  };
  const detail::json doc = detail::read_document(
      in, max_bytes,
      "not a chain file: longer than " + std::to_string(max_bytes) +
          " bytes (max_chain_file_bytes)",
      fail);
  return detail::from_document(doc, source);
}

/// Reads the chain file at `path`; errors name it as given.
inline chain_file read_chain_file(const std::filesystem::path& path) {
  const std::string source = path.string();
  std::ifstream in = detail::open_document(path, [&](const std::string& rule) {
    throw chain_file_error(source, chain_file_error::no_stage, "", rule);
  });
  return read_chain(in, source);
}

/// The chain file as a JSON document in the key order of chain-format.md. Validates the chain
/// (throws `remat::chain_error`) so that what is written can be read back; `stage_names` must be
/// empty or have one name per stage (else `std::invalid_argument`).
inline nlohmann::ordered_json to_json(const chain_file& f) {
  validate(f.chain);
  if (!f.stage_names.empty() && f.stage_names.size() != f.chain.stages.size())
    throw std::invalid_argument("remat::io::to_json: " + std::to_string(f.stage_names.size()) +
                                " stage names for " + std::to_string(f.chain.stages.size()) +
                                " stages");
  nlohmann::ordered_json j;
  j["format"] = chain_format;
  if (!f.name.empty()) j["name"] = f.name;
  if (!f.time_unit.empty() || !f.memory_unit.empty()) {
    nlohmann::ordered_json units = nlohmann::ordered_json::object();
    if (!f.time_unit.empty()) units["time"] = f.time_unit;
    if (!f.memory_unit.empty()) units["memory"] = f.memory_unit;
    j["units"] = std::move(units);
  }
  j["input_size"] = f.chain.input_size;
  j["loss"] = {{"backward_time", f.chain.loss_time}, {"backward_overhead", f.chain.loss_overhead}};
  // Only with a link to the host: a chain without one writes the same file as before.
  const transfer_rates& t = f.chain.transfer;
  if (t.offload_bandwidth > 0 || t.prefetch_bandwidth > 0)
    j["transfer"] = {{"offload_bandwidth", t.offload_bandwidth},
                     {"prefetch_bandwidth", t.prefetch_bandwidth}};
  nlohmann::ordered_json stages = nlohmann::ordered_json::array();
  for (std::size_t k = 0; k < f.chain.stages.size(); ++k) {
    const stage& s = f.chain.stages[k];
    nlohmann::ordered_json js;
    if (!f.stage_names.empty() && !f.stage_names[k].empty()) js["name"] = f.stage_names[k];
    js["forward_time"] = s.forward_time;
    js["backward_time"] = s.backward_time;
    js["output_size"] = s.output_size;
    js["tape_size"] = s.tape_size;
    js["forward_overhead"] = s.forward_overhead;
    js["backward_overhead"] = s.backward_overhead;
    // Only where it differs: a chain without recording overheads writes the same file as before.
    if (s.recording_overhead && *s.recording_overhead != s.forward_overhead)
      js["recording_overhead"] = *s.recording_overhead;
    if (!s.options.empty()) {
      nlohmann::ordered_json options = nlohmann::ordered_json::array();
      for (const stage_option& o : s.options)
        options.push_back({{"forward_time", o.forward_time},
                           {"backward_time", o.backward_time},
                           {"tape_size", o.tape_size},
                           {"forward_overhead", o.forward_overhead},
                           {"backward_overhead", o.backward_overhead}});
      js["options"] = std::move(options);
    }
    stages.push_back(std::move(js));
  }
  j["stages"] = std::move(stages);
  return j;
}

/// Writes `f` as a chain file (indented JSON, one trailing newline). Times are written in the
/// shortest form that reads back to the same double, so reading gives `f` again.
inline void write_chain(std::ostream& out, const chain_file& f) {
  out << to_json(f).dump(2) << '\n';
}

/// Writes `f` to `path`; throws `chain_file_error` naming `path` when it cannot be written.
inline void write_chain_file(const std::filesystem::path& path, const chain_file& f) {
  const std::string text = to_json(f).dump(2) + '\n';
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw chain_file_error(path.string(), chain_file_error::no_stage, "", "cannot create");
  out << text;
  out.close();
  if (!out) throw chain_file_error(path.string(), chain_file_error::no_stage, "", "cannot write");
}

}  // namespace remat::io
