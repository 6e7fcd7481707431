// remat._core, the solver side of remat for Python (pybind11), bound by concern: each file
// binds one part of the library into the module (module.cpp calls them in order). Everything
// is a thin layer over the C++ library: the results are the library's, converted.
#pragma once

#include <pybind11/pybind11.h>

namespace remat::python {

namespace py = pybind11;

/// ChainError, ChainFileError, SolverError and GraphError (classes made in remat/__init__.py) and the
/// translation of the library's exceptions into them.
void bind_errors(py::module_& m);
/// Stage, Transfer, Chain (as `remat::io::chain_file`: numbers, names, units) and read_chain.
void bind_chains(py::module_& m);
/// Op, ReplayResult and simulate.
void bind_schedules(py::module_& m);
/// SolveResult, solve, trade_off, solvers and needs_link.
void bind_solve(py::module_& m);
/// PipelineStage, PipelineResult, micro_batches_in_flight, stage_chain, equal_starts,
/// split_pipeline, solve_pipeline and checkpoint_every_stage.
void bind_pipeline(py::module_& m);
/// Graph, GraphValue, GraphNode, GraphBlock, Linearization, linearize and parse_size.
void bind_graphs(py::module_& m);

}  // namespace remat::python
