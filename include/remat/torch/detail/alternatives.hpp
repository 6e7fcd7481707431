// A stage's alternative implementations (stage::alternatives) checked against its forward, once
// per profile, on the activation the profiling sample gives the stage: a schedule may record the
// stage with any of them, so each must compute what `forward` computes, bit for bit, and touch
// only what the stage owns. Option 0 (`forward`) and then each alternative is recorded from the
// same generators' state and the same buffers, and its backward run with the same gradient; an
// alternative is refused (`model_error` naming the stage and the option) where
//
//   * its output's shape or dtype, or one of its bits, differs from forward's;
//   * its backward gives another gradient of the input, or of one of the stage's parameters;
//   * the stage's buffers after it differ from those forward leaves (batch norm's statistics);
//   * its graph reaches a parameter the stage does not own (one forward's graph does not reach
//     and the stage does not declare), or it records batch norm in a stage that declares no
//     buffers;
//   * it writes in place into a parameter or into another stage's buffer (their versions move).
//
// Bitwise, because an activation a_{k+1} comes from F_all(k, o) in one schedule and from the
// no-grad `forward` (F_ck, F_none) in another: an alternative that rounds differently would
// make the step's result depend on the budget, and the gradients would no longer be plain
// autograd's. One sample is a check, not a proof: an alternative equal on it may still differ
// on other inputs.
#pragma once

#include <remat/torch/detail/rng.hpp>
#include <remat/torch/detail/state.hpp>
#include <remat/torch/stage.hpp>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace remat::torch::detail {

// Equal shapes, dtypes and bytes (NaNs with the same bits are equal; -0 and +0 are not).
inline bool bitwise_equal(const at::Tensor& a, const at::Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  auto bytes = [](const at::Tensor& t) {
    return t.detach().contiguous().reshape({-1}).view(at::kByte);
  };
  return at::equal(bytes(a), bytes(b));
}

class alternatives_check {
 public:
  // Stage `k` of a model whose state is `state`, on its input `a` from the profiling sample.
  alternatives_check(std::size_t k, const stage& s, const model_state& state, const at::Tensor& a)
      : k_(k), s_(s), state_(state), a_(a) {}

  // Throws `model_error` for the first alternative that differs; leaves the generators, the
  // stage's buffers and every gradient as they were.
  void run() {
    const rng_state rng = save_rng();
    const std::vector<at::Tensor>& buffers = state_.buffers[k_];
    const std::vector<at::Tensor> start = copies_of(buffers);
    try {
      const option_run want = record(0, rng, start);
      for (std::size_t o = 1; o < s_.option_count(); ++o) compare(o, record(o, rng, start), want);
    } catch (...) {
      copy_all(start, buffers);
      restore_rng(rng);
      throw;
    }
    copy_all(start, buffers);
    restore_rng(rng);
  }

 private:
  // What recording option o and running its backward gave.
  struct option_run {
    at::Tensor output, input_grad;
    std::vector<at::Tensor> grads;    // of `owned_`, in order
    std::vector<at::Tensor> buffers;  // the stage's, afterwards
  };

  [[noreturn]] void refuse(std::size_t o, const std::string& what) const {
    throw model_error(k_, option_name(o), what);
  }

  // Option o recorded on a_k from the generators' state `rng` and the buffers `start`, and its
  // backward run with the output's own values as the incoming gradient.
  option_run record(std::size_t o, const rng_state& rng, const std::vector<at::Tensor>& start) {
    copy_all(start, state_.buffers[k_]);
    restore_rng(rng);
    const std::vector<std::int64_t> versions = versions_of(watched());
    const at::Tensor x = recording_input(a_);
    option_run out;
    out.output =
        in_stage(k_, option_name(o) + ", forward (recording)", [&] { return s_.recording(o)(x); });
    std::string problem = output_problem(x, out.output);
    if (problem.empty()) problem = differentiable_problem(out.output);
    if (!problem.empty()) refuse(o, problem);
    const recorded graph = walk_graph(out.output, x);
    if (o == 0) owned_ = owned_parameters(graph);
    check_graph(o, graph);
    const at::Tensor g = out.output.detach().clone();
    out.grads = backward(o, out.output, g);
    out.input_grad = x.requires_grad() ? x.grad() : at::Tensor();
    out.buffers = copies_of(state_.buffers[k_]);
    if (o != 0 && versions_of(watched()) != versions)
      refuse(o,
             "writes in place into a parameter or into another stage's buffer; an "
             "alternative may update only the stage's own buffers, as forward does");
    return out;
  }

  // Every parameter the stage declares or forward's graph reaches.
  std::vector<at::Tensor> owned_parameters(const recorded& graph) const {
    std::vector<at::Tensor> out = declared_parameters(s_);
    for (const at::Tensor& p : graph.leaves) add_unique(out, p);
    return out;
  }

  void check_graph(std::size_t o, const recorded& graph) const {
    if (std::string m = buffers_problem(s_, graph); !m.empty()) refuse(o, m);
    for (const at::Tensor& p : graph.leaves)
      if (std::none_of(owned_.begin(), owned_.end(),
                       [&](const at::Tensor& q) { return q.is_same(p); }))
        refuse(o, "its graph reaches a parameter of " + to_string(tensor_shape::of(p)) +
                      " that the stage does not own (forward's graph does not reach it and the "
                      "stage does not declare it)");
  }

  // The backward of `y` with `g`, each owned parameter's gradient set aside meanwhile: returns
  // the gradients this backward alone gave them.
  std::vector<at::Tensor> backward(std::size_t o, const at::Tensor& y, const at::Tensor& g) {
    std::vector<at::Tensor> kept;
    for (const at::Tensor& p : owned_) kept.push_back(std::move(grad_of(p)));
    std::vector<at::Tensor> out;
    try {
      in_stage(k_, option_name(o) + ", backward", [&] { ::torch::autograd::backward({y}, {g}); });
    } catch (...) {
      for (std::size_t i = 0; i < owned_.size(); ++i) grad_of(owned_[i]) = std::move(kept[i]);
      throw;
    }
    for (std::size_t i = 0; i < owned_.size(); ++i) {
      out.push_back(std::move(grad_of(owned_[i])));
      grad_of(owned_[i]) = std::move(kept[i]);
    }
    return out;
  }

  void compare(std::size_t o, const option_run& got, const option_run& want) const {
    const tensor_shape shape = tensor_shape::of(got.output),
                       forward_shape = tensor_shape::of(want.output);
    if (shape != forward_shape)
      refuse(o, "its output is " + to_string(shape) + ", forward's " + to_string(forward_shape) +
                    "; an alternative must compute what forward computes");
    if (!bitwise_equal(got.output, want.output))
      refuse(o,
             "its output differs from forward's on the profiling sample; an alternative must "
             "compute what forward computes, bit for bit");
    if (!bitwise_equal(got.input_grad, want.input_grad))
      refuse(o, "its backward gives another gradient of the input than forward's, bit for bit");
    for (std::size_t i = 0; i < owned_.size(); ++i)
      if (!bitwise_equal(got.grads[i], want.grads[i]))
        refuse(o, "its backward gives another gradient of the parameter of " +
                      to_string(tensor_shape::of(owned_[i])) + " than forward's, bit for bit");
    for (std::size_t i = 0; i < got.buffers.size(); ++i)
      if (!bitwise_equal(got.buffers[i], want.buffers[i]))
        refuse(o, "it leaves the stage's buffer of " + to_string(tensor_shape::of(got.buffers[i])) +
                      " other than forward leaves it");
  }

  // What an alternative may not write into: every parameter, the other stages' buffers.
  std::vector<at::Tensor> watched() const {
    std::vector<at::Tensor> out = state_.parameters;
    const std::vector<at::Tensor>& own = state_.buffers[k_];
    for (const at::Tensor& b : all_buffers(state_))
      if (std::none_of(own.begin(), own.end(), [&](const at::Tensor& c) { return c.is_same(b); }))
        out.push_back(b);
    return out;
  }

  static std::vector<std::int64_t> versions_of(const std::vector<at::Tensor>& tensors) {
    std::vector<std::int64_t> out;
    out.reserve(tensors.size());
    for (const at::Tensor& t : tensors) out.push_back(t._version());
    return out;
  }

  static at::Tensor& grad_of(const at::Tensor& p) {
    return const_cast<at::Tensor&>(p).mutable_grad();
  }

  std::size_t k_;
  const stage& s_;
  const model_state& state_;
  const at::Tensor& a_;
  std::vector<at::Tensor> owned_;  // found by recording option 0
};

// Refuses the first of stage k's alternatives that does not compute what its forward does.
inline void check_alternatives(std::size_t k, const stage& s, const model_state& state,
                               const at::Tensor& a) {
  if (!s.alternatives.empty()) alternatives_check(k, s, state, a).run();
}

}  // namespace remat::torch::detail
