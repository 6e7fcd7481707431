// The mutable state of a model cut into stages, found and put back: the parameters every stage
// (and the loss) accumulates into, the buffers every stage declares, the generators (the CPU's,
// every GPU's). See stage.hpp for what is protected and why.
#pragma once

#include <remat/concepts.hpp>
#include <remat/torch/detail/rng.hpp>
#include <remat/torch/stage.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace remat::torch::detail {

// Puts `from` into `to` through `variable_data()` (Python's `.data`): putting a buffer back must
// not bump its version, or a tape that saved it (batch norm saves its running statistics) would
// refuse to run backward; the value put back is the one that tape saw.
inline void copy_all(const std::vector<at::Tensor>& from, const std::vector<at::Tensor>& to) {
  const at::NoGradGuard no_grad;
  for (std::size_t i = 0; i < from.size(); ++i) to[i].variable_data().copy_(from[i]);
}

inline std::vector<at::Tensor> copies_of(const std::vector<at::Tensor>& tensors) {
  const at::NoGradGuard no_grad;
  std::vector<at::Tensor> out;
  out.reserve(tensors.size());
  for (const at::Tensor& t : tensors) out.push_back(t.detach().clone());
  return out;
}

// What a model's stages and loss own.
struct model_state {
  std::vector<std::vector<at::Tensor>> buffers;  // per stage: declared
  std::vector<at::Tensor> parameters;            // of every stage and of the loss, once each
};

// A detached copy of `a` to record a stage on: a leaf that requires grad when its type can.
inline at::Tensor recording_input(const at::Tensor& a) {
  at::Tensor x = a.detach();
  if (at::isFloatingType(x.scalar_type()) || at::isComplexType(x.scalar_type()))
    x.requires_grad_(true);
  return x;
}

// remat measures one device (the input's): a stage runs where its input is. What is wrong with
// output `y` of a stage recorded or run on `x`, or nothing.
inline std::string output_problem(const at::Tensor& x, const at::Tensor& y) {
  if (!y.defined()) return "returns an undefined tensor";
  if (y.device() != x.device())
    return "returns a tensor on " + y.device().str() + " for an input on " + x.device().str() +
           "; remat measures one device, so every stage and the loss must run where the model's "
           "input is";
  if (y.is_alias_of(x))
    return "returns its input or a view of it; remat counts each stage's output as its own "
           "memory: merge the stage with a neighbour or return a new tensor";
  return {};
}

inline void check_output(std::size_t k, const at::Tensor& x, const at::Tensor& y) {
  if (std::string m = output_problem(x, y); !m.empty()) throw model_error(k, m);
}

// What is wrong with a recorded output `y`, or nothing.
inline std::string differentiable_problem(const at::Tensor& y) {
  if (y.requires_grad()) return {};
  return "its output (" + to_string(tensor_shape::of(y)) +
         ") does not require grad when recorded: the stage is not differentiable (integer "
         "output, detach, or no parameters and an input that does not require grad)";
}

inline void check_differentiable(std::size_t k, const at::Tensor& y) {
  if (std::string m = differentiable_problem(y); !m.empty()) throw model_error(k, m);
}

// A parameter the stage's (or the loss's) graph reaches must be on the input's device.
inline void check_parameter_device(std::size_t k, const at::Tensor& p, const at::Tensor& x) {
  if (p.device() != x.device())
    throw model_error(k, std::string(k == model_error::no_stage ? "the loss " : "") +
                             "has a parameter of " + to_string(tensor_shape::of(p)) + " on " +
                             p.device().str() + " for an input on " + x.device().str() +
                             "; remat measures one device, so every parameter must be where "
                             "the model's input is");
}

inline void check_loss(const at::Tensor& l) {
  if (!l.defined() || l.numel() != 1 || !l.requires_grad())
    throw model_error(model_error::no_stage,
                      "the loss must return a scalar that requires grad (got " +
                          (l.defined() ? to_string(tensor_shape::of(l)) : "undefined") + ")");
}

// Finds what `stages` and `loss` own by recording each stage once on `sample`'s activations
// (one stage's graph at a time) and the loss once, without a backward, and puts back the
// declared buffers and the generator. Throws `model_error` for a stage that fails, returns its
// input, is not differentiable, or records batch norm without declaring its buffers (that
// forward has updated them, if in training mode: they were never declared, so cannot be put
// back).
inline model_state discover(const std::vector<stage>& stages, const at::Tensor& sample,
                            const loss_function& loss) {
  model_state out;
  const rng_state rng = save_rng();
  std::vector<at::Tensor> declared;
  for (const stage& s : stages)
    for (const at::Tensor& b : buffers_of(s)) add_unique(declared, b);
  const std::vector<at::Tensor> declared_copies = copies_of(declared);
  auto put_back = [&] {
    copy_all(declared_copies, declared);
    restore_rng(rng);
  };
  try {
    at::Tensor a = sample;
    for (std::size_t k = 0; k < stages.size(); ++k) {
      at::Tensor x = recording_input(a);
      at::Tensor y = in_stage(k, "forward (recording)", [&] { return stages[k].forward(x); });
      check_output(k, x, y);
      check_differentiable(k, y);
      const recorded graph = walk_graph(y, x);
      check_buffers_declared(k, stages[k], graph);
      out.buffers.push_back(buffers_of(stages[k]));
      for (const at::Tensor& p : declared_parameters(stages[k])) add_unique(out.parameters, p);
      for (const at::Tensor& p : graph.leaves) {
        check_parameter_device(k, p, x);
        add_unique(out.parameters, p);
      }
      a = y.detach();  // the graph goes with y
    }
    const at::Tensor leaf = a.detach().requires_grad_(a.is_floating_point());
    const at::Tensor l = in_stage(model_error::no_stage, "loss", [&] { return loss(leaf); });
    check_loss(l);
    for (const at::Tensor& p : walk_graph(l, leaf).leaves) {
      check_parameter_device(model_error::no_stage, p, leaf);
      add_unique(out.parameters, p);
    }
  } catch (...) {
    put_back();
    throw;
  }
  put_back();
  return out;
}

inline std::vector<at::Tensor> all_buffers(const model_state& state) {
  std::vector<at::Tensor> out;
  for (const std::vector<at::Tensor>& bs : state.buffers)
    for (const at::Tensor& b : bs) add_unique(out, b);
  return out;
}

// Gives every parameter without a gradient a zero one: the gradients are outside the budget,
// so they must exist before a measure starts (a zero gradient is what an undefined one means).
inline void define_gradients(const std::vector<at::Tensor>& parameters) {
  for (const at::Tensor& p : parameters)
    if (!p.grad().defined()) const_cast<at::Tensor&>(p).mutable_grad() = at::zeros_like(p);
}

// Copies of a model's mutable state, put back by `restore`: gradients (or their absence),
// buffers, the generator.
class saved_state {
 public:
  explicit saved_state(const model_state& state)
      : parameters_(state.parameters),
        buffers_(all_buffers(state)),
        buffer_copies_(copies_of(buffers_)),
        rng_(save_rng()) {
    const at::NoGradGuard no_grad;
    for (const at::Tensor& p : parameters_)
      grads_.push_back(p.grad().defined() ? p.grad().clone() : at::Tensor());
  }
  void restore() {
    const at::NoGradGuard no_grad;
    for (std::size_t i = 0; i < parameters_.size(); ++i) {
      at::Tensor& g = const_cast<at::Tensor&>(parameters_[i]).mutable_grad();
      if (grads_[i].defined() && g.defined())
        g.copy_(grads_[i]);
      else
        g = grads_[i];
    }
    copy_all(buffer_copies_, buffers_);
    restore_rng(rng_);
  }

 private:
  std::vector<at::Tensor> parameters_;
  std::vector<at::Tensor> grads_;
  std::vector<at::Tensor> buffers_;
  std::vector<at::Tensor> buffer_copies_;
  rng_state rng_;
};

}  // namespace remat::torch::detail
