// What solve and the pipeline functions share: the parsing of their arguments (solver names,
// budgets, slots, coarsening) and the result a solve returns to Python.
#pragma once

#include "bindings.hpp"

#include <remat/io/size.hpp>
#include <remat/solve.hpp>

#include <cstddef>
#include <stdexcept>
#include <string>

namespace remat::python {

using remat::size_type;

inline remat::solver solver_named(const std::string& n) {
  std::string normalized = n;
  for (char& ch : normalized)
    if (ch == '_') ch = '-';
  if (const auto s = remat::solver_from_name(normalized)) return *s;
  std::string known;
  for (const remat::solver s : remat::all_solvers)
    known += (known.empty() ? "" : ", ") + std::string(remat::name(s));
  throw py::value_error("unknown solver '" + n + "' (known: " + known + ")");
}

inline size_type budget_from(py::handle budget) {
  if (py::isinstance<py::str>(budget)) {
    try {
      return remat::io::parse_size(budget.cast<std::string>());
    } catch (const std::invalid_argument& e) {
      throw py::value_error(std::string("budget ") + e.what());
    }
  }
  if (PyBool_Check(budget.ptr()) || !PyIndex_Check(budget.ptr()))
    throw py::type_error("budget must be an int (bytes, or the chain's memory unit) or a string "
                         "with a unit such as '512MiB'");
  const auto b = py::reinterpret_steal<py::int_>(PyNumber_Index(budget.ptr()));
  int overflow = 0;
  const long long value = PyLong_AsLongLongAndOverflow(b.ptr(), &overflow);
  if (overflow != 0 || value < 0)
    throw py::value_error("budget must be between 0 and 2^63 - 1 (got " +
                          std::string(py::str(py::handle(b))) + ")");
  return static_cast<size_type>(value);
}

inline size_type slots_from(py::handle slots) {
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

inline std::size_t coarsen_from(py::handle coarsen) {
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
  std::size_t in_flight = 1;
};

}  // namespace remat::python
