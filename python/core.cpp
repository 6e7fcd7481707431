// remat._core: the solver side of remat for Python (pybind11). Everything here is a thin layer
// over the C++ library: the results are the library's, converted. Chains are held as
// `remat::io::chain_file` (the numbers, the name, stage names and units), so a chain read from a
// file writes back the same. Errors become Python exceptions deriving from ValueError; the classes
// and their attributes (`stage_index`, `field`, `source`) are set up in remat/__init__.py.
#include "solve_args.hpp"  // remat-solve's SIZE parser (examples/tools), for budgets like "1GB"

#include <remat/io/chain_json.hpp>
#include <remat/solve.hpp>
#include <remat/trade_off.hpp>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace py = pybind11;
using remat::size_type;

namespace {

// The exception classes, created in Python (remat/__init__.py) and registered here once.
struct error_types {
  py::object chain_error, chain_file_error, solver_error;
};
error_types& errors() {
  static error_types* e = new error_types();  // never destroyed: used until the interpreter ends
  return *e;
}

// Raises `type(message)` with the attributes a chain error carries.
void raise_with(const py::object& type, const std::string& message, std::size_t stage_index,
                const std::string& field, const std::string* source) {
  py::object e = type(message);
  e.attr("stage_index") = stage_index == remat::chain_error::no_stage
                              ? py::object(py::none())
                              : py::object(py::int_(stage_index));
  e.attr("field") = field.empty() ? py::object(py::none()) : py::object(py::str(field));
  if (source != nullptr) e.attr("source") = *source;
  PyErr_SetObject(type.ptr(), e.ptr());
}

// A size from Python: an int (or anything with __index__, e.g. numpy.int64), never a float: a
// chain file refuses floats for sizes, and so does this (a float may already have been rounded).
size_type to_size(py::handle v, std::size_t stage, const char* field) {
  if (PyBool_Check(v.ptr()) || !PyIndex_Check(v.ptr()))
    throw remat::chain_error(stage, field,
                             "must be an integer (got " +
                                 std::string(py::str(py::type::handle_of(v).attr("__name__"))) +
                                 " " + std::string(py::repr(v)) + ")");
  const py::int_ i = py::reinterpret_steal<py::int_>(PyNumber_Index(v.ptr()));
  int overflow = 0;
  const long long value = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
  if (overflow != 0)
    throw remat::chain_error(stage, field,
                             std::string(overflow < 0 ? "must be >= 0 (" : "must be <= 2^62 (") +
                                 std::string(py::str(py::handle(i))) + ")");
  return remat::detail::checked_size(static_cast<size_type>(value), stage, field);
}

// A time from Python: any real number (int, float, numpy scalar).
double to_time(py::handle v, std::size_t stage, const char* field) {
  if (PyBool_Check(v.ptr()) || (!PyFloat_Check(v.ptr()) && !PyIndex_Check(v.ptr()) &&
                                !py::hasattr(v, "__float__")))
    throw remat::chain_error(stage, field,
                             "must be a number (got " +
                                 std::string(py::str(py::type::handle_of(v).attr("__name__"))) +
                                 ")");
  const double t = PyFloat_AsDouble(v.ptr());
  if (t == -1.0 && PyErr_Occurred() != nullptr) throw py::error_already_set();
  return remat::detail::checked_time(t, stage, field);
}

constexpr std::size_t no_stage = remat::chain_error::no_stage;

// A stage with its name (a chain keeps the names beside the numbers, as a chain file does).
struct py_stage {
  remat::stage costs;
  std::string name;
};

py_stage make_stage(py::handle forward_time, py::handle backward_time, py::handle output_size,
                    py::handle tape_size, py::handle forward_overhead,
                    py::handle backward_overhead, py::handle recording_overhead,
                    std::string name, std::size_t k) {
  py_stage s;
  s.costs.forward_time = to_time(forward_time, k, "forward_time");
  s.costs.backward_time = to_time(backward_time, k, "backward_time");
  s.costs.output_size = to_size(output_size, k, "output_size");
  s.costs.tape_size = to_size(tape_size, k, "tape_size");
  s.costs.forward_overhead = to_size(forward_overhead, k, "forward_overhead");
  s.costs.backward_overhead = to_size(backward_overhead, k, "backward_overhead");
  if (!recording_overhead.is_none())
    s.costs.recording_overhead = to_size(recording_overhead, k, "recording_overhead");
  if (s.costs.tape_size < s.costs.output_size)
    throw remat::chain_error(k, "tape_size",
                             "must be >= output_size (" + std::to_string(s.costs.tape_size) +
                                 " < " + std::to_string(s.costs.output_size) + ")");
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
  return {to_time(offload, no_stage, "transfer.offload_bandwidth"),
          to_time(prefetch, no_stage, "transfer.prefetch_bandwidth")};
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

// --- operations --------------------------------------------------------------------------------

remat::op_kind kind_from_name(const std::string& n) {
  using remat::op_kind;
  static const std::pair<const char*, op_kind> names[] = {
      {"F_none", op_kind::forward_none}, {"F_ck", op_kind::forward_checkpoint},
      {"F_all", op_kind::forward_all},   {"loss", op_kind::loss},
      {"B", op_kind::backward},          {"O", op_kind::offload},
      {"offload", op_kind::offload},     {"P", op_kind::prefetch},
      {"prefetch", op_kind::prefetch},   {"W", op_kind::wait},
      {"wait", op_kind::wait}};
  for (const auto& [text, k] : names)
    if (n == text) return k;
  throw py::value_error("unknown op kind '" + n +
                        "' (known: F_none, F_ck, F_all, loss, B, O|offload, P|prefetch, W|wait)");
}

remat::op make_op(const std::string& kind, std::int32_t index, std::optional<std::string> tensor) {
  remat::op o{kind_from_name(kind), index};
  if (remat::is_transfer(o.kind)) {
    const std::string t = tensor.value_or("a");
    if (t != "a" && t != "t")
      throw py::value_error("a transfer's tensor is 'a' (activation) or 't' (tape), not '" + t +
                            "'");
    o.tensor = t == "t" ? remat::tensor_kind::tape : remat::tensor_kind::activation;
  } else if (tensor) {
    throw py::value_error(std::string(remat::name(o.kind)) +
                          " is a compute op: it moves no tensor (tensor=None)");
  }
  return o;
}

// --- solve ---------------------------------------------------------------------------------------

remat::solver solver_named(const std::string& n) {
  std::string normalized = n;
  for (char& ch : normalized)
    if (ch == '_') ch = '-';
  if (const auto s = remat::solver_from_name(normalized)) return *s;
  std::string known;
  for (const remat::solver s : remat::all_solvers)
    known += (known.empty() ? "" : ", ") + std::string(remat::name(s));
  throw py::value_error("unknown solver '" + n + "' (known: " + known + ")");
}

size_type budget_from(py::handle budget) {
  if (py::isinstance<py::str>(budget)) {
    try {
      return remat::tools::parse_size(budget.cast<std::string>());
    } catch (const remat::tools::usage_error& e) {
      std::string what = e.what();
      if (what.starts_with("--budget ")) what.erase(0, 9);
      throw py::value_error("budget " + what);
    }
  }
  if (PyBool_Check(budget.ptr()) || !PyIndex_Check(budget.ptr()))
    throw py::type_error("budget must be an int (bytes, or the chain's memory unit) or a string "
                         "with a unit such as '512MiB'");
  const auto b = py::reinterpret_steal<py::int_>(PyNumber_Index(budget.ptr()));
  int overflow = 0;
  const long long value = PyLong_AsLongLongAndOverflow(b.ptr(), &overflow);
  if (overflow != 0 || value < 0)
    throw py::value_error("budget must be between 0 and 2^63 - 1 (got " + std::string(py::str(py::handle(b))) +
                          ")");
  return static_cast<size_type>(value);
}

size_type slots_from(py::handle slots) {
  if (slots.is_none()) return remat::auto_slots;
  if (py::isinstance<py::str>(slots)) {
    const auto s = slots.cast<std::string>();
    if (s == "exact") return remat::exact_units;
    if (s == "auto") return remat::auto_slots;
    throw py::value_error("slots must be None (auto), 'exact' or a positive int, not '" + s + "'");
  }
  if (PyBool_Check(slots.ptr()) || !PyIndex_Check(slots.ptr()))
    throw py::type_error("slots must be None (auto), 'exact' or a positive int");
  const auto n = slots.cast<long long>();
  if (n < 1) throw py::value_error("slots must be a positive int (got " + std::to_string(n) + ")");
  return static_cast<size_type>(n);
}

std::size_t coarsen_from(py::handle coarsen) {
  if (coarsen.is_none()) return remat::no_coarsening;
  if (py::isinstance<py::str>(coarsen)) {
    if (coarsen.cast<std::string>() == "auto") return remat::auto_coarsening;
    throw py::value_error("coarsen must be None, 'auto' or a positive int, not '" +
                          coarsen.cast<std::string>() + "'");
  }
  if (PyBool_Check(coarsen.ptr()) || !PyIndex_Check(coarsen.ptr()))
    throw py::type_error("coarsen must be None, 'auto' or a positive int");
  const auto n = coarsen.cast<long long>();
  if (n < 1) throw py::value_error("coarsen must be a positive int (got " + std::to_string(n) + ")");
  return static_cast<std::size_t>(n);
}

// What `solve` returns: the library's result, with the plan replayed on the chain's own sizes as
// remat-solve reports it (chain-format.md: makespan and peak_memory are the replay's).
struct py_result {
  std::string solver;
  remat::solve_result r;
  remat::replay_result replayed;
};

std::string result_repr(const py_result& p) {
  std::ostringstream o;
  o.precision(17);
  o << "SolveResult(solver='" << p.solver << "', feasible=" << (p.r.feasible ? "True" : "False")
    << ", budget=" << p.r.budget;
  if (p.r.feasible)
    o << ", makespan=" << p.replayed.makespan << ", peak_memory=" << p.replayed.peak_memory
      << ", ops=" << p.r.plan.ops.size();
  else if (p.r.min_feasible_budget != remat::solve_result::no_budget)
    o << ", min_feasible_budget=" << p.r.min_feasible_budget;
  o << ")";
  return o.str();
}

const char* replay_error_name(remat::replay_error e) {
  using remat::replay_error;
  switch (e) {
    case replay_error::none: return "none";
    case replay_error::bad_kind: return "bad_kind";
    case replay_error::bad_stage: return "bad_stage";
    case replay_error::input_missing: return "input_missing";
    case replay_error::output_already_held: return "output_already_held";
    case replay_error::gradient_missing: return "gradient_missing";
    case replay_error::tape_missing: return "tape_missing";
    case replay_error::after_end: return "after_end";
    case replay_error::incomplete: return "incomplete";
    case replay_error::no_bandwidth: return "no_bandwidth";
    case replay_error::not_on_device: return "not_on_device";
    case replay_error::already_on_host: return "already_on_host";
    case replay_error::no_host_copy: return "no_host_copy";
  }
  return "?";
}

struct py_replay {
  remat::replay_result r;
  std::string message;
};

std::vector<remat::op> ops_from(py::handle ops) {
  std::vector<remat::op> out;
  for (py::handle o : ops) {
    if (!py::isinstance<remat::op>(o))
      throw py::type_error("ops must be remat.Op values (got " +
                           std::string(py::str(py::type::handle_of(o).attr("__name__"))) + ")");
    out.push_back(o.cast<remat::op>());
  }
  return out;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "remat's compiled core: chains, solvers, the simulator (see the remat package)";
  m.attr("__version__") = REMAT_VERSION_STRING;

  m.def(
      "_register_errors",
      [](py::object chain_error, py::object chain_file_error, py::object solver_error) {
        errors() = {std::move(chain_error), std::move(chain_file_error), std::move(solver_error)};
      },
      "Called once by remat/__init__.py with its exception classes.");
  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    const error_types& e = errors();
    try {
      std::rethrow_exception(p);
    } catch (const remat::io::chain_file_error& x) {
      raise_with(e.chain_file_error, x.what(), x.stage_index(), x.field(), &x.source());
    } catch (const remat::chain_error& x) {
      raise_with(e.chain_error, x.what(), x.stage_index(), x.field(), nullptr);
    } catch (const remat::solver_error& x) {
      PyErr_SetObject(e.solver_error.ptr(), py::str(x.what()).ptr());
    }
  });

  py::class_<py_stage>(m, "Stage", "One stage's costs: times in the chain's time unit, sizes in "
                                   "its memory unit (docs/chain-format.md).")
      .def(py::init([](py::handle forward_time, py::handle backward_time, py::handle output_size,
                       py::handle tape_size, py::handle forward_overhead,
                       py::handle backward_overhead, py::handle recording_overhead,
                       std::string name) {
             return make_stage(forward_time, backward_time, output_size, tape_size,
                               forward_overhead, backward_overhead, recording_overhead,
                               std::move(name), no_stage);
           }),
           py::kw_only(), py::arg("forward_time"), py::arg("backward_time"),
           py::arg("output_size"), py::arg("tape_size"), py::arg("forward_overhead") = 0,
           py::arg("backward_overhead") = 0, py::arg("recording_overhead") = py::none(),
           py::arg("name") = "")
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
      .def_property_readonly("name", [](const py_stage& s) { return s.name; })
      .def("__eq__", [](const py_stage& a, const py_stage& b) {
        return a.costs == b.costs && a.name == b.name;
      })
      .def("__repr__", &stage_repr);

  py::class_<remat::transfer_rates>(m, "Transfer",
                                    "The link to host memory: bandwidths in memory units per time "
                                    "unit, each way (0: that direction is unavailable).")
      .def(py::init([](py::handle offload, py::handle prefetch) {
             return make_transfer(offload, prefetch);
           }),
           py::kw_only(), py::arg("offload_bandwidth"), py::arg("prefetch_bandwidth"))
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

  py::class_<remat::io::chain_file>(m, "Chain",
                                    "A chain of stages followed by a loss (docs/model.md), with "
                                    "its name, stage names and units as a chain file has them. "
                                    "Validated when made: a bad value raises ChainError naming "
                                    "the stage and the field.")
      .def(py::init([](const std::vector<py_stage>& stages, py::handle input_size,
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
          "from_columns",
          [](py::handle input_size, py::handle forward_time, py::handle backward_time,
             py::handle output_size, py::handle tape_size, py::handle forward_overhead,
             py::handle backward_overhead, py::handle recording_overhead, py::handle names,
             py::handle loss_time, py::handle loss_overhead,
             std::optional<remat::transfer_rates> transfer, std::string name,
             std::string time_unit, std::string memory_unit) {
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
                                          bo.empty() ? zero : bo[k],
                                          ro.empty() ? py::none() : ro[k],
                                          nm.empty() ? "" : py::str(nm[k]).cast<std::string>(),
                                          k));
            return make_chain(stages, input_size, loss_time, loss_overhead,
                              transfer.value_or(remat::transfer_rates{}), std::move(name),
                              std::move(time_unit), std::move(memory_unit));
          },
          py::kw_only(), py::arg("input_size"), py::arg("forward_time"),
          py::arg("backward_time"), py::arg("output_size"), py::arg("tape_size"),
          py::arg("forward_overhead") = py::none(), py::arg("backward_overhead") = py::none(),
          py::arg("recording_overhead") = py::none(), py::arg("names") = py::none(),
          py::arg("loss_time") = 0.0, py::arg("loss_overhead") = 0,
          py::arg("transfer") = py::none(), py::arg("name") = "", py::arg("time_unit") = "",
          py::arg("memory_unit") = "",
          "A chain from columns, one value per stage in each (lists, tuples or numpy arrays); "
          "the optional columns may be None (0, or for recording_overhead: the forward's).")
      .def_property_readonly(
          "stages",
          [](const remat::io::chain_file& f) {
            std::vector<py_stage> out;
            for (std::size_t k = 0; k < f.chain.stages.size(); ++k)
              out.push_back({f.chain.stages[k], f.stage_names.empty() ? "" : f.stage_names[k]});
            return out;
          })
      .def_property_readonly("input_size",
                             [](const remat::io::chain_file& f) { return f.chain.input_size; })
      .def_property_readonly("loss_time",
                             [](const remat::io::chain_file& f) { return f.chain.loss_time; })
      .def_property_readonly("loss_overhead",
                             [](const remat::io::chain_file& f) { return f.chain.loss_overhead; })
      .def_property_readonly(
          "transfer",
          [](const remat::io::chain_file& f) -> std::optional<remat::transfer_rates> {
            const remat::transfer_rates& t = f.chain.transfer;
            if (t.offload_bandwidth > 0 || t.prefetch_bandwidth > 0) return t;
            return std::nullopt;
          },
          "The link to host memory, or None.")
      .def_property_readonly("name", [](const remat::io::chain_file& f) { return f.name; })
      .def_property_readonly("time_unit",
                             [](const remat::io::chain_file& f) { return f.time_unit; })
      .def_property_readonly("memory_unit",
                             [](const remat::io::chain_file& f) { return f.memory_unit; })
      .def("__len__", [](const remat::io::chain_file& f) { return f.chain.length(); })
      .def("with_transfer",
           [](const remat::io::chain_file& f, std::optional<remat::transfer_rates> t) {
             remat::io::chain_file out = f;
             out.chain.transfer = t.value_or(remat::transfer_rates{});
             remat::validate(out.chain);
             return out;
           },
           py::arg("transfer"), "A copy of the chain with another link to host memory (None: none).")
      .def(
          "to_json", [](const remat::io::chain_file& f) { return remat::io::to_json(f).dump(2) + "\n"; },
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
          [](const remat::io::chain_file& f, const std::string& path) {
            remat::io::write_chain_file(path, f);
          },
          py::arg("path"), "Writes the chain file at `path` (docs/chain-format.md).")
      .def("__eq__", [](const remat::io::chain_file& a, const remat::io::chain_file& b) {
        return a == b;
      })
      .def("__repr__", [](const remat::io::chain_file& f) {
        std::string s = "Chain(";
        if (!f.name.empty()) s += "name=" + std::string(py::repr(py::str(f.name))) + ", ";
        s += std::to_string(f.chain.length()) + " stages, input_size=" +
             std::to_string(f.chain.input_size) + ")";
        return s;
      });

  m.def(
      "read_chain",
      [](const std::string& path) { return normalized(remat::io::read_chain_file(path)); },
      py::arg("path"),
      "Reads a chain file (docs/chain-format.md); raises ChainFileError naming the file, the "
      "stage and the field.");

  py::class_<remat::op>(m, "Op",
                        "One operation of a schedule: F_none(k), F_ck(k), F_all(k), loss, B(k), "
                        "and with offloading O(k,a|t), P(k,a|t), W(k,a|t).")
      .def(py::init(&make_op), py::arg("kind"), py::arg("index"), py::arg("tensor") = py::none())
      .def_property_readonly(
          "kind", [](const remat::op& o) { return std::string(remat::name(o.kind)); },
          "F_none, F_ck, F_all, loss, B, O, P or W.")
      .def_property_readonly(
          "index", [](const remat::op& o) { return o.stage; },
          "The stage k (the loss: the chain's length; a transfer: k of a_k or t_k).")
      .def_property_readonly(
          "tensor",
          [](const remat::op& o) -> std::optional<std::string> {
            if (!remat::is_transfer(o.kind)) return std::nullopt;
            return o.tensor == remat::tensor_kind::tape ? "t" : "a";
          },
          "'a' or 't' for a transfer, None for a compute op.")
      .def_property_readonly("is_transfer",
                             [](const remat::op& o) { return remat::is_transfer(o.kind); })
      .def("__eq__", [](const remat::op& a, const remat::op& b) { return a == b; })
      .def("__hash__",
           [](const remat::op& o) {
             return py::hash(py::make_tuple(static_cast<int>(o.kind), o.stage,
                                            static_cast<int>(o.tensor)));
           })
      .def("__str__", [](const remat::op& o) { return remat::to_string(o); })
      .def("__repr__", [](const remat::op& o) {
        std::string s = "Op('" + std::string(remat::name(o.kind)) + "', " + std::to_string(o.stage);
        if (remat::is_transfer(o.kind))
          s += o.tensor == remat::tensor_kind::tape ? ", 't'" : ", 'a'";
        return s + ")";
      });

  py::class_<py_result>(m, "SolveResult", "What `solve` found for one budget.")
      .def_property_readonly("solver", [](const py_result& p) { return p.solver; })
      .def_property_readonly("feasible", [](const py_result& p) { return p.r.feasible; })
      .def_property_readonly("budget", [](const py_result& p) { return p.r.budget; })
      .def_property_readonly(
          "makespan",
          [](const py_result& p) -> std::optional<double> {
            if (!p.r.feasible) return std::nullopt;
            return p.replayed.makespan;
          },
          "The schedule's time, replayed on the chain's own sizes; None when nothing fits.")
      .def_property_readonly(
          "peak_memory",
          [](const py_result& p) -> std::optional<size_type> {
            if (!p.r.feasible) return std::nullopt;
            return p.replayed.peak_memory;
          },
          "The schedule's peak, replayed on the chain's own sizes; None when nothing fits.")
      .def_property_readonly(
          "min_feasible_budget",
          [](const py_result& p) -> std::optional<size_type> {
            if (p.r.min_feasible_budget == remat::solve_result::no_budget) return std::nullopt;
            return p.r.min_feasible_budget;
          },
          "The least budget at which this solver, with these options, finds a schedule; None "
          "when none does (too few slots).")
      .def_property_readonly("ops", [](const py_result& p) { return p.r.plan.ops; })
      .def_property_readonly(
          "predicted_makespan", [](const py_result& p) { return p.r.plan.makespan; },
          "The makespan the solver computed (equal to `makespan` up to rounding).")
      .def_property_readonly("unit", [](const py_result& p) { return p.r.unit; })
      .def_property_readonly("exact", [](const py_result& p) { return p.r.exact; })
      .def_property_readonly("memory_loss", [](const py_result& p) { return p.r.memory_loss; })
      .def_property_readonly("makespan_loss", [](const py_result& p) { return p.r.makespan_loss; })
      .def_property_readonly("coarse_length",
                             [](const py_result& p) { return p.r.coarse_length; })
      .def_property_readonly("largest_block",
                             [](const py_result& p) { return p.r.largest_block; })
      .def("__bool__", [](const py_result& p) { return p.r.feasible; })
      .def("__repr__", &result_repr);

  m.def(
      "solve",
      [](const remat::io::chain_file& c, py::handle budget, const std::string& solver,
         py::handle slots, py::handle coarsen, unsigned threads) {
        remat::solve_options options;
        options.solver = solver_named(solver);
        options.slots = slots_from(slots);
        options.coarsen = coarsen_from(coarsen);
        options.threads = threads;
        const size_type b = budget_from(budget);
        py_result out;
        out.solver = std::string(remat::name(options.solver));
        {
          const py::gil_scoped_release no_gil;  // pure: other Python threads may run
          out.r = remat::solve(c.chain, b, options);
          if (out.r.feasible) out.replayed = remat::simulate(c.chain, out.r.plan);
        }
        return out;
      },
      py::arg("chain"), py::arg("budget"), py::arg("solver") = "optimal",
      py::arg("slots") = py::none(), py::arg("coarsen") = py::none(), py::arg("threads") = 1,
      "The fastest schedule of `solver` within `budget` (an int in the chain's memory unit, or "
      "a string such as '512MiB'). slots: None (auto), 'exact' or N; coarsen: None, 'auto' or "
      "N. An infeasible budget is a result (feasible is False, min_feasible_budget says what "
      "fits); a request the solver cannot honour raises SolverError.");

  py::class_<py_replay>(m, "ReplayResult",
                        "What replaying an op sequence found (the simulator, docs/model.md and "
                        "docs/offload.md).")
      .def_property_readonly("valid", [](const py_replay& p) { return p.r.valid(); })
      .def_property_readonly(
          "error",
          [](const py_replay& p) -> std::optional<std::string> {
            if (p.r.valid()) return std::nullopt;
            return replay_error_name(p.r.error);
          },
          "None for a valid schedule, else why the first invalid op cannot run.")
      .def_property_readonly(
          "message", [](const py_replay& p) { return p.message; },
          "One line: 'valid', or e.g. 'op 5 (B(2)): needs t_3, which is not held'.")
      .def_property_readonly("first_invalid",
                             [](const py_replay& p) -> std::optional<std::size_t> {
                               if (p.r.valid()) return std::nullopt;
                               return p.r.first_invalid;
                             })
      .def_property_readonly("makespan", [](const py_replay& p) { return p.r.makespan; })
      .def_property_readonly("peak_memory", [](const py_replay& p) { return p.r.peak_memory; })
      .def_property_readonly("memory_after", [](const py_replay& p) { return p.r.memory_after; })
      .def_property_readonly("op_peak", [](const py_replay& p) { return p.r.op_peak; })
      .def_property_readonly("start", [](const py_replay& p) { return p.r.start; })
      .def_property_readonly("end", [](const py_replay& p) { return p.r.end; })
      .def("fits", [](const py_replay& p, size_type budget) { return p.r.fits(budget); },
           py::arg("budget"))
      .def("__bool__", [](const py_replay& p) { return p.r.valid(); })
      .def("__repr__", [](const py_replay& p) {
        std::ostringstream o;
        o.precision(17);
        if (!p.r.valid()) return "ReplayResult(invalid: " + p.message + ")";
        o << "ReplayResult(makespan=" << p.r.makespan << ", peak_memory=" << p.r.peak_memory
          << ")";
        return o.str();
      });

  m.def(
      "simulate",
      [](const remat::io::chain_file& c, py::handle ops) {
        const std::vector<remat::op> list = ops_from(ops);
        py_replay out;
        out.r = remat::simulate(c.chain, std::span<const remat::op>(list));
        out.message = remat::describe(out.r, list);
        return out;
      },
      py::arg("chain"), py::arg("ops"),
      "Replays any op sequence on the chain: validity, makespan, peak, per-op memory and times.");

  m.def(
      "trade_off",
      [](const remat::io::chain_file& c, const std::string& solver) {
        remat::solve_options options;
        options.solver = solver_named(solver);
        std::vector<std::pair<size_type, double>> out;
        remat::trade_off_result t;
        {
          const py::gil_scoped_release no_gil;
          t = remat::trade_off(c.chain, options);
        }
        for (const remat::trade_off_point& p : t.points) out.emplace_back(p.budget, p.makespan);
        return out;
      },
      py::arg("chain"), py::arg("solver") = "optimal",
      "The exact trade-off curve of `optimal` (or `checkpoint-only`): (budget, makespan) pairs, "
      "increasing budgets and decreasing makespans, from the least feasible budget to the "
      "fastest schedule's peak.");

  m.def(
      "solvers",
      [] {
        std::vector<std::string> out;
        for (const remat::solver s : remat::all_solvers) out.emplace_back(remat::name(s));
        return out;
      },
      "The solvers' names, in the order remat-solve lists them.");
  m.def(
      "needs_link", [](const std::string& solver) { return remat::needs_link(solver_named(solver)); },
      py::arg("solver"), "Whether the solver needs the chain's link to host memory.");
}
