// remat._torch: what remat.torch (Python) needs from remat::torch (C++) that Python's torch does
// not give: the exact meter of libtorch's CPU allocator (remat/torch/memory.hpp), and the CPU
// generator's state saved and put back without allocating a tensor (torch.get_rng_state()
// allocates one, which the meter would count inside the ops it measures); and remat::torch's
// profile of stages and its prediction of a schedule's op peaks, so that Python runs the same
// measure as C++ rather than a copy of it.
//
// It links against the libtorch that Python's torch loads (checked at configure time: the same
// libc10 and libtorch_cpu), and against that torch's libtorch_python for tensors passed both
// ways, so the allocator it installs is the one every CPU tensor Python makes goes through.
// `import torch` must come first, and `import remat` (whose Chain and Op the same C++ types,
// shared through pybind11's registry): remat.torch does both.
#include <remat/chain.hpp>
#include <remat/io/chain_json.hpp>
#include <remat/op_table.hpp>
#include <remat/torch/detail/rng.hpp>
#include <remat/torch/memory.hpp>
#include <remat/torch/profile.hpp>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/csrc/utils/pybind.h>  // at::Tensor <-> torch.Tensor

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_set>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace {

using remat::size_type;

// The profile runs without the GIL (libtorch's autograd engine refuses to run with it held), and
// what it calls back in Python takes it. The Python objects are borrowed (py::handle: copies
// touch no reference count, which needs the GIL); the caller's arguments keep them alive.

// A meter kept in Python (remat.torch's torch.cuda statistics), called back.
class python_meter final : public remat::torch::memory_meter {
 public:
  explicit python_meter(py::handle meter) : meter_(meter) {}
  [[nodiscard]] size_type current() const override {
    const py::gil_scoped_acquire gil;
    return meter_.attr("current")().cast<size_type>();
  }
  [[nodiscard]] size_type peak() const override {
    const py::gil_scoped_acquire gil;
    return meter_.attr("peak")().cast<size_type>();
  }
  void reset_peak() override {
    const py::gil_scoped_acquire gil;
    meter_.attr("reset_peak")();
  }

 private:
  py::handle meter_;
};

// A Python callable `tensor -> tensor` (a stage, the loss) as a C++ one.
std::function<at::Tensor(const at::Tensor&)> calling(py::handle f) {
  return [f](const at::Tensor& x) {
    const py::gil_scoped_acquire gil;
    return f(x).cast<at::Tensor>();
  };
}

// remat::torch::profile of Python stages: the chain's fields and the profile's slack, for
// remat.torch to make its Chain from.
py::dict profile(const py::list& forwards, const std::vector<std::vector<at::Tensor>>& parameters,
                 const std::vector<std::vector<at::Tensor>>& buffers, const at::Tensor& sample,
                 py::handle loss, py::handle meter, int warmup, int runs) {
  std::vector<remat::torch::stage> stages;
  for (std::size_t k = 0; k < forwards.size(); ++k)
    stages.emplace_back(calling(forwards[k]), nullptr, parameters.at(k), buffers.at(k));
  std::optional<python_meter> own;
  remat::torch::profile_options options{.warmup = warmup, .runs = runs};
  if (!meter.is_none()) options.memory = &own.emplace(meter);
  remat::torch::profiled_chain p;
  {
    const py::gil_scoped_release no_gil;
    p = remat::torch::profile(stages, sample, calling(loss), options);
  }
  py::list out;
  for (const remat::stage& st : p.chain.stages)
    out.append(py::dict(py::arg("forward_time") = st.forward_time,
                        py::arg("backward_time") = st.backward_time,
                        py::arg("output_size") = st.output_size,
                        py::arg("tape_size") = st.tape_size,
                        py::arg("forward_overhead") = st.forward_overhead,
                        py::arg("backward_overhead") = st.backward_overhead,
                        py::arg("recording_overhead") = st.recording_overhead));
  return py::dict(py::arg("stages") = out, py::arg("input_size") = p.chain.input_size,
                  py::arg("loss_time") = p.chain.loss_time,
                  py::arg("loss_overhead") = p.chain.loss_overhead,
                  py::arg("backward_slack") = p.backward_slack);
}

// The chain of profile()'s fields, and ops as (kind, index, tensor) triples: plain Python data,
// so that remat._core's types need not be shared (its pybind11 and libtorch's bundled one, which
// this module is compiled with where libtorch ships it, keep separate type registries).
remat::chain chain_of(const py::dict& d) {
  remat::chain c;
  c.input_size = d["input_size"].cast<size_type>();
  c.loss_time = d["loss_time"].cast<double>();
  c.loss_overhead = d["loss_overhead"].cast<size_type>();
  for (const py::handle st : d["stages"].cast<py::list>()) {
    const py::dict s = st.cast<py::dict>();
    remat::stage x;
    x.forward_time = s["forward_time"].cast<double>();
    x.backward_time = s["backward_time"].cast<double>();
    x.output_size = s["output_size"].cast<size_type>();
    x.tape_size = s["tape_size"].cast<size_type>();
    x.forward_overhead = s["forward_overhead"].cast<size_type>();
    x.backward_overhead = s["backward_overhead"].cast<size_type>();
    x.recording_overhead = s["recording_overhead"].cast<std::optional<size_type>>();
    c.stages.push_back(x);
  }
  return c;
}

std::vector<remat::op> ops_of(const py::list& ops) {
  std::vector<remat::op> out;
  for (const py::handle item : ops) {
    const auto [kind, index, tensor] =
        item.cast<std::tuple<std::string, std::int32_t, std::optional<std::string>>>();
    remat::op o{remat::op_kind::loss, index};
    bool known = false;
    for (const remat::op_rule& r : remat::op_table)
      if (remat::name(r.kind) == kind) {
        o.kind = r.kind;
        known = true;
      }
    if (!known) throw py::value_error("expected_op_peaks: no op kind is called '" + kind + "'");
    if (tensor == "t") o.tensor = remat::tensor_kind::tape;
    out.push_back(o);
  }
  return out;
}

std::vector<size_type> expected_op_peaks(const py::dict& chain, const py::list& ops,
                                         std::vector<size_type> backward_slack) {
  remat::torch::profiled_chain p;
  p.chain = chain_of(chain);
  remat::validate(p.chain);
  p.backward_slack = std::move(backward_slack);
  try {
    return remat::torch::expected_op_peaks(p, ops_of(ops));
  } catch (const std::invalid_argument& e) {
    throw py::value_error(e.what());
  }
}

// remat.torch's measure of a backward op through which parameters without a gradient get one.
// Autograd gives such a parameter the gradient its backward computed, which the parameter then
// keeps: outside the budget, so from that moment the op is measured above it, and what the op
// reached before is kept as `earlier` (Checkpointed._measure takes the larger). Hooks on the
// parameters' AccumulateGrad nodes, in C++: a Python hook per parameter and a walk of the graph
// in Python cost a step of ResNet-18 about a millisecond.
class new_gradients {
 public:
  // meter: None for the CPU meter, else remat.torch's meter object (sync, peak, reset_peak).
  explicit new_gradients(py::object meter) : meter_(std::move(meter)) {}
  new_gradients(const new_gradients&) = delete;
  new_gradients& operator=(const new_gradients&) = delete;
  ~new_gradients() { unwatch(); }

  // Hooks the accumulators of y's graph (but x's) whose variable has no gradient; the op is
  // measured above `base` bytes.
  void watch(const at::Tensor& y, const at::Tensor& x, size_type base) {
    unwatch();
    base_ = base;
    earlier_.reset();
    node_ptr root = y.grad_fn();
    if (!root) return;
    std::vector<node_ptr> stack{std::move(root)};
    std::unordered_set<torch::autograd::Node*> seen;
    while (!stack.empty()) {
      node_ptr node = std::move(stack.back());
      stack.pop_back();
      if (!seen.insert(node.get()).second) continue;
      if (auto* acc = dynamic_cast<torch::autograd::AccumulateGrad*>(node.get())) {
        const at::Tensor& v = acc->variable;
        if (v.unsafeGetTensorImpl() != x.unsafeGetTensorImpl() && !v.grad().defined()) {
          auto h = std::make_unique<hook>(this, v);
          hooks_.emplace_back(node, h.get());
          acc->add_pre_hook(std::move(h));
        }
        continue;
      }
      for (const torch::autograd::Edge& e : node->next_edges())
        if (e.function) stack.push_back(e.function);
    }
  }

  // Removes the hooks; (base, earlier): the base the op ended above, and its peak above the
  // base of the moment before the latest new gradient (None if none came).
  std::pair<size_type, std::optional<size_type>> unwatch() {
    for (auto& [node, h] : hooks_) {
      auto& pre = node->pre_hooks();
      for (auto it = pre.begin(); it != pre.end(); ++it)
        if (it->get() == h) {
          pre.erase(it);
          break;
        }
    }
    hooks_.clear();
    return {base_, earlier_};
  }

 private:
  class hook final : public torch::autograd::FunctionPreHook {
   public:
    hook(new_gradients* owner, at::Tensor variable)
        : owner_(owner), variable_(std::move(variable)) {}
    torch::autograd::variable_list operator()(
        const torch::autograd::variable_list& grads) override {
      if (!variable_.grad().defined() && !grads.empty() && grads[0].defined())
        owner_->kept(variable_);
      return grads;
    }

   private:
    new_gradients* owner_;
    at::Tensor variable_;
  };

  void kept(const at::Tensor& v) {
    const size_type bytes = remat::torch::allocated_size(
        v.device(),
        static_cast<std::size_t>(v.numel() * static_cast<std::int64_t>(v.element_size())));
    size_type peak = 0;
    if (meter_.is_none()) {
      remat::torch::memory_meter& m = remat::torch::cpu_memory();
      peak = m.peak() - base_;
      m.reset_peak();
    } else {
      const py::gil_scoped_acquire gil;
      meter_.attr("sync")();
      peak = meter_.attr("peak")().cast<size_type>() - base_;
      meter_.attr("reset_peak")();
    }
    earlier_ = earlier_ ? std::max(*earlier_, peak) : peak;
    base_ += bytes;
  }

  // A node as the graph holds it: std::shared_ptr before PyTorch 2.x made nodes intrusive.
  using node_ptr = decltype(torch::autograd::Edge::function);

  py::object meter_;
  size_type base_ = 0;
  std::optional<size_type> earlier_;
  // The hooked nodes, held until the hooks are removed.
  std::vector<std::pair<node_ptr, hook*>> hooks_;
};

// remat::torch's model_error as remat.torch's ModelError (registered by remat.torch): the same
// message, the stage's index or None.
py::object& model_error_factory() {
  static py::object* f = new py::object();  // never destroyed: used until the interpreter ends
  return *f;
}

void translate(std::exception_ptr e) {
  try {
    if (e) std::rethrow_exception(e);
  } catch (const remat::torch::model_error& x) {
    if (!model_error_factory()) throw;
    const std::size_t k = x.stage_index();
    py::object error = model_error_factory()(
        x.what(), k == remat::torch::model_error::no_stage ? py::object(py::none())
                                                           : py::object(py::int_(k)));
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
  }
}

}  // namespace

PYBIND11_MODULE(_torch, m) {
  m.doc() = "remat::torch's CPU allocation meter, generator state and profile, for remat.torch";

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

  py::class_<remat::torch::detail::cpu_rng_state>(
      m, "RngState", "The CPU generator's state (what dropout draws from), held without a tensor.");
  m.def("save_cpu_rng", &remat::torch::detail::save_cpu_rng);
  m.def("restore_cpu_rng", &remat::torch::detail::restore_cpu_rng, py::arg("state"));

  py::class_<new_gradients>(m, "NewGradients",
                            "Hooks that measure a backward op above the parameters' gradients it "
                            "creates (remat.torch's Checkpointed, zero_grad(set_to_none=True)).")
      .def(py::init<py::object>(), py::arg("meter"))
      .def("watch", &new_gradients::watch, py::arg("y"), py::arg("x"), py::arg("base"),
           "Hooks the AccumulateGrad nodes of y's graph (but x's) whose variable has no "
           "gradient; the op is measured above `base` bytes.")
      .def("unwatch", &new_gradients::unwatch,
           "Removes the hooks; returns (base, earlier): the base raised by each gradient kept, "
           "and the op's peak above the base before the latest one (None if none came).");

  m.def("profile", &profile, py::arg("forwards"), py::arg("parameters"), py::arg("buffers"),
        py::arg("sample"), py::arg("loss"), py::arg("meter"), py::arg("warmup"), py::arg("runs"),
        "remat::torch::profile of stages given as Python callables, each with the parameters and "
        "buffers it declares; `meter` None for the CPU meter, else an object with current, peak "
        "and reset_peak. The model is left as it was (gradients, buffers, the CPU generator).");
  m.def(
      "_register_model_error",
      [](py::object factory) { model_error_factory() = std::move(factory); },
      "Called once by remat.torch: factory(message, stage_index) makes its ModelError.");
  py::register_exception_translator(&translate);

  m.def("expected_op_peaks", &expected_op_peaks, py::arg("chain"), py::arg("ops"),
        py::arg("backward_slack"),
        "What running `ops` allocates at each op, by a profile (remat::torch::expected_op_peaks): "
        "the simulator's op peaks on the profiled chain, less the backward slack (per stage, the "
        "loss last) on each B and on the loss. `chain` holds profile()'s fields, `ops` is (kind, "
        "index, tensor) triples as remat.Op's attributes give them. ValueError for an invalid "
        "schedule.");
}
