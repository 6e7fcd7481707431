#include <remat/torch/profile.hpp>

#include <doctest/doctest.h>
#include <torch_cases.hpp>

#include <torch/torch.h>

#include <vector>

using namespace torch_cases;

TEST_CASE("profile: sizes identical from run to run, the model left as it was") {
  at::set_num_threads(1);
  for (model_case c : {resnet_case(), gpt_case()}) {
    CAPTURE(c.name);
    torch::manual_seed(4);
    const snapshot before = state_of(c.net);
    const remat::torch::profiled_chain a = remat::torch::profile(c.net, c.input, c.loss);
    const remat::torch::profiled_chain b = remat::torch::profile(c.net, c.input, c.loss);
    REQUIRE(a.chain.length() == c.net->size());
    CHECK(a.chain.input_size == static_cast<remat::size_type>(c.input.nbytes()));
    CHECK(a.chain.loss_overhead == b.chain.loss_overhead);
    CHECK(a.recording_overheads == b.recording_overheads);
    CHECK((a.outputs == b.outputs));
    for (std::size_t k = 0; k < a.chain.length(); ++k) {
      CAPTURE(k);
      const remat::stage& s = a.chain.stages[k];
      const remat::stage& t = b.chain.stages[k];
      CHECK(s.output_size == t.output_size);
      CHECK(s.tape_size == t.tape_size);
      CHECK(s.forward_overhead == t.forward_overhead);
      CHECK(s.recording_overhead == t.recording_overhead);
      CHECK(s.backward_overhead == t.backward_overhead);
      // An output is a tensor of its own: its bytes, exactly.
      const auto& shape = a.outputs[k];
      CHECK(s.output_size == c10::multiply_integers(shape.sizes) *
                                 static_cast<remat::size_type>(c10::elementSize(shape.dtype)));
      CHECK(s.tape_size > s.output_size);  // every stage here saves something for backward
      CHECK(s.forward_time > 0);
      CHECK(s.backward_time > 0);
      // The stage carries the recording forward's own transient where it differs.
      CHECK(a.recording_overheads[k] == remat::recording_overhead(s));
      if (s.recording_overhead) CHECK(*s.recording_overhead != s.forward_overhead);
    }
    const snapshot after = state_of(c.net);
    for (std::size_t j = 0; j < after.grads.size(); ++j)
      CHECK(same(after.grads[j], before.grads[j]));
    for (std::size_t j = 0; j < after.buffers.size(); ++j)
      CHECK(same(after.buffers[j], before.buffers[j]));
  }
}

TEST_CASE("profile: stages from a range of callables, module holders keep their module") {
  std::vector<torch::nn::Linear> layers{torch::nn::Linear(6, 5), torch::nn::Linear(5, 4)};
  const std::vector<remat::torch::stage> stages = remat::torch::stages_of(layers);
  REQUIRE(stages.size() == 2);
  CHECK(stages[0].module == layers[0].ptr());
  const remat::torch::profiled_chain p = remat::torch::profile(
      layers, torch::randn({3, 6}), [](const at::Tensor& y) { return y.sum(); });
  CHECK(p.chain.input_size == 3 * 6 * 4);
  CHECK(p.chain.stages[0].output_size == 3 * 5 * 4);
  CHECK(p.chain.stages[1].output_size == 3 * 4 * 4);
  for (const auto& l : layers)
    for (const auto& q : l->parameters()) CHECK(!q.grad().defined());
}

// remat measures the input's device: a stage that runs elsewhere would be measured as free.
// The meta device stands in for a second device (no GPU needed).
TEST_CASE("profile: a stage that moves its output to another device is refused by name") {
  const std::vector<remat::torch::stage> stages{
      {[](const at::Tensor& x) { return x * 2; }, nullptr, {}, std::vector<at::Tensor>{}},
      {[](const at::Tensor& x) { return x.to(at::kMeta); }, nullptr, {}, std::vector<at::Tensor>{}}};
  CHECK_THROWS_WITH_AS(
      remat::torch::profile(stages, torch::randn({4, 3}),
                            [](const at::Tensor& y) { return y.sum(); }),
      doctest::Contains("stage 1: returns a tensor on meta for an input on cpu"),
      remat::torch::model_error);
}

TEST_CASE("profile: a parameter on another device than the input is refused by name") {
  // A zero-dimensional CPU tensor combines with tensors of any device, so libtorch runs this.
  const at::Tensor w = torch::full({}, 1.5).requires_grad_(true);
  const std::vector<remat::torch::stage> stages{
      {[](const at::Tensor& x) { return x * 3; }, nullptr, {}, std::vector<at::Tensor>{}},
      {[w](const at::Tensor& x) { return x * w; }, nullptr, {}, std::vector<at::Tensor>{}}};
  const at::Tensor sample = torch::randn({4, 3}, at::TensorOptions().device(at::kMeta));
  CHECK_THROWS_WITH_AS(remat::torch::profile(stages, sample,
                                             [](const at::Tensor& y) { return y.sum(); }),
                       doctest::Contains("stage 1: has a parameter of [] Float on cpu for an "
                                         "input on meta"),
                       remat::torch::model_error);
}

TEST_CASE("profile: a sample on a device no meter measures is refused, naming the device") {
  const std::vector<remat::torch::stage> stages{
      {[](const at::Tensor& x) { return x * 2; }, nullptr, {}, std::vector<at::Tensor>{}}};
  const at::Tensor sample = torch::randn({4, 3}, at::TensorOptions().device(at::kMeta));
  CHECK_THROWS_WITH_AS(remat::torch::profile(stages, sample,
                                             [](const at::Tensor& y) { return y.sum(); }),
                       doctest::Contains("no memory meter for tensors on meta"),
                       std::invalid_argument);
}
