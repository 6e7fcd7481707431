// Chains for Python: Stage, Transfer, Chain and chain files. Values are converted here and
// checked by the library (`remat::validate`), whose errors name the stage and the field.
#include "bindings.hpp"

#include <remat/chain.hpp>
#include <remat/io/chain_json.hpp>

#include <pybind11/stl.h>

#include <algorithm>
#include <cstddef>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace remat::python {

namespace {

using remat::size_type;
constexpr std::size_t no_stage = remat::chain_error::no_stage;

std::string type_name(py::handle v) {
  return std::string(py::str(py::type::handle_of(v).attr("__name__")));
}

// A size from Python: an int (or anything with __index__, e.g. numpy.int64), never a float: a
// chain file refuses floats for sizes, and so does this (a float may already have been rounded).
// Its range is the library's to check.
size_type to_size(py::handle v, std::size_t stage, const char* field) {
  if (PyBool_Check(v.ptr()) || !PyIndex_Check(v.ptr()))
    throw remat::chain_error(stage, field, "must be an integer (got " + type_name(v) + " " +
                                               std::string(py::repr(v)) + ")");
  const py::int_ i = py::reinterpret_steal<py::int_>(PyNumber_Index(v.ptr()));
  int overflow = 0;
  const long long value = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
  if (overflow != 0)
    throw remat::chain_error(stage, field,
                             std::string(overflow < 0 ? "must be >= 0 (" : "must be <= 2^62 (") +
                                 std::string(py::str(py::handle(i))) + ")");
  return static_cast<size_type>(value);
}

// A time from Python: any real number (int, float, numpy scalar); its range is the library's
// to check.
double to_time(py::handle v, std::size_t stage, const char* field) {
  if (PyBool_Check(v.ptr()) || (!PyFloat_Check(v.ptr()) && !PyIndex_Check(v.ptr()) &&
                                !py::hasattr(v, "__float__")))
    throw remat::chain_error(stage, field, "must be a number (got " + type_name(v) + ")");
  const double t = PyFloat_AsDouble(v.ptr());
  if (t == -1.0 && PyErr_Occurred() != nullptr) throw py::error_already_set();
  return t;
}

// The library's checks of one stage's values (or of a link), on a chain of that one stage,
// reported as stage `k`'s.
void validate_alone(const remat::stage& s, const remat::transfer_rates& transfer, std::size_t k) {
  remat::chain one;
  one.stages.push_back(s);
  one.transfer = transfer;
  try {
    remat::validate(one);
  } catch (const remat::chain_error& e) {
    if (e.stage_index() != 0) throw;
    const std::string what = e.what();
    throw remat::chain_error(k, e.field(), what.substr(what.find(": ") + 2));
  }
}

// A stage with its name (a chain keeps the names beside the numbers, as a chain file does).
struct py_stage {
  remat::stage costs;
  std::string name;
};

// One option of a stage (docs/model.md, "Several options per stage"): its values are checked
// with the stage that lists it, whose checks name stages[k].options[o].field.
remat::stage_option make_stage_option(py::handle forward_time, py::handle backward_time,
                                      py::handle tape_size, py::handle forward_overhead,
                                      py::handle backward_overhead) {
  remat::stage_option o;
  o.forward_time = to_time(forward_time, no_stage, "forward_time");
  o.backward_time = to_time(backward_time, no_stage, "backward_time");
  o.tape_size = to_size(tape_size, no_stage, "tape_size");
  o.forward_overhead = to_size(forward_overhead, no_stage, "forward_overhead");
  o.backward_overhead = to_size(backward_overhead, no_stage, "backward_overhead");
  return o;
}

std::string stage_option_repr(const remat::stage_option& o) {
  std::ostringstream out;
  out.precision(17);
  out << "StageOption(forward_time=" << o.forward_time << ", backward_time=" << o.backward_time
      << ", tape_size=" << o.tape_size;
  if (o.forward_overhead != 0) out << ", forward_overhead=" << o.forward_overhead;
  if (o.backward_overhead != 0) out << ", backward_overhead=" << o.backward_overhead;
  out << ")";
  return out.str();
}

py_stage make_stage(py::handle forward_time, py::handle backward_time, py::handle output_size,
                    py::handle tape_size, py::handle forward_overhead,
                    py::handle backward_overhead, py::handle recording_overhead,
                    std::vector<remat::stage_option> options, std::string name, std::size_t k) {
  py_stage s;
  s.costs.forward_time = to_time(forward_time, k, "forward_time");
  s.costs.backward_time = to_time(backward_time, k, "backward_time");
  s.costs.output_size = to_size(output_size, k, "output_size");
  s.costs.tape_size = to_size(tape_size, k, "tape_size");
  s.costs.forward_overhead = to_size(forward_overhead, k, "forward_overhead");
  s.costs.backward_overhead = to_size(backward_overhead, k, "backward_overhead");
  if (!recording_overhead.is_none())
    s.costs.recording_overhead = to_size(recording_overhead, k, "recording_overhead");
  s.costs.options = std::move(options);
  validate_alone(s.costs, {}, k);
  s.name = std::move(name);
  return s;
}

std::string stage_repr(const py_stage& s) {
  std::ostringstream o;
  o.precision(17);
  o << "Stage(";
  if (!s.name.empty()) o << "name=" << std::string(py::repr(py::str(s.name))) << ", ";
  o << "forward_time=" << s.costs.forward_time << ", backward_time=" << s.costs.backward_time
    << ", output_size=" << s.costs.output_size << ", tape_size=" << s.costs.tape_size;
  if (s.costs.forward_overhead != 0) o << ", forward_overhead=" << s.costs.forward_overhead;
  if (s.costs.backward_overhead != 0) o << ", backward_overhead=" << s.costs.backward_overhead;
  if (s.costs.recording_overhead)
    o << ", recording_overhead=" << *s.costs.recording_overhead;
  if (!s.costs.options.empty()) {
    o << ", options=[";
    for (std::size_t p = 0; p < s.costs.options.size(); ++p)
      o << (p == 0 ? "" : ", ") << stage_option_repr(s.costs.options[p]);
    o << "]";
  }
  o << ")";
  return o.str();
}

remat::io::chain_file make_chain(const std::vector<py_stage>& stages, py::handle input_size,
                                 py::handle loss_time, py::handle loss_overhead,
                                 const remat::transfer_rates& transfer, std::string name,
                                 std::string time_unit, std::string memory_unit) {
  remat::io::chain_file f;
  f.chain.input_size = to_size(input_size, no_stage, "input_size");
  f.chain.loss_time = to_time(loss_time, no_stage, "loss.backward_time");
  f.chain.loss_overhead = to_size(loss_overhead, no_stage, "loss.backward_overhead");
  f.chain.transfer = transfer;
  bool named = false;
  for (const py_stage& s : stages) {
    f.chain.stages.push_back(s.costs);
    named = named || !s.name.empty();
  }
  if (named)
    for (const py_stage& s : stages) f.stage_names.push_back(s.name);
  f.name = std::move(name);
  f.time_unit = std::move(time_unit);
  f.memory_unit = std::move(memory_unit);
  remat::validate(f.chain);
  return f;
}

// A chain file as read: the reader gives every stage a name, empty where the file has none; a
// chain without any names keeps none, so that it equals the chain it was written from.
remat::io::chain_file normalized(remat::io::chain_file f) {
  if (std::all_of(f.stage_names.begin(), f.stage_names.end(),
                  [](const std::string& n) { return n.empty(); }))
    f.stage_names.clear();
  return f;
}

remat::transfer_rates make_transfer(py::handle offload, py::handle prefetch) {
  const remat::transfer_rates t{to_time(offload, no_stage, "transfer.offload_bandwidth"),
                                to_time(prefetch, no_stage, "transfer.prefetch_bandwidth")};
  validate_alone({}, t, no_stage);
  return t;
}

// One column of `Chain.from_columns`: a sequence (list, tuple, numpy array) of `n` values, or
// None (every value absent).
std::vector<py::object> column(py::handle values, const char* field, std::size_t n,
                               bool required) {
  std::vector<py::object> out;
  if (values.is_none()) {
    if (required) throw remat::chain_error(no_stage, field, "missing (required)");
    return out;
  }
  if (py::isinstance<py::str>(values) || !py::hasattr(values, "__len__") ||
      !py::hasattr(values, "__iter__"))
    throw remat::chain_error(no_stage, field, "must be a sequence (a list or a numpy array)");
  for (py::handle v : values) out.push_back(py::reinterpret_borrow<py::object>(v));
  if (n != static_cast<std::size_t>(-1) && out.size() != n)
    throw remat::chain_error(no_stage, field,
                             "has " + std::to_string(out.size()) + " values, forward_time has " +
                                 std::to_string(n));
  return out;
}

// One column of `Chain.from_columns` per field, then the stages.
remat::io::chain_file chain_from_columns(
    py::handle input_size, py::handle forward_time, py::handle backward_time,
    py::handle output_size, py::handle tape_size, py::handle forward_overhead,
    py::handle backward_overhead, py::handle recording_overhead, py::handle names,
    py::handle loss_time, py::handle loss_overhead, std::optional<remat::transfer_rates> transfer,
    std::string name, std::string time_unit, std::string memory_unit) {
  const auto fw = column(forward_time, "forward_time", static_cast<std::size_t>(-1), true);
  const std::size_t n = fw.size();
  const auto bw = column(backward_time, "backward_time", n, true);
  const auto out = column(output_size, "output_size", n, true);
  const auto tape = column(tape_size, "tape_size", n, true);
  const auto fo = column(forward_overhead, "forward_overhead", n, false);
  const auto bo = column(backward_overhead, "backward_overhead", n, false);
  const auto ro = column(recording_overhead, "recording_overhead", n, false);
  const auto nm = column(names, "names", n, false);
  std::vector<py_stage> stages;
  const py::int_ zero(0);
  for (std::size_t k = 0; k < n; ++k)
    stages.push_back(make_stage(fw[k], bw[k], out[k], tape[k], fo.empty() ? zero : fo[k],
                                bo.empty() ? zero : bo[k], ro.empty() ? py::none() : ro[k], {},
                                nm.empty() ? "" : py::str(nm[k]).cast<std::string>(), k));
  return make_chain(stages, input_size, loss_time, loss_overhead,
                    transfer.value_or(remat::transfer_rates{}), std::move(name),
                    std::move(time_unit), std::move(memory_unit));
}

void bind_stage(py::module_& m) {
  py::class_<remat::stage_option>(
      m, "StageOption",
      "One way to run a stage's recording forward F_all(k, o) and its backward B(k): their "
      "times and overheads, and the tape it leaves (docs/model.md, options per stage).")
      .def(py::init(&make_stage_option), py::kw_only(), py::arg("forward_time"),
           py::arg("backward_time"), py::arg("tape_size"), py::arg("forward_overhead") = 0,
           py::arg("backward_overhead") = 0)
      .def_readonly("forward_time", &remat::stage_option::forward_time)
      .def_readonly("backward_time", &remat::stage_option::backward_time)
      .def_readonly("tape_size", &remat::stage_option::tape_size)
      .def_readonly("forward_overhead", &remat::stage_option::forward_overhead)
      .def_readonly("backward_overhead", &remat::stage_option::backward_overhead)
      .def("__eq__", [](const remat::stage_option& a,
                        const remat::stage_option& b) { return a == b; })
      .def("__repr__", &stage_option_repr);
  py::class_<py_stage>(m, "Stage", "One stage's costs: times in the chain's time unit, sizes in "
                                   "its memory unit (docs/chain-format.md).")
      .def(py::init([](py::handle forward_time, py::handle backward_time, py::handle output_size,
                       py::handle tape_size, py::handle forward_overhead,
                       py::handle backward_overhead, py::handle recording_overhead,
                       std::vector<remat::stage_option> options, std::string name) {
             return make_stage(forward_time, backward_time, output_size, tape_size,
                               forward_overhead, backward_overhead, recording_overhead,
                               std::move(options), std::move(name), no_stage);
           }),
           py::kw_only(), py::arg("forward_time"), py::arg("backward_time"),
           py::arg("output_size"), py::arg("tape_size"), py::arg("forward_overhead") = 0,
           py::arg("backward_overhead") = 0, py::arg("recording_overhead") = py::none(),
           py::arg("options") = std::vector<remat::stage_option>{}, py::arg("name") = "")
      .def_property_readonly("forward_time", [](const py_stage& s) { return s.costs.forward_time; })
      .def_property_readonly("backward_time",
                             [](const py_stage& s) { return s.costs.backward_time; })
      .def_property_readonly("output_size", [](const py_stage& s) { return s.costs.output_size; })
      .def_property_readonly("tape_size", [](const py_stage& s) { return s.costs.tape_size; })
      .def_property_readonly("forward_overhead",
                             [](const py_stage& s) { return s.costs.forward_overhead; })
      .def_property_readonly("backward_overhead",
                             [](const py_stage& s) { return s.costs.backward_overhead; })
      .def_property_readonly(
          "recording_overhead", [](const py_stage& s) { return s.costs.recording_overhead; },
          "The recording forward's overhead where it differs from forward_overhead, else None.")
      .def_property_readonly(
          "options", [](const py_stage& s) { return s.costs.options; },
          "The stage's options as listed (F_all(k, o) runs options[o]); empty: one option, of "
          "the stage's own fields.")
      .def_property_readonly("name", [](const py_stage& s) { return s.name; })
      .def("__eq__", [](const py_stage& a, const py_stage& b) {
        return a.costs == b.costs && a.name == b.name;
      })
      .def("__repr__", &stage_repr);
}

void bind_transfer(py::module_& m) {
  py::class_<remat::transfer_rates>(m, "Transfer",
                                    "The link to host memory: bandwidths in memory units per time "
                                    "unit, each way (0: that direction is unavailable).")
      .def(py::init(&make_transfer), py::kw_only(), py::arg("offload_bandwidth"),
           py::arg("prefetch_bandwidth"))
      .def_readonly("offload_bandwidth", &remat::transfer_rates::offload_bandwidth)
      .def_readonly("prefetch_bandwidth", &remat::transfer_rates::prefetch_bandwidth)
      .def_property_readonly("available", &remat::transfer_rates::available,
                             "Both directions are available.")
      .def("__eq__", [](const remat::transfer_rates& a, const remat::transfer_rates& b) {
        return a == b;
      })
      .def("__repr__", [](const remat::transfer_rates& t) {
        std::ostringstream o;
        o.precision(17);
        o << "Transfer(offload_bandwidth=" << t.offload_bandwidth
          << ", prefetch_bandwidth=" << t.prefetch_bandwidth << ")";
        return o.str();
      });
}

using chain_class = py::class_<remat::io::chain_file>;

void bind_chain_construction(chain_class& c) {
  c.def(py::init([](const std::vector<py_stage>& stages, py::handle input_size,
                    py::handle loss_time, py::handle loss_overhead,
                    std::optional<remat::transfer_rates> transfer, std::string name,
                    std::string time_unit, std::string memory_unit) {
          return make_chain(stages, input_size, loss_time, loss_overhead,
                            transfer.value_or(remat::transfer_rates{}), std::move(name),
                            std::move(time_unit), std::move(memory_unit));
        }),
        py::arg("stages"), py::kw_only(), py::arg("input_size"), py::arg("loss_time") = 0.0,
        py::arg("loss_overhead") = 0, py::arg("transfer") = py::none(), py::arg("name") = "",
        py::arg("time_unit") = "", py::arg("memory_unit") = "")
      .def_static(
          "from_columns", &chain_from_columns, py::kw_only(), py::arg("input_size"),
          py::arg("forward_time"), py::arg("backward_time"), py::arg("output_size"),
          py::arg("tape_size"), py::arg("forward_overhead") = py::none(),
          py::arg("backward_overhead") = py::none(), py::arg("recording_overhead") = py::none(),
          py::arg("names") = py::none(), py::arg("loss_time") = 0.0, py::arg("loss_overhead") = 0,
          py::arg("transfer") = py::none(), py::arg("name") = "", py::arg("time_unit") = "",
          py::arg("memory_unit") = "",
          "A chain from columns, one value per stage in each (lists, tuples or numpy arrays); "
          "the optional columns may be None (0, or for recording_overhead: the forward's).")
      .def("with_transfer",
           [](const remat::io::chain_file& f, std::optional<remat::transfer_rates> t) {
             remat::io::chain_file out = f;
             out.chain.transfer = t.value_or(remat::transfer_rates{});
             remat::validate(out.chain);
             return out;
           },
           py::arg("transfer"), "A copy of the chain with another link to host memory (None: none).");
}

void bind_chain_fields(chain_class& c) {
  using remat::io::chain_file;
  c.def_property_readonly("stages",
                          [](const chain_file& f) {
                            std::vector<py_stage> out;
                            for (std::size_t k = 0; k < f.chain.stages.size(); ++k)
                              out.push_back({f.chain.stages[k],
                                             f.stage_names.empty() ? "" : f.stage_names[k]});
                            return out;
                          })
      .def_property_readonly("input_size", [](const chain_file& f) { return f.chain.input_size; })
      .def_property_readonly("loss_time", [](const chain_file& f) { return f.chain.loss_time; })
      .def_property_readonly("loss_overhead",
                             [](const chain_file& f) { return f.chain.loss_overhead; })
      .def_property_readonly(
          "transfer",
          [](const chain_file& f) -> std::optional<remat::transfer_rates> {
            const remat::transfer_rates& t = f.chain.transfer;
            if (t.offload_bandwidth > 0 || t.prefetch_bandwidth > 0) return t;
            return std::nullopt;
          },
          "The link to host memory, or None.")
      .def_property_readonly("name", [](const chain_file& f) { return f.name; })
      .def_property_readonly("time_unit", [](const chain_file& f) { return f.time_unit; })
      .def_property_readonly("memory_unit", [](const chain_file& f) { return f.memory_unit; })
      .def("__len__", [](const chain_file& f) { return f.chain.length(); })
      .def("__eq__", [](const chain_file& a, const chain_file& b) { return a == b; })
      .def("__repr__", [](const chain_file& f) {
        std::string s = "Chain(";
        if (!f.name.empty()) s += "name=" + std::string(py::repr(py::str(f.name))) + ", ";
        s += std::to_string(f.chain.length()) + " stages, input_size=" +
             std::to_string(f.chain.input_size) + ")";
        return s;
      });
}

void bind_chain_files(py::module_& m, chain_class& c) {
  using remat::io::chain_file;
  c.def(
       "to_json", [](const chain_file& f) { return remat::io::to_json(f).dump(2) + "\n"; },
       "The chain file's text (docs/chain-format.md).")
      .def_static(
          "from_json",
          [](const std::string& text, const std::string& source) {
            std::istringstream in(text);
            return normalized(remat::io::read_chain(in, source));
          },
          py::arg("text"), py::arg("source") = "<string>",
          "Reads a chain file's text; errors name `source`.")
      .def(
          "write",
          [](const chain_file& f, const std::string& path) { remat::io::write_chain_file(path, f); },
          py::arg("path"), "Writes the chain file at `path` (docs/chain-format.md).");
  m.def(
      "read_chain",
      [](const std::string& path) { return normalized(remat::io::read_chain_file(path)); },
      py::arg("path"),
      "Reads a chain file (docs/chain-format.md); raises ChainFileError naming the file, the "
      "stage and the field.");
}

}  // namespace

void bind_chains(py::module_& m) {
  bind_stage(m);
  bind_transfer(m);
  chain_class c(m, "Chain",
                "A chain of stages followed by a loss (docs/model.md), with its name, stage names "
                "and units as a chain file has them. Validated when made: a bad value raises "
                "ChainError naming the stage and the field.");
  bind_chain_construction(c);
  bind_chain_fields(c);
  bind_chain_files(m, c);
}

}  // namespace remat::python
