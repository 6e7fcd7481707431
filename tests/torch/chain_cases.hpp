// Models given as stages (not a Sequential), the plain-autograd reference on them, and the check
// every schedule of every solver must pass on them: gradients, input gradient and buffers
// bitwise equal to autograd's, every op's measured peak the predicted one, within the budget.
#pragma once

#include <remat/solve.hpp>
#include <remat/torch/executor.hpp>

#include <doctest/doctest.h>
#include <torch/script.h>
#include <torch/torch.h>
#include <torch_cases.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace chain_cases {

struct model {
  std::string name;
  std::vector<remat::torch::stage> stages;
  at::Tensor input;
  remat::torch::loss_function loss;
  std::vector<at::Tensor> parameters;  ///< every parameter, the loss's included
  std::vector<at::Tensor> buffers;
  /// The reference's forward where it is not the stages' forwards in order (a whole module that
  /// split_script cut); empty: the stages.
  std::function<at::Tensor(const at::Tensor&)> whole = {};
};

struct state {
  std::vector<at::Tensor> grads, buffers;
  at::Tensor input_grad;
};

inline state state_of(const model& m) {
  state s;
  for (const at::Tensor& p : m.parameters)
    s.grads.push_back(p.grad().defined() ? p.grad().clone() : at::Tensor());
  for (const at::Tensor& b : m.buffers) s.buffers.push_back(b.clone());
  return s;
}

using torch_cases::same;

inline void check_same(const state& got, const state& want, bool input_grad) {
  REQUIRE(got.grads.size() == want.grads.size());
  std::size_t wrong_grads = 0, wrong_buffers = 0;
  for (std::size_t i = 0; i < got.grads.size(); ++i)
    wrong_grads += !same(got.grads[i], want.grads[i]);
  for (std::size_t i = 0; i < got.buffers.size(); ++i)
    wrong_buffers += !same(got.buffers[i], want.buffers[i]);
  CHECK(wrong_grads == 0);
  CHECK(wrong_buffers == 0);
  if (input_grad) CHECK(same(got.input_grad, want.input_grad));
}

// Buffers to `s`'s, gradients undefined (or zero, `zero`).
inline void reset(const model& m, const state& s, bool zero) {
  const at::NoGradGuard no_grad;
  for (std::size_t i = 0; i < m.buffers.size(); ++i) m.buffers[i].copy_(s.buffers[i]);
  for (const at::Tensor& p : m.parameters) {
    at::Tensor& g = const_cast<at::Tensor&>(p).mutable_grad();
    if (zero)
      g = at::zeros_like(p);
    else
      g.reset();
  }
}

// Plain autograd through the stages' forwards (or the whole model's) and the loss, from zero
// gradients.
inline state reference_step(const model& m, std::uint64_t seed) {
  at::manual_seed(seed);
  for (const at::Tensor& p : m.parameters)
    const_cast<at::Tensor&>(p).mutable_grad() = at::zeros_like(p);
  at::Tensor x = m.input.detach();
  if (x.is_floating_point()) x.requires_grad_(true);
  at::Tensor y = x;
  if (m.whole)
    y = m.whole(x);
  else
    for (const remat::torch::stage& s : m.stages) y = s.forward(y);
  m.loss(y).backward();
  state s = state_of(m);
  if (x.requires_grad()) s.input_grad = x.grad().clone();
  return s;
}

// One step of `ex` at `budget` and one of plain autograd, both from `before` and seed 7: the
// gradients, buffers and input gradient must be equal. The model is left at `before` with its
// gradients kept; the step's result is returned for the caller's own checks.
inline remat::torch::step_result step_beside_autograd(const model& m, remat::torch::executor& ex,
                                                      const state& before,
                                                      remat::size_type budget) {
  const state ref = reference_step(m, 7);
  reset(m, before, /*zero=*/true);
  at::manual_seed(7);
  remat::torch::step_result r = ex.step(m.input, m.loss, budget);
  REQUIRE(r.feasible);
  state got = state_of(m);
  got.input_grad = r.input_gradient;
  check_same(got, ref, true);
  reset(m, before, /*zero=*/false);
  return r;
}

// The profile leaves the model as it was; then every solver, at budgets from its least feasible
// to store-all, gives autograd's gradients and buffers, and every op allocates what the profile
// predicts, within the budget. Returns the profile.
inline remat::torch::profiled_chain check_every_schedule(const model& m) {
  CAPTURE(m.name);
  at::set_num_threads(1);
  const state before = state_of(m);
  const remat::torch::profiled_chain p = remat::torch::profile(m.stages, m.input, m.loss);
  check_same(state_of(m), before, false);  // profiling changed nothing
  const remat::chain& ch = p.chain;
  const remat::size_type store_all =
      remat::solve(ch, remat::max_size, {.solver = remat::solver::store_all}).schedule.peak_memory;
  remat::torch::executor ex(m.stages);
  ex.use_profile(p);
  for (remat::solver s : remat::all_solvers) {
    if (s == remat::solver::exhaustive && ch.length() > 7) continue;
    if (remat::needs_link(s)) continue;  // a profiled chain has no link to host memory
    const remat::size_type least = remat::solve(ch, 0, {.solver = s}).min_feasible_budget;
    if (least == remat::solve_result::no_budget) continue;
    ex.solve_with({.solver = s});
    for (int i = 0; i <= 3; ++i) {
      const remat::size_type budget = least + (store_all - least) * i / 3;
      CAPTURE(remat::name(s));
      CAPTURE(budget);
      const remat::torch::step_result r = step_beside_autograd(m, ex, before, budget);
      CHECK(r.within_budget);
      CHECK(r.as_predicted);
      CHECK(r.op_peaks == r.expected_op_peaks);
      CHECK(r.measured_peak == r.expected_peak);
      CHECK(r.expected_peak <= r.schedule.peak_memory);
      CHECK(r.measured_peak <= budget);
    }
  }
  return p;
}

inline remat::torch::loss_function cross_entropy(const at::Tensor& labels) {
  return [labels](const at::Tensor& y) { return torch::nn::functional::cross_entropy(y, labels); };
}

inline void add_module_state(model& m, const torch::nn::Module& mod) {
  for (const at::Tensor& p : mod.parameters()) m.parameters.push_back(p);
  for (const at::Tensor& b : mod.buffers()) m.buffers.push_back(b);
}

// A VGG-style CNN with batch norm and max pooling: conv-bn-relu(-pool) stages, then a head.
inline model vgg_bn() {
  torch::manual_seed(11);
  model m{"vgg-bn", {}, torch::randn({4, 3, 16, 16}), {}, {}, {}};
  const std::int64_t widths[] = {8, 16, 16, 32, 32};
  std::int64_t in = 3;
  for (std::size_t i = 0; i < 5; ++i) {
    torch::nn::Sequential block(
        torch::nn::Conv2d(torch::nn::Conv2dOptions(in, widths[i], 3).padding(1)),
        torch::nn::BatchNorm2d(widths[i]), torch::nn::ReLU());
    if (i % 2 == 0) block->push_back(torch::nn::MaxPool2d(2));
    add_module_state(m, *block);
    m.stages.push_back(remat::torch::stage_of(block));
    in = widths[i];
  }
  torch::nn::Sequential head(torch::nn::Flatten(), torch::nn::Linear(32 * 2 * 2, 10));
  add_module_state(m, *head);
  m.stages.push_back(remat::torch::stage_of(head));
  m.loss = cross_entropy(torch::randint(10, {4}, torch::kLong));
  return m;
}

// MobileNetV2-style inverted residual: expand 1x1, depthwise 3x3, project 1x1, each with batch
// norm; the residual sits inside the stage.
struct InvertedResidualImpl : torch::nn::Module {
  InvertedResidualImpl(std::int64_t in, std::int64_t out, std::int64_t stride, std::int64_t expand)
      : residual(stride == 1 && in == out) {
    const std::int64_t mid = in * expand;
    body = register_module(
        "body",
        torch::nn::Sequential(torch::nn::Conv2d(torch::nn::Conv2dOptions(in, mid, 1).bias(false)),
                              torch::nn::BatchNorm2d(mid), torch::nn::Functional(torch::relu6),
                              torch::nn::Conv2d(torch::nn::Conv2dOptions(mid, mid, 3)
                                                    .stride(stride)
                                                    .padding(1)
                                                    .groups(mid)
                                                    .bias(false)),
                              torch::nn::BatchNorm2d(mid), torch::nn::Functional(torch::relu6),
                              torch::nn::Conv2d(torch::nn::Conv2dOptions(mid, out, 1).bias(false)),
                              torch::nn::BatchNorm2d(out)));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = body->forward(x);
    return residual ? y + x : y;
  }
  bool residual;
  torch::nn::Sequential body{nullptr};
};
TORCH_MODULE(InvertedResidual);

// The head pools before its classifier (MobileNetV2's: dropout, then linear): its tape is freed
// before the input gradient is allocated, so its backward peaks below the model's (a negative
// overhead, clamped).
inline model mobilenet() {
  torch::manual_seed(12);
  model m{"mobilenet", {}, torch::randn({2, 3, 32, 32}), {}, {}, {}};
  torch::nn::Sequential stem(
      torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 8, 3).stride(2).padding(1).bias(false)),
      torch::nn::BatchNorm2d(8), torch::nn::Functional(torch::relu6));
  add_module_state(m, *stem);
  m.stages.push_back(remat::torch::stage_of(stem));
  const std::int64_t spec[][3] = {{8, 8, 1}, {8, 12, 2}, {12, 12, 1}, {12, 16, 2}, {16, 16, 1}};
  for (const auto& [in, out, stride] : spec) {
    InvertedResidual block(in, out, stride, 4);
    add_module_state(m, *block);
    m.stages.push_back(remat::torch::stage_of(block));
  }
  torch::nn::Sequential head(torch::nn::AdaptiveAvgPool2d(1), torch::nn::Flatten(),
                             torch::nn::Dropout(0.2), torch::nn::Linear(16, 10));
  add_module_state(m, *head);
  m.stages.push_back(remat::torch::stage_of(head));
  m.loss = cross_entropy(torch::randint(10, {2}, torch::kLong));
  return m;
}

// A GRU cell unrolled over `steps` stages, one weight shared by all, each stage a plain lambda
// that declares nothing: the hidden state is the activation, the sequence's inputs are captured.
inline model gru_unrolled(std::int64_t steps) {
  torch::manual_seed(13);
  torch::nn::GRUCell cell(6, 16);
  model m{"gru", {}, torch::randn({3, 16}), {}, {}, {}};
  const at::Tensor sequence = torch::randn({steps, 3, 6});
  for (std::int64_t t = 0; t < steps; ++t) {
    const at::Tensor x_t = sequence[t];
    m.stages.emplace_back([cell, x_t](const at::Tensor& h) mutable { return cell(x_t, h); });
  }
  add_module_state(m, *cell);
  const at::Tensor target = torch::randn({3, 16});
  m.loss = [target](const at::Tensor& h) { return torch::mse_loss(h, target); };
  return m;
}

// An LSTM cell unrolled, (h, c) side by side in one activation; every stage declares the cell.
// The loss has parameters of its own: a linear readout.
inline model lstm_unrolled_with_readout(std::int64_t steps) {
  torch::manual_seed(14);
  torch::nn::LSTMCell cell(6, 12);
  torch::nn::Linear readout(12, 5);
  model m{"lstm+readout", {}, torch::zeros({3, 24}), {}, {}, {}};
  const at::Tensor sequence = torch::randn({steps, 3, 6});
  for (std::int64_t t = 0; t < steps; ++t) {
    const at::Tensor x_t = sequence[t];
    m.stages.emplace_back(
        [cell, x_t](const at::Tensor& hc) mutable {
          auto [h, c] = cell(x_t, std::make_tuple(hc.narrow(1, 0, 12), hc.narrow(1, 12, 12)));
          return at::cat({h, c}, 1);
        },
        cell.ptr());
  }
  add_module_state(m, *cell);
  add_module_state(m, *readout);
  const at::Tensor labels = torch::randint(5, {3}, torch::kLong);
  m.loss = [readout, labels](const at::Tensor& hc) mutable {
    return torch::nn::functional::cross_entropy(readout(hc.narrow(1, 0, 12)), labels);
  };
  return m;
}

// torchvision's pieces as TorchScript (examples/libtorch/export_pieces.py), as stages_of makes
// them from script modules.
inline model script_pieces(const std::string& dir, const std::string& name, at::Tensor input,
                           std::int64_t classes) {
  model m{name + " (TorchScript)", {}, std::move(input), {}, {}, {}};
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/" + name))
    if (e.path().extension() == ".pt") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<torch::jit::Module> pieces;
  for (const auto& f : files) {
    pieces.push_back(torch::jit::load(f.string()));
    for (const at::Tensor& p : pieces.back().parameters()) m.parameters.push_back(p);
    for (const at::Tensor& b : pieces.back().buffers()) m.buffers.push_back(b);
  }
  m.stages = remat::torch::stages_of(pieces);
  torch::manual_seed(15);
  m.loss = cross_entropy(torch::randint(classes, {m.input.size(0)}, torch::kLong));
  return m;
}

}  // namespace chain_cases
