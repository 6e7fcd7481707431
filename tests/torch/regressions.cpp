// Failures a new user met in remat::torch, each written with only the API remat::torch had
// when they were found (stages as bare callables, the profile, the executor), so that each of
// these checks failed on that code: gradients changed by profiling lambdas that declare
// nothing, gradients allocated inside a measured step, a head's backward over-predicted per op,
// a loss's parameters changed by profiling, libtorch's raw error from a stage.
#include <remat/solve.hpp>
#include <remat/torch/executor.hpp>

#include <doctest/doctest.h>
#include <torch/torch.h>

#include <cstddef>
#include <string>
#include <vector>

namespace {
struct HeadImpl : torch::nn::Module {
  HeadImpl() { register_module("body", body); }
  at::Tensor forward(const at::Tensor& x) { return body->forward(x); }
  torch::nn::Sequential body{torch::nn::AdaptiveAvgPool2d(1), torch::nn::Flatten(),
                             torch::nn::Dropout(0.2), torch::nn::Linear(16, 10)};
};
TORCH_MODULE(Head);
}  // namespace

namespace {
void report(const char* what, bool ok) {
  CHECK_MESSAGE(ok, what);
}
}  // namespace

TEST_CASE("what a new user met: each check failed before remat::torch found stages' state") {
  at::set_num_threads(1);
  // 1, 2: an unrolled GRU cell as lambdas declaring nothing.
  torch::manual_seed(13);
  torch::nn::GRUCell cell(6, 16);
  const at::Tensor seq = torch::randn({4, 3, 6}), h0 = torch::randn({3, 16}), target = torch::randn({3, 16});
  std::vector<remat::torch::stage> stages;
  for (int t = 0; t < 4; ++t) {
    const at::Tensor x_t = seq[t];
    remat::torch::stage s;
    s.forward = [cell, x_t](const at::Tensor& h) mutable { return cell(x_t, h); };
    stages.push_back(s);
  }
  remat::torch::loss_function loss = [target](const at::Tensor& h) { return torch::mse_loss(h, target); };
  // Reference: plain autograd.
  for (auto& p : cell->parameters()) p.mutable_grad() = torch::zeros_like(p);
  { at::Tensor h = h0; for (auto& s : stages) h = s.forward(h); loss(h).backward(); }
  std::vector<at::Tensor> ref;
  for (auto& p : cell->parameters()) ref.push_back(p.grad().clone());
  // The usual flow: zero the gradients, then step (which profiles first).
  for (auto& p : cell->parameters()) p.mutable_grad().zero_();
  {
    remat::torch::executor ex(stages);
    ex.step(h0, loss, remat::max_size);
    bool same = true;
    std::size_t i = 0;
    for (auto& p : cell->parameters()) same = same && torch::equal(p.grad(), ref[i++]);
    report("1. lambdas declaring nothing: gradients after a step that profiles are autograd's", same);
  }
  for (auto& p : cell->parameters()) p.mutable_grad().reset();
  {
    remat::torch::executor ex(stages);
    const auto p = ex.profile(h0, loss);
    bool untouched = true;
    for (auto& q : cell->parameters()) untouched = untouched && !q.grad().defined();
    report("1. profiling leaves undeclared parameters' gradients as they were", untouched);
    const remat::size_type least = remat::solve(p.chain, 0).min_feasible_budget;
    for (auto& q : cell->parameters()) q.mutable_grad().reset();
    const auto r = ex.step(h0, loss, least);
    report("2. undefined gradients: measured peak equals the prediction, within the budget",
           r.measured_peak == r.expected_peak && r.measured_peak <= least);
  }
  // 3: a head that pools, drops out and classifies: per-op prediction exact.
  {
    torch::manual_seed(12);
    torch::nn::Sequential net(torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 16, 3).padding(1)),
                              Head());
    const at::Tensor x = torch::randn({2, 3, 4, 4});
    const at::Tensor labels = torch::randint(10, {2}, torch::kLong);
    remat::torch::loss_function ce = [labels](const at::Tensor& y) { return torch::nn::functional::cross_entropy(y, labels); };
    remat::torch::executor ex(net);
    const auto r = ex.step(x, ce, remat::max_size);
    const auto p = *ex.profile_at(remat::torch::tensor_shape::of(x));
    report("3. every op's measured peak equals the prediction (head with a negative overhead)",
           r.op_peaks == remat::torch::expected_op_peaks(p, r.schedule.ops));
  }
  // 4: a loss with parameters: profiling leaves their gradients undefined.
  {
    torch::nn::Linear readout(16, 3);
    const at::Tensor labels = torch::randint(3, {3}, torch::kLong);
    remat::torch::loss_function l2 = [readout, labels](const at::Tensor& h) mutable {
      return torch::nn::functional::cross_entropy(readout(h), labels);
    };
    remat::torch::profile(stages, h0, l2);
    bool untouched = true;
    for (auto& q : readout->parameters()) untouched = untouched && !q.grad().defined();
    report("4. profiling leaves the loss's parameters' gradients as they were", untouched);
  }
  // 5: an input of a new shape the model cannot take: a model_error naming the stage.
  {
    torch::nn::Sequential net(torch::nn::Linear(8, 8), torch::nn::Linear(8, 4));
    remat::torch::executor ex(net);
    remat::torch::loss_function sum = [](const at::Tensor& y) { return y.pow(2).sum(); };
    ex.step(torch::randn({5, 8}), sum, remat::max_size);
    bool ok = false;
    try {
      ex.step(torch::randn({5, 9}), sum, remat::max_size);
    } catch (const remat::torch::model_error& e) {
      ok = std::string(e.what()).find("stage 0") != std::string::npos;
    } catch (const std::exception&) {
    }
    report("5. libtorch's error inside a stage is a model_error naming the stage", ok);
  }
}
