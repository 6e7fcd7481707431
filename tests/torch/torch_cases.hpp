// The models and the plain-autograd reference the tests of remat::torch share.
#pragma once

#include <remat/torch/profile.hpp>

#include <models.hpp>

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace torch_cases {

struct snapshot {
  std::vector<torch::Tensor> grads, buffers;
  torch::Tensor input_grad;
};

inline snapshot state_of(torch::nn::Sequential& net) {
  snapshot s;
  for (const auto& p : net->parameters())
    s.grads.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
  for (const auto& b : net->buffers()) s.buffers.push_back(b.clone());
  return s;
}

inline bool same(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.defined() != b.defined()) return false;
  return !a.defined() || torch::equal(a, b);
}

// Puts `net`'s buffers back to those of `s` and, with `zero_grads`, its gradients to zero: the
// state a reference step started from, for the step that must reproduce it.
inline void restore(torch::nn::Sequential& net, const snapshot& s, bool zero_grads = true) {
  torch::NoGradGuard g;
  const auto bufs = net->buffers();
  for (std::size_t j = 0; j < bufs.size(); ++j) bufs[j].copy_(s.buffers[j]);
  if (zero_grads)
    for (auto& q : net->parameters()) q.mutable_grad().zero_();
}

// Plain autograd: the reference every schedule must reproduce, bit for bit.
inline snapshot reference_step(torch::nn::Sequential& net, const torch::Tensor& input,
                               const remat::torch::loss_function& loss, std::uint64_t seed) {
  torch::manual_seed(seed);
  for (auto& p : net->parameters()) p.mutable_grad() = torch::zeros_like(p);
  torch::Tensor x = input.detach();
  if (x.is_floating_point()) x.requires_grad_(true);
  loss(net->forward(x)).backward();
  snapshot s = state_of(net);
  if (x.requires_grad()) s.input_grad = x.grad().clone();
  return s;
}

struct model_case {
  std::string name;
  torch::nn::Sequential net;
  torch::Tensor input;
  remat::torch::loss_function loss;
};

// `device`: where the model, its input and its loss's targets go (drawn on the CPU first, so
// that every device gets the same numbers).
inline model_case resnet_case(const torch::Device& device = torch::kCPU) {
  torch::manual_seed(1);
  model_case c{"resnet", models::resnet(4, 16, 10), torch::randn({4, 3, 16, 16}), {}};
  const torch::Tensor labels = torch::randint(10, {4}, torch::kLong).to(device);
  c.net->to(device);
  c.input = c.input.to(device);
  c.loss = [labels](const torch::Tensor& y) {
    return torch::nn::functional::cross_entropy(y, labels);
  };
  return c;
}

inline model_case gpt_case(const torch::Device& device = torch::kCPU) {
  torch::manual_seed(2);
  model_case c{
      "gpt", models::gpt(4, 32, 4, 64, 16, 0.1), torch::randint(64, {4, 16}, torch::kLong), {}};
  const torch::Tensor targets = torch::randint(64, {4, 16}, torch::kLong).to(device);
  c.net->to(device);
  c.input = c.input.to(device);
  c.loss = [targets](const torch::Tensor& y) { return models::next_token_loss(y, targets); };
  return c;
}

}  // namespace torch_cases
