#include <remat/torch/executor.hpp>

#include <doctest/doctest.h>
#include <models.hpp>
#include <torch_cases.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

using namespace torch_cases;

TEST_CASE("every solver, budgets from the least feasible to store-all: autograd's gradients") {
  at::set_num_threads(1);
  for (model_case c : {resnet_case(), gpt_case()}) {
    CAPTURE(c.name);
    c.net->train();
    const snapshot before = state_of(c.net);
    const remat::torch::profiled_chain p = remat::torch::profile(c.net, c.input, c.loss);
    const remat::chain& ch = p.chain;
    const remat::size_type store_all =
        remat::solve(ch, remat::max_size, {.solver = remat::solver::store_all}).plan.peak_memory;
    double worst = 0;
    for (remat::solver s : remat::all_solvers) {
      if (s == remat::solver::exhaustive && ch.length() > 7) continue;
      if (remat::needs_link(s)) continue;  // a profiled chain has no link to host memory
      const remat::size_type least = remat::solve(ch, 0, {.solver = s}).min_feasible_budget;
      if (least == remat::solve_result::no_budget) continue;
      remat::torch::executor ex(c.net, {.solve = {.solver = s}});
      ex.use_profile(p);
      for (int i = 0; i <= 3; ++i) {
        const remat::size_type budget = least + (store_all - least) * i / 3;
        CAPTURE(remat::name(s));
        CAPTURE(budget);
        const snapshot ref = reference_step(c.net, c.input, c.loss, 7);
        // Back to the state before the reference step: buffers, zero gradients, same seed.
        {
          torch::NoGradGuard g;
          const auto bufs = c.net->buffers();
          for (std::size_t j = 0; j < bufs.size(); ++j) bufs[j].copy_(before.buffers[j]);
          for (auto& q : c.net->parameters()) q.mutable_grad().zero_();
        }
        torch::manual_seed(7);
        const remat::torch::step_result r = ex.step(c.input, c.loss, budget);
        REQUIRE(r.feasible);
        const snapshot got = state_of(c.net);
        for (std::size_t j = 0; j < got.grads.size(); ++j) CHECK(same(got.grads[j], ref.grads[j]));
        for (std::size_t j = 0; j < got.buffers.size(); ++j)
          CHECK(same(got.buffers[j], ref.buffers[j]));
        CHECK(same(r.input_gradient, ref.input_grad));
        CHECK(r.measured_peak <= budget);
        // Every op allocates exactly what the profile says, F_all with its recording transient,
        // and the model's peak (the solver's prediction) is the measured one within 5%.
        CHECK(r.op_peaks == remat::torch::expected_op_peaks(p, r.plan.ops));
        CHECK(r.measured_peak == r.expected_peak);
        CHECK(r.expected_peak == r.plan.peak_memory);
        const double err = std::abs(static_cast<double>(r.plan.peak_memory - r.measured_peak)) /
                           static_cast<double>(r.plan.peak_memory);
        CHECK(err <= 0.05);
        worst = std::max(worst, err);
        {
          torch::NoGradGuard g;
          const auto bufs = c.net->buffers();
          for (std::size_t j = 0; j < bufs.size(); ++j) bufs[j].copy_(before.buffers[j]);
        }
      }
    }
    // With each stage's recording overhead (F_all) apart from its no-grad one (F_none, F_ck),
    // the model's peaks are the measured ones (docs/recording-overhead.md).
    MESSAGE(c.name << ": measured and predicted peaks differ by at most " << 100 * worst << "%");
  }
}

namespace {

// Two linear stages; the second's output shape changes when `grow` is set.
struct shape_shifter {
  torch::nn::Linear first{8, 8};
  torch::nn::Linear second{8, 8};
  std::shared_ptr<bool> grow = std::make_shared<bool>(false);

  std::vector<remat::torch::stage> stages() const {
    auto g = grow;
    auto s = second;
    return {{[f = first](const at::Tensor& x) mutable { return f(x); }, first.ptr()},
            {[s, g](const at::Tensor& x) mutable {
               const at::Tensor y = s(x);
               return *g ? at::cat({y, y}) : y;
             },
             second.ptr()}};
  }
};

remat::torch::loss_function sum_loss() {
  return [](const at::Tensor& y) { return y.pow(2).sum(); };
}

bool grads_undefined(const std::vector<remat::torch::stage>& stages) {
  for (const auto& s : stages)
    for (const auto& p : s.module->parameters())
      if (p.grad().defined()) return false;
  return true;
}

// The CPU generator's next draws; its state is put back. (Not through Generator::clone, which
// leaks its copy in libtorch 1.13.)
at::Tensor next_draws() {
  at::Generator g = at::detail::getDefaultCPUGenerator();
  const at::Tensor state = g.get_state();
  at::Tensor draws = at::rand({4});
  g.set_state(state);
  return draws;
}

}  // namespace

TEST_CASE("bad input: an error that names the stage, and nothing changed") {
  at::set_num_threads(1);
  torch::manual_seed(3);
  const at::Tensor x = torch::randn({5, 8});

  SUBCASE("a stage whose output's shape changed since profiling") {
    shape_shifter net;
    const at::Tensor draws = next_draws();  // after the modules drew their weights
    remat::torch::executor ex(net.stages());
    ex.profile(x, sum_loss());
    *net.grow = true;
    CHECK_THROWS_WITH_AS(ex.step(x, sum_loss(), remat::max_size),
                         doctest::Contains("stage 1: its output is [10, 8] Float, profiled as "
                                           "[5, 8] Float"),
                         remat::torch::model_error);
    CHECK(grads_undefined(net.stages()));
    CHECK(torch::equal(next_draws(), draws));
  }
  SUBCASE("a stage that is not differentiable") {
    torch::nn::Sequential net(
        torch::nn::Linear(8, 8),
        torch::nn::Functional([](const at::Tensor& t) { return (t.detach() > 0).to(at::kFloat); }));
    const at::Tensor draws = next_draws();
    remat::torch::executor ex(net);
    CHECK_THROWS_WITH_AS(ex.step(x, sum_loss(), remat::max_size),
                         doctest::Contains("stage 1: its output ([5, 8] Float) does not require "
                                           "grad when recorded"),
                         remat::torch::model_error);
    for (const auto& p : net->parameters()) CHECK(!p.grad().defined());
    CHECK(torch::equal(next_draws(), draws));
  }
  SUBCASE("a stage that returns a view of its input") {
    torch::nn::Sequential net(torch::nn::Linear(8, 8),
                              torch::nn::Functional([](const at::Tensor& t) {
                                return t.view({8, 5});
                              }));
    CHECK_THROWS_WITH_AS(remat::torch::profile(net, x, sum_loss()),
                         doctest::Contains("stage 1: returns its input or a view of it"),
                         remat::torch::model_error);
  }
  SUBCASE("a loss that is not a scalar") {
    torch::nn::Sequential net(torch::nn::Linear(8, 8));
    CHECK_THROWS_WITH_AS(
        remat::torch::profile(net, x, [](const at::Tensor& y) { return y * 2; }),
        doctest::Contains("the loss must return a scalar that requires grad (got [5, 8] Float)"),
        remat::torch::model_error);
    for (const auto& p : net->parameters()) CHECK(!p.grad().defined());
  }
  SUBCASE("an input of a shape not profiled: refused, or profiled on its own") {
    model_case c = resnet_case();
    const at::Tensor half = c.input.slice(0, 0, 2).contiguous();
    remat::torch::loss_function loss = [](const at::Tensor& y) { return y.pow(2).mean(); };
    remat::torch::executor strict(c.net, {.on_new_shape = remat::torch::new_shape_policy::error});
    strict.profile(c.input, loss);
    CHECK_THROWS_WITH_AS(strict.step(half, loss, remat::max_size),
                         doctest::Contains("the input's shape [2, 3, 16, 16] Float was not "
                                           "profiled (profiled: [4, 3, 16, 16] Float)"),
                         remat::torch::model_error);
    for (const auto& p : c.net->parameters()) CHECK(!p.grad().defined());

    const snapshot before = state_of(c.net);
    const snapshot ref = reference_step(c.net, half, loss, 9);
    {
      torch::NoGradGuard g;
      const auto bufs = c.net->buffers();
      for (std::size_t j = 0; j < bufs.size(); ++j) bufs[j].copy_(before.buffers[j]);
      for (auto& q : c.net->parameters()) q.mutable_grad().zero_();
    }
    remat::torch::executor flexible(c.net);
    flexible.profile(c.input, loss);
    torch::manual_seed(9);
    const remat::size_type least =
        remat::solve(flexible.profile(half, loss).chain, 0).min_feasible_budget;
    const remat::torch::step_result r = flexible.step(half, loss, least);
    REQUIRE(r.feasible);
    const snapshot got = state_of(c.net);
    for (std::size_t j = 0; j < got.grads.size(); ++j) CHECK(same(got.grads[j], ref.grads[j]));
    CHECK(same(r.input_gradient, ref.input_grad));
    CHECK(flexible.profile_at(remat::torch::tensor_shape::of(c.input)) != nullptr);
  }
  SUBCASE("a budget below the least feasible: a result, nothing run") {
    model_case c = resnet_case();
    remat::torch::executor ex(c.net);
    const remat::size_type least =
        remat::solve(ex.profile(c.input, c.loss).chain, 0).min_feasible_budget;
    const remat::torch::step_result r = ex.step(c.input, c.loss, least - 1);
    CHECK(!r.feasible);
    CHECK(r.min_feasible_budget == least);
    CHECK(r.plan.ops.empty());
    CHECK(r.measured_peak == 0);
    for (const auto& p : c.net->parameters()) CHECK(!p.grad().defined());
  }
}
