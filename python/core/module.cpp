// remat._core: chains, solvers, the simulator, graphs and their linearization. Chains are held as `remat::io::chain_file`, so a
// chain read from a file writes back the same. Errors become Python exceptions deriving from
// ValueError; their classes and attributes (`stage_index`, `field`, `source`) are set up in
// remat/__init__.py.
#include "bindings.hpp"

#include <remat/version.hpp>

PYBIND11_MODULE(_core, m) {
  m.doc() = "remat's compiled core: chains, solvers, the simulator, graphs (see the remat package)";
  m.attr("__version__") = REMAT_VERSION_STRING;
  remat::python::bind_errors(m);
  remat::python::bind_chains(m);
  remat::python::bind_schedules(m);
  remat::python::bind_solve(m);
  remat::python::bind_pipeline(m);
  remat::python::bind_graphs(m);
}
