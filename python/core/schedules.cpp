// Schedules for Python: Op, and the simulator's replay of any op sequence.
#include "bindings.hpp"

#include <remat/io/chain_json.hpp>
#include <remat/io/schedule_json.hpp>
#include <remat/schedule.hpp>
#include <remat/simulate.hpp>

#include <pybind11/stl.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace remat::python {

namespace {

remat::op_kind kind_from_name(const std::string& n) {
  if (const auto kind = remat::op_kind_named(n)) return *kind;
  throw py::value_error("unknown op kind '" + n + "' (known: " + remat::op_kind_names() + ")");
}

remat::op make_op(const std::string& kind, std::int32_t index, std::optional<std::string> tensor,
                  int option) {
  remat::op o{kind_from_name(kind), index};
  const remat::op_rule& r = remat::rule(o.kind);
  if (option != 0 && !r.takes_option)
    throw py::value_error(std::string(remat::name(o.kind)) +
                          " runs no option of its own: only F_all names one (option=0)");
  if (option < 0 || option >= static_cast<int>(remat::max_options))
    throw py::value_error("an option is from 0 to " + std::to_string(remat::max_options - 1) +
                          " (got " + std::to_string(option) + ")");
  o.option = static_cast<std::uint16_t>(option);
  if (r.transfer) {
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
    case replay_error::bad_option: return "bad_option";
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

void bind_op(py::module_& m) {
  py::class_<remat::op>(m, "Op",
                        "One operation of a schedule: F_none(k), F_ck(k), F_all(k), loss, B(k), "
                        "and with offloading O(k,a|t), P(k,a|t), W(k,a|t).")
      .def(py::init(&make_op), py::arg("kind"), py::arg("index"), py::arg("tensor") = py::none(),
           py::kw_only(), py::arg("option") = 0)
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
      .def_property_readonly(
          "option", [](const remat::op& o) { return o.option; },
          "F_all(k, o)'s option o (docs/model.md, options per stage); 0 for every other op: "
          "B(k) runs the option of the tape it consumes.")
      .def_property_readonly("is_transfer",
                             [](const remat::op& o) { return remat::is_transfer(o.kind); })
      .def("__eq__", [](const remat::op& a, const remat::op& b) { return a == b; })
      .def("__hash__",
           [](const remat::op& o) {
             return py::hash(py::make_tuple(static_cast<int>(o.kind), o.stage,
                                            static_cast<int>(o.tensor), o.option));
           })
      .def("__str__", [](const remat::op& o) { return remat::to_string(o); })
      .def("__repr__", [](const remat::op& o) {
        std::string s = "Op('" + std::string(remat::name(o.kind)) + "', " + std::to_string(o.stage);
        if (remat::is_transfer(o.kind))
          s += o.tensor == remat::tensor_kind::tape ? ", 't'" : ", 'a'";
        if (o.option != 0) s += ", option=" + std::to_string(o.option);
        return s + ")";
      });
}

void bind_replay(py::module_& m) {
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
      .def_property_readonly(
          "retained", [](const py_replay& p) { return p.r.retained; },
          "Memory held right before the loss op (0 where the sequence has none).")
      .def_property_readonly("memory_after", [](const py_replay& p) { return p.r.memory_after; })
      .def_property_readonly("op_peak", [](const py_replay& p) { return p.r.op_peak; })
      .def_property_readonly("start", [](const py_replay& p) { return p.r.start; })
      .def_property_readonly("end", [](const py_replay& p) { return p.r.end; })
      .def("fits", [](const py_replay& p, remat::size_type budget) { return p.r.fits(budget); },
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
}

}  // namespace

void bind_schedules(py::module_& m) {
  bind_op(m);
  bind_replay(m);
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
      "schedule_to_json",
      [](py::handle ops) {
        const std::vector<remat::op> list = ops_from(ops);
        return remat::io::to_json(std::span<const remat::op>(list)).dump();
      },
      py::arg("ops"),
      "The ops as remat-solve --json writes them: [{\"op\": \"F_ck\", \"stage\": 0}, ...].");
  // A malformed document is a ValueError naming the op and the field.
  const auto length = [](const remat::io::chain_file& c) {
    return static_cast<std::int32_t>(c.chain.length());
  };
  m.def(
      "schedule_from_json",
      [length](const std::string& text, const remat::io::chain_file& c, const std::string& source) {
        std::istringstream in(text);
        try {
          return remat::io::read_schedule(in, source, length(c));
        } catch (const remat::io::schedule_file_error& e) {
          throw py::value_error(e.what());
        }
      },
      py::arg("text"), py::arg("chain"), py::arg("source") = "<string>",
      "The ops of a JSON array of ops, or of an object with \"ops\" (remat-solve --json's "
      "output), for `chain` (the loss's index is its length). Whether they make a schedule of "
      "the chain is simulate's to say.");
  m.def(
      "read_schedule",
      [length](const std::string& path, const remat::io::chain_file& c) {
        try {
          return remat::io::read_schedule_file(path, length(c));
        } catch (const remat::io::schedule_file_error& e) {
          throw py::value_error(e.what());
        }
      },
      py::arg("path"), py::arg("chain"), "schedule_from_json of the file at `path`.");
}

}  // namespace remat::python
