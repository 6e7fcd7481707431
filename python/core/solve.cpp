// Solving for Python: solve (with the plan replayed on the chain's own sizes, as remat-solve
// reports it), the trade-off curve, and the solvers' names.
#include "bindings.hpp"
#include "solve_args.hpp"

#include <remat/io/chain_json.hpp>
#include <remat/io/size.hpp>
#include <remat/solve.hpp>
#include <remat/trade_off.hpp>

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

std::string result_repr(const py_result& p) {
  std::ostringstream o;
  o.precision(17);
  o << "SolveResult(solver='" << p.solver << "', feasible=" << (p.r.feasible ? "True" : "False")
    << ", budget=" << p.r.budget;
  if (p.r.feasible)
    o << ", makespan=" << p.replayed.makespan << ", peak_memory=" << p.replayed.peak_memory
      << ", retained=" << p.replayed.retained << ", ops=" << p.r.schedule.ops.size();
  else if (p.r.min_feasible_budget != remat::solve_result::no_budget)
    o << ", min_feasible_budget=" << p.r.min_feasible_budget;
  if (p.in_flight > 1) o << ", in_flight=" << p.in_flight;
  o << ")";
  return o.str();
}

void bind_result(py::module_& m) {
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
      .def_property_readonly(
          "retained",
          [](const py_result& p) -> std::optional<size_type> {
            if (!p.r.feasible) return std::nullopt;
            return p.replayed.retained;
          },
          "The memory the schedule holds right before the loss (what each other micro-batch in "
          "flight holds meanwhile); None when nothing fits.")
      .def_property_readonly("in_flight", [](const py_result& p) { return p.in_flight; })
      .def_property_readonly("ops", [](const py_result& p) { return p.r.schedule.ops; })
      .def_property_readonly(
          "predicted_makespan", [](const py_result& p) { return p.r.schedule.makespan; },
          "The makespan the solver computed (equal to `makespan` up to rounding).")
      .def_property_readonly("unit", [](const py_result& p) { return p.r.unit; })
      .def_property_readonly("exact", [](const py_result& p) { return p.r.exact; })
      .def_property_readonly("memory_loss", [](const py_result& p) { return p.r.memory_loss; })
      .def_property_readonly("makespan_loss", [](const py_result& p) { return p.r.makespan_loss; })
      .def_property_readonly("coarse_length", [](const py_result& p) { return p.r.coarse_length; })
      .def_property_readonly("largest_block", [](const py_result& p) { return p.r.largest_block; })
      .def("__bool__", [](const py_result& p) { return p.r.feasible; })
      .def("__repr__", &result_repr);
}

py_result solve_one(const remat::io::chain_file& c, py::handle budget, const std::string& solver,
                    py::handle slots, py::handle coarsen, unsigned threads,
                    py::handle in_flight) {
  remat::solve_options options;
  if (PyBool_Check(in_flight.ptr()) || !PyIndex_Check(in_flight.ptr()))
    throw py::type_error("in_flight must be a positive int");
  const auto k = in_flight.cast<long long>();
  if (k < 1) throw py::value_error("in_flight must be >= 1 (got " + std::to_string(k) + ")");
  options.in_flight = static_cast<std::size_t>(k);
  options.solver = solver_named(solver);
  options.slots = slots_from(slots);
  options.coarsen = coarsen_from(coarsen);
  options.threads = threads;
  const size_type b = budget_from(budget);
  py_result out;
  out.solver = std::string(remat::name(options.solver));
  out.in_flight = options.in_flight;
  {
    const py::gil_scoped_release no_gil;  // pure: other Python threads may run
    out.r = remat::solve(c.chain, b, options);
    if (out.r.feasible) out.replayed = remat::simulate(c.chain, out.r.schedule);
  }
  return out;
}

std::vector<std::pair<size_type, double>> trade_off_of(const remat::io::chain_file& c,
                                                        const std::string& solver) {
  remat::solve_options options;
  options.solver = solver_named(solver);
  remat::trade_off_result t;
  {
    const py::gil_scoped_release no_gil;
    t = remat::trade_off(c.chain, options);
  }
  std::vector<std::pair<size_type, double>> out;
  for (const remat::trade_off_point& p : t.points) out.emplace_back(p.budget, p.makespan);
  return out;
}

}  // namespace

void bind_solve(py::module_& m) {
  bind_result(m);
  m.def("solve", &solve_one, py::arg("chain"), py::arg("budget"), py::arg("solver") = "optimal",
        py::arg("slots") = py::none(), py::arg("coarsen") = py::none(), py::arg("threads") = 1,
        py::arg("in_flight") = 1,
        "The fastest schedule of `solver` within `budget` (an int in the chain's memory unit, or "
        "a string such as '512MiB'). slots: None (auto), 'exact' or N; coarsen: None, 'auto' or "
        "N; in_flight: K micro-batches in flight (a pipeline stage), the schedule keeping "
        "peak_memory + (K - 1) * retained <= budget. An infeasible budget is a result (feasible is False, min_feasible_budget says what "
        "fits); a request the solver cannot honour raises SolverError.");
  m.def("trade_off", &trade_off_of, py::arg("chain"), py::arg("solver") = "optimal",
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

}  // namespace remat::python
