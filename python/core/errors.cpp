// The library's exceptions as Python's: chain_error (and a chain file's) as ChainError with the
// stage and the field, solver_error as SolverError, graph_error as GraphError with the node and
// the value.
#include "bindings.hpp"

#include <remat/graph.hpp>
#include <remat/io/chain_json.hpp>
#include <remat/solve.hpp>

#include <cstddef>
#include <exception>
#include <string>
#include <utility>

namespace remat::python {

namespace {

// The exception classes, created in Python (remat/__init__.py) and registered here once.
struct error_types {
  py::object chain_error, chain_file_error, solver_error, graph_error;
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

void translate(std::exception_ptr p) {
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
  } catch (const remat::graph_error& x) {
    py::object err = e.graph_error(x.what());
    const auto index = [](std::size_t i) {
      return i == remat::graph_error::none ? py::object(py::none()) : py::object(py::int_(i));
    };
    err.attr("node") = index(x.node());
    err.attr("value") = index(x.value());
    PyErr_SetObject(e.graph_error.ptr(), err.ptr());
  }
}

}  // namespace

void bind_errors(py::module_& m) {
  m.def(
      "_register_errors",
      [](py::object chain_error, py::object chain_file_error, py::object solver_error,
         py::object graph_error) {
        errors() = {std::move(chain_error), std::move(chain_file_error), std::move(solver_error),
                    std::move(graph_error)};
      },
      "Called once by remat/__init__.py with its exception classes.");
  py::register_exception_translator(&translate);
}

}  // namespace remat::python
