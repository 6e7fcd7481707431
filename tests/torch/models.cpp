// remat::torch on models a user brings: stages that are TorchScript modules, plain lambdas that
// declare nothing, weights shared by every stage, a loss with parameters, a head whose backward
// peaks below the model's. Each case: every solver, budgets from the least feasible to store-all.
#include <chain_cases.hpp>

#include <remat/torch/executor.hpp>

#include <doctest/doctest.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <algorithm>
#include <string>
#include <vector>

using namespace chain_cases;

TEST_CASE("a CNN with batch norm and max pooling") {
  check_every_schedule(vgg_bn());
}

TEST_CASE("residuals inside stages, a head whose backward peaks below the model's") {
  const remat::torch::profiled_chain p = check_every_schedule(mobilenet());
  // The case this model is here for: the head's B is over-predicted by the model, and the
  // prediction per op takes that back.
  CHECK(p.backward_slack.size() == p.chain.length() + 1);
  CHECK(p.backward_slack[p.chain.length() - 1] > 0);
  MESSAGE("mobilenet: B(head) peaks " << p.backward_slack[p.chain.length() - 1]
                                      << " bytes below the model's");
}

TEST_CASE("an unrolled GRU cell: lambdas that declare nothing, one weight shared by all") {
  check_every_schedule(gru_unrolled(6));
}

TEST_CASE("an unrolled LSTM cell and a loss with parameters of its own") {
  check_every_schedule(lstm_unrolled_with_readout(5));
}

#if defined(REMAT_TORCH_PIECES)
TEST_CASE("torchvision's resnet18 and mobilenet_v2 as TorchScript pieces") {
  torch::manual_seed(16);
  check_every_schedule(script_pieces(REMAT_TORCH_PIECES, "resnet18", torch::randn({2, 3, 32, 32}), 10));
  const remat::torch::profiled_chain p = check_every_schedule(
      script_pieces(REMAT_TORCH_PIECES, "mobilenet_v2", torch::randn({2, 3, 32, 32}), 10));
  MESSAGE("mobilenet_v2: B(head) peaks " << p.backward_slack[p.chain.length() - 1]
                                         << " bytes below the model's");
}

TEST_CASE("TorchScript pieces as plain callables: refused, gradients untouched") {
  // Callables that declare nothing: their parameters are found in their graphs, but batch
  // norm's statistics cannot be, so the first stage that records batch norm is refused, and no
  // gradient is touched on the way.
  torch::manual_seed(17);
  model m = script_pieces(REMAT_TORCH_PIECES, "resnet18", torch::randn({2, 3, 32, 32}), 10);
  std::vector<remat::torch::stage> bare;
  for (const remat::torch::stage& s : m.stages) bare.emplace_back(s.forward);  // declares nothing
  remat::torch::executor ex(bare);
  CHECK_THROWS_WITH_AS(ex.step(m.input, m.loss, remat::max_size),
                       doctest::Contains("stage 0: records batch norm (NativeBatchNormBackward0) "
                                         "but declares no buffers"),
                       remat::torch::model_error);
  for (const at::Tensor& q : m.parameters) CHECK(!q.grad().defined());
}
#else
TEST_CASE("torchvision's pieces as TorchScript") {
  MESSAGE("skipped: no Python with torch and torchvision was found when configuring");
}
#endif

TEST_CASE("gradients a step would allocate are allocated before it measures") {
  // Lambdas that declare nothing, parameters without gradients: the step's measure must not
  // count the gradients, and the step says it kept to the budget and the prediction.
  model m = gru_unrolled(4);
  const remat::torch::profiled_chain p = remat::torch::profile(m.stages, m.input, m.loss);
  for (const at::Tensor& q : m.parameters) REQUIRE(!q.grad().defined());
  const remat::size_type least = remat::solve(p.chain, 0).min_feasible_budget;
  remat::torch::executor ex(m.stages, {.enforce_budget = true});
  ex.use_profile(p);
  const state ref = reference_step(m, 5);
  for (const at::Tensor& q : m.parameters) const_cast<at::Tensor&>(q).mutable_grad().reset();
  at::manual_seed(5);
  const remat::torch::step_result r = ex.step(m.input, m.loss, least);
  CHECK(r.within_budget);
  CHECK(r.as_predicted);
  CHECK(r.measured_peak <= least);
  state got = state_of(m);
  got.input_grad = r.input_gradient;
  check_same(got, ref, true);

  // A loss whose parameters appear only now (not when the executor looked): their gradients are
  // made outside the loss op's measure.
  torch::nn::Linear readout(16, 3);
  for (const at::Tensor& q : m.parameters) const_cast<at::Tensor&>(q).mutable_grad().reset();
  const at::Tensor labels = torch::randint(3, {3}, torch::kLong);
  const remat::torch::loss_function loss2 = [readout, labels](const at::Tensor& h) mutable {
    return torch::nn::functional::cross_entropy(readout(h), labels);
  };
  remat::torch::executor ex2(m.stages);
  ex2.use_profile(remat::torch::profile(m.stages, m.input, loss2));
  for (const at::Tensor& q : readout->parameters()) REQUIRE(!q.grad().defined());
  const remat::torch::step_result r2 = ex2.step(m.input, loss2, remat::max_size);
  CHECK(r2.as_predicted);
  for (const at::Tensor& q : readout->parameters()) CHECK(q.grad().defined());
}

TEST_CASE("a step that measures above its budget: flagged, or an error when enforced") {
  model m = gru_unrolled(4);
  remat::torch::profiled_chain p = remat::torch::profile(m.stages, m.input, m.loss);
  const remat::size_type least = remat::solve(p.chain, 0).min_feasible_budget;
  // A profile that under-states every stage's output: the schedule fits the budget on
  // paper, and the step measures more.
  for (remat::stage& st : p.chain.stages) {
    st.output_size /= 2;
    st.tape_size /= 2;
  }
  const remat::size_type budget = remat::solve(p.chain, 0).min_feasible_budget;
  REQUIRE(budget < least);
  {
    remat::torch::executor ex(m.stages);
    ex.use_profile(p);
    const remat::torch::step_result r = ex.step(m.input, m.loss, budget);
    REQUIRE(r.feasible);
    CHECK(!r.as_predicted);
    CHECK(!r.within_budget);
  }
  for (const at::Tensor& q : m.parameters) const_cast<at::Tensor&>(q).mutable_grad().reset();
  remat::torch::executor strict(m.stages, {.enforce_budget = true});
  strict.use_profile(p);
  CHECK_THROWS_WITH_AS(strict.step(m.input, m.loss, budget),
                       doctest::Contains(
                           doctest::String(("above the budget of " + std::to_string(budget)).c_str())),
                       remat::torch::budget_exceeded);
}

TEST_CASE("an error libtorch raises inside a stage names the stage and the op") {
  // An input of a new shape the model cannot take, profiled by default.
  model m = vgg_bn();
  const at::Tensor before = m.buffers[0].clone();
  remat::torch::executor ex(m.stages);
  CHECK_THROWS_WITH_AS(ex.step(torch::randn({4, 3, 24, 24}), m.loss, remat::max_size),
                       doctest::Contains("stage 5, forward (recording): libtorch: "),
                       remat::torch::model_error);
  CHECK(at::equal(m.buffers[0], before));
  for (const at::Tensor& q : m.parameters) CHECK(!q.grad().defined());
}
