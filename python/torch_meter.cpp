// remat._torch: what remat.torch (Python) needs from remat::torch (C++) that Python's torch does
// not give: the exact meter of libtorch's CPU allocator (remat/torch/memory.hpp), and the CPU
// generator's state saved and put back without allocating a tensor (torch.get_rng_state()
// allocates one, which the meter would count inside the ops it measures).
//
// It links against the libtorch that Python's torch loads (checked at configure time: the same
// libc10 and libtorch_cpu), so the allocator it installs is the one every CPU tensor Python makes
// goes through. `import torch` must come first (remat.torch does it).
//
// And the prediction a profile makes of a schedule's op peaks (remat::torch::expected_op_peaks),
// on a chain and ops of remat._core (the same C++ types, shared through pybind11's registry, so
// remat must be imported first: remat.torch imports it).
#include <remat/io/chain_json.hpp>
#include <remat/torch/detail/rng.hpp>
#include <remat/torch/memory.hpp>
#include <remat/torch/profile.hpp>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <utility>
#include <vector>

namespace py = pybind11;

PYBIND11_MODULE(_torch, m) {
  m.doc() = "remat::torch's CPU allocation meter and generator state, for remat.torch";

  m.def(
      "cpu_current", [] { return remat::torch::cpu_memory().current(); },
      "Bytes held now by tensors libtorch's CPU allocator gave out since the meter was "
      "installed (the first call of any cpu_* function).");
  m.def(
      "cpu_peak", [] { return remat::torch::cpu_memory().peak(); },
      "The most held since the last cpu_reset_peak.");
  m.def(
      "cpu_reset_peak", [] { remat::torch::cpu_memory().reset_peak(); },
      "Makes the peak what is held now.");

  py::class_<remat::torch::detail::rng_state>(
      m, "RngState", "The CPU generator's state (what dropout draws from), held without a tensor.");
  m.def("save_cpu_rng", &remat::torch::detail::save_rng);
  m.def("restore_cpu_rng", &remat::torch::detail::restore_rng, py::arg("state"));

  m.def(
      "expected_op_peaks",
      [](const remat::io::chain_file& chain, const std::vector<remat::op>& ops,
         std::vector<remat::size_type> backward_slack) {
        remat::torch::profiled_chain p;
        p.chain = chain.chain;
        p.backward_slack = std::move(backward_slack);
        return remat::torch::expected_op_peaks(p, ops);
      },
      py::arg("chain"), py::arg("ops"), py::arg("backward_slack"),
      "What running `ops` allocates at each op, by a profile (remat::torch::expected_op_peaks): "
      "the simulator's op peaks on the profiled chain, less the backward slack (per stage, the "
      "loss last) on each B and on the loss. ValueError for an invalid schedule.");
}
