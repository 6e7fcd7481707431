// remat::torch::split_script: whole TorchScript modules cut at their graph's cut points. The
// modules are written in TorchScript here (torch::jit::Module::define), so the tests need no
// Python; torchvision's networks scripted whole by Python are cut too where the pieces fixture
// made them. Each: the cuts expected, then every solver at budgets from its least to store-all,
// with gradients, input gradient and buffers bitwise equal to plain autograd through the whole
// module's forward, and every op's measured peak the predicted one.
#include <chain_cases.hpp>

#include <remat/torch/executor.hpp>
#include <remat/torch/script.hpp>

#include <doctest/doctest.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

using namespace chain_cases;
namespace jit = torch::jit;

namespace {

// A script module of class `name` with `forward` (TorchScript source), its parameters and
// buffers registered first, in training mode.
jit::Module scripted(const std::string& name,
                     const std::vector<std::pair<std::string, at::Tensor>>& parameters,
                     const std::vector<std::pair<std::string, at::Tensor>>& buffers,
                     const std::vector<std::pair<std::string, jit::Module>>& children,
                     const std::string& source) {
  jit::Module m(name);
  m.register_attribute("training", c10::BoolType::get(), true);
  for (const auto& [n, p] : parameters)
    m.register_parameter(n, p.clone().requires_grad_(true), false);
  for (const auto& [n, b] : buffers) m.register_buffer(n, b.clone());
  for (const auto& [n, c] : children) m.register_module(n, c);
  m.define(source);
  return m;
}

jit::Module linear(std::int64_t in, std::int64_t out) {
  return scripted(
      "Linear", {{"weight", torch::randn({out, in}) / 8}, {"bias", torch::randn({out}) / 8}}, {},
      {}, "def forward(self, x):\n    return torch.linear(x, self.weight, self.bias)\n");
}

jit::Module relu_in_place() {
  return scripted("ReLU", {}, {}, {}, "def forward(self, x):\n    return torch.relu_(x)\n");
}

jit::Module conv(std::int64_t in, std::int64_t out, std::int64_t k, std::int64_t stride) {
  const std::string s = std::to_string(stride), p = std::to_string(k / 2);
  return scripted("Conv", {{"weight", torch::randn({out, in, k, k}) / static_cast<double>(3 * k)}},
                  {}, {},
                  "def forward(self, x):\n    return torch.conv2d(x, self.weight, None, [" + s +
                      ", " + s + "], [" + p + ", " + p + "])\n");
}

// Batch norm as torch.nn.BatchNorm2d scripts it: the batch count updated in place in training.
jit::Module batch_norm(std::int64_t c) {
  return scripted(
      "BatchNorm", {{"weight", torch::ones({c})}, {"bias", torch::zeros({c})}},
      {{"running_mean", torch::zeros({c})},
       {"running_var", torch::ones({c})},
       {"num_batches_tracked", torch::zeros({}, torch::kLong)}},
      {},
      "def forward(self, x):\n"
      "    if self.training:\n"
      "        self.num_batches_tracked.add_(1)\n"
      "    return torch.batch_norm(x, self.weight, self.bias, self.running_mean,\n"
      "                            self.running_var, self.training, 0.1, 1e-5, False)\n");
}

// An MLP whose ReLUs are in place (torch.nn.ReLU(inplace=True)).
jit::Module mlp() {
  return scripted("MLP", {}, {},
                  {{"fc0", linear(16, 32)},
                   {"act0", relu_in_place()},
                   {"fc1", linear(32, 32)},
                   {"act1", relu_in_place()},
                   {"fc2", linear(32, 32)},
                   {"act2", relu_in_place()},
                   {"fc3", linear(32, 5)}},
                  "def forward(self, x):\n"
                  "    x = self.act0.forward(self.fc0.forward(x))\n"
                  "    x = self.act1.forward(self.fc1.forward(x))\n"
                  "    x = self.act2.forward(self.fc2.forward(x))\n"
                  "    return self.fc3.forward(x)\n");
}

// A ResNet basic block: conv-bn-relu, conv-bn, the shortcut added in place, relu in place.
jit::Module basic_block(std::int64_t in, std::int64_t out, std::int64_t stride) {
  std::vector<std::pair<std::string, jit::Module>> children{{"conv1", conv(in, out, 3, stride)},
                                                            {"bn1", batch_norm(out)},
                                                            {"relu", relu_in_place()},
                                                            {"conv2", conv(out, out, 3, 1)},
                                                            {"bn2", batch_norm(out)}};
  std::string shortcut = "    identity = x\n";
  if (stride != 1 || in != out) {
    children.emplace_back("down_conv", conv(in, out, 1, stride));
    children.emplace_back("down_bn", batch_norm(out));
    shortcut = "    identity = self.down_bn.forward(self.down_conv.forward(x))\n";
  }
  return scripted("BasicBlock", {}, {}, children,
                  "def forward(self, x):\n"
                  "    out = self.relu.forward(self.bn1.forward(self.conv1.forward(x)))\n"
                  "    out = self.bn2.forward(self.conv2.forward(out))\n" +
                      shortcut +
                      "    out += identity\n"
                      "    return self.relu.forward(out)\n");
}

jit::Module resnet() {
  return scripted("ResNet", {}, {},
                  {{"conv1", conv(3, 8, 3, 1)},
                   {"bn1", batch_norm(8)},
                   {"relu", relu_in_place()},
                   {"layer1", basic_block(8, 8, 1)},
                   {"layer2", basic_block(8, 16, 2)},
                   {"fc", linear(16, 10)}},
                  "def forward(self, x):\n"
                  "    x = self.relu.forward(self.bn1.forward(self.conv1.forward(x)))\n"
                  "    x = self.layer2.forward(self.layer1.forward(x))\n"
                  "    x = torch.adaptive_avg_pool2d(x, [1, 1])\n"
                  "    x = torch.flatten(x, 1)\n"
                  "    return self.fc.forward(x)\n");
}

// The model the chain checks take: the stages split_script made, the whole module as reference.
model whole_model(const std::string& name, jit::Module m, const remat::torch::script_split& s,
                  at::Tensor input, std::int64_t classes) {
  model out{name, s.stages, std::move(input), {}, {}, {}};
  for (const at::Tensor& p : m.parameters()) out.parameters.push_back(p);
  for (const at::Tensor& b : m.buffers()) out.buffers.push_back(b);
  out.whole = [m](const at::Tensor& x) mutable { return m.forward({x}).toTensor(); };
  torch::manual_seed(21);
  out.loss = cross_entropy(torch::randint(classes, {out.input.size(0)}, torch::kLong));
  return out;
}

bool dropped_with(const remat::torch::script_split& s, const std::string& reason) {
  for (const remat::torch::dropped_cut& d : s.dropped)
    if (d.reason.find(reason) != std::string::npos) return true;
  return false;
}

std::string describe(const remat::torch::script_split& s) {
  std::string out;
  for (std::size_t k = 0; k < s.stages.size(); ++k)
    out += "  stage " + std::to_string(k) + ": " + std::to_string(s.block_nodes[k]) +
           " nodes, passes " + s.cuts[k] + "\n";
  for (const remat::torch::dropped_cut& d : s.dropped)
    out += "  dropped " + d.value + ": " + d.reason + "\n";
  return out;
}

}  // namespace

TEST_CASE("split_script: an MLP with in-place ReLUs keeps each ReLU with its linear") {
  torch::manual_seed(22);
  jit::Module m = mlp();
  const remat::torch::script_split s = remat::torch::split_script(m);
  MESSAGE("mlp:\n" << describe(s));
  // Seven ops; the cuts before the three relu_ are dropped (relu_ writes into its input).
  CHECK(s.stages.size() == 4);
  CHECK(s.block_nodes == std::vector<std::size_t>{2, 2, 2, 1});
  REQUIRE(s.dropped.size() == 3);
  for (const remat::torch::dropped_cut& d : s.dropped)
    CHECK(d.reason == "a later op (aten::relu_) writes into it, or into a view of it, in place");
  for (const remat::torch::stage& st : s.stages) {
    CHECK(st.buffers.has_value());
    CHECK(st.buffers->empty());
    CHECK(st.parameters.size() == 2);  // its linear's weight and bias
  }
  check_every_schedule(whole_model("scripted mlp", m, s, torch::randn({8, 16}), 5));
}

TEST_CASE("split_script: a ResNet with batch norm and skip connections") {
  torch::manual_seed(23);
  jit::Module m = resnet();
  const remat::torch::script_split s = remat::torch::split_script(m);
  MESSAGE("resnet:\n" << describe(s));
  // The stem's conv, then its batch norm with its in-place ReLU; each residual block whole (its
  // input is alive until the shortcut is added); the pooling; the flatten (a view of the pooled
  // tensor) with the classifier.
  CHECK(s.stages.size() == 6);
  CHECK(dropped_with(s, "a later op (aten::relu_) writes into it"));
  CHECK(dropped_with(s, "the block would return its input or a view of it"));
  // Each stage declares the buffers its batch norms update, and only those.
  std::size_t declared = 0;
  for (const remat::torch::stage& st : s.stages) declared += st.buffers->size();
  CHECK(declared == m.buffers().size());
  CHECK(s.stages[0].buffers->empty());
  check_every_schedule(whole_model("scripted resnet", m, s, torch::randn({4, 3, 8, 8}), 10));
}

// The schedules check_every_schedule runs depend on the measured times (the solvers pick among
// schedules of equal memory by time), so a schedule whose memory the profile mispredicts would
// show only on the machines whose timings make a solver pick it. Here the times are drawn at
// random (fixed seeds), so that the optimal and exhaustive solvers pick many different schedules
// at many budgets, each of which must keep autograd's results and every op's predicted peak.
TEST_CASE("split_script: a ResNet's schedules under many timings, each op as predicted") {
  torch::manual_seed(23);
  jit::Module m = resnet();
  const remat::torch::script_split s = remat::torch::split_script(m);
  const model mm = whole_model("scripted resnet", m, s, torch::randn({4, 3, 8, 8}), 10);
  at::set_num_threads(1);
  const state before = state_of(mm);
  const remat::torch::profiled_chain measured = remat::torch::profile(mm.stages, mm.input, mm.loss);
  std::mt19937 random(48);
  std::uniform_int_distribution<int> time(1, 100);
  std::set<std::string> seen;
  for (int draw = 0; draw < 12; ++draw) {
    remat::torch::profiled_chain p = measured;
    for (remat::stage& st : p.chain.stages) {
      st.forward_time = time(random);
      st.backward_time = time(random);
    }
    const remat::chain& ch = p.chain;
    const remat::size_type store_all =
        remat::solve(ch, remat::max_size, {.solver = remat::solver::store_all})
            .schedule.peak_memory;
    remat::torch::executor ex(mm.stages);
    ex.use_profile(p);
    for (remat::solver solver : {remat::solver::optimal, remat::solver::exhaustive}) {
      const remat::size_type least = remat::solve(ch, 0, {.solver = solver}).min_feasible_budget;
      ex.solve_with({.solver = solver});
      for (int i = 0; i <= 16; ++i) {
        const remat::size_type budget = least + (store_all - least) * i / 16;
        const std::string ops =
            remat::to_string(remat::solve(ch, budget, {.solver = solver}).schedule);
        if (!seen.insert(ops).second) continue;
        const remat::torch::step_result r = step_beside_autograd(mm, ex, before, budget);
        CHECK(remat::to_string(r.schedule) == ops);
        CAPTURE(draw);
        CAPTURE(remat::name(solver));
        CAPTURE(budget);
        CAPTURE(ops);
        CHECK(r.op_peaks == r.expected_op_peaks);
        CHECK(r.as_predicted);
        CHECK(r.measured_peak <= budget);
      }
    }
  }
  MESSAGE(seen.size() << " different schedules run");
  CHECK(seen.size() >= 3);  // the draws reach different schedules
}

TEST_CASE("split_script: a value that is no tensor crossing a cut point drops it") {
  torch::manual_seed(24);
  jit::Module m = scripted("Scaled", {}, {},
                           {{"fc0", linear(8, 8)}, {"fc1", linear(8, 8)}, {"fc2", linear(8, 3)}},
                           "def forward(self, x):\n"
                           "    h = torch.relu(self.fc0.forward(x))\n"
                           "    n = h.size(1)\n"
                           "    h = torch.relu(self.fc1.forward(h))\n"
                           "    return self.fc2.forward(h) * n\n");
  const remat::torch::script_split s = remat::torch::split_script(m);
  MESSAGE("scaled:\n" << describe(s));
  // fc0, its relu, then the rest: n is read by the last op, so no cut after it is used.
  CHECK(s.stages.size() == 3);
  CHECK(s.dropped.size() == 3);
  CHECK(dropped_with(s, "(int) crosses it"));
  check_every_schedule(whole_model("scaled", m, s, torch::randn({4, 8}), 3));
}

TEST_CASE("split_script: what it refuses, by name") {
  jit::Module two =
      scripted("Two", {}, {}, {}, "def forward(self, x, mask):\n    return x * mask\n");
  CHECK_THROWS_WITH_AS(
      remat::torch::split_script(two),
      "split_script: forward takes (x: Tensor, mask: Tensor); it must take one tensor "
      "(pass the stages by hand for more inputs)",
      remat::torch::model_error);
  jit::Module tuple =
      scripted("Tuple", {}, {}, {}, "def forward(self, x):\n    return x + 1, x * 2\n");
  CHECK_THROWS_WITH_AS(remat::torch::split_script(tuple),
                       "split_script: forward returns (Tensor, Tensor), not one tensor",
                       remat::torch::model_error);
  jit::Module view = scripted("View", {}, {}, {}, "def forward(self, x):\n    return x.view(-1)\n");
  CHECK_THROWS_WITH_AS(remat::torch::split_script(view),
                       "split_script: forward returns a view of its input",
                       remat::torch::model_error);
  jit::Module counter =
      scripted("Counter", {}, {}, {},
               "def forward(self, x):\n    self.training = False\n    return x * 2\n");
  CHECK_THROWS_WITH_AS(
      remat::torch::split_script(counter),
      doctest::Contains("forward assigns the module attribute 'training' (prim::SetAttr)"),
      remat::torch::model_error);
}

#if defined(REMAT_TORCH_PIECES)
TEST_CASE("split_script: torchvision's resnet18 and mobilenet_v2, scripted whole by Python") {
  // resnet18: the stem's conv; its batch norm and ReLU; the max pooling; each basic block; the
  // average pooling; the flatten (a view) with the classifier. mobilenet_v2: the stem's conv;
  // its batch norm and ReLU6; each inverted residual (one node: it branches on an attribute,
  // use_res_connect); the last conv; its batch norm and ReLU6; the pooling; the flatten (a view)
  // with the dropout; the linear.
  for (const auto& [net, stages] :
       {std::pair<std::string, std::size_t>{"resnet18", 13}, {"mobilenet_v2", 24}}) {
    CAPTURE(net);
    jit::Module m = jit::load(std::string(REMAT_TORCH_PIECES) + "/" + net + ".pt");
    const remat::torch::script_split s = remat::torch::split_script(m);
    MESSAGE(net << ":\n" << describe(s));
    CHECK(s.stages.size() == stages);
    CHECK(dropped_with(s, "the block would return its input or a view of it"));
    torch::manual_seed(25);
    check_every_schedule(
        whole_model(net + " (scripted whole)", m, s, torch::randn({2, 3, 32, 32}), 10));
  }
}
#endif
