#include <remat/torch/executor.hpp>

#include <doctest/doctest.h>
#include <models.hpp>
#include <torch_cases.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
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
        remat::solve(ch, remat::max_size, {.solver = remat::solver::store_all})
            .schedule.peak_memory;
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
        restore(c.net, before);
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
        CHECK(r.op_peaks == remat::torch::expected_op_peaks(p, r.schedule.ops));
        CHECK(r.measured_peak == r.expected_peak);
        CHECK(r.expected_peak == r.schedule.peak_memory);
        const double err = std::abs(static_cast<double>(r.schedule.peak_memory - r.measured_peak)) /
                           static_cast<double>(r.schedule.peak_memory);
        CHECK(err <= 0.05);
        worst = std::max(worst, err);
        restore(c.net, before, false);
      }
    }
    // With each stage's recording overhead (F_all) apart from its no-grad one (F_none, F_ck),
    // the model's peaks are the measured ones (docs/recording-overhead.md).
    MESSAGE(c.name << ": measured and predicted peaks differ by at most " << 100 * worst << "%");
  }
}

// On a GPU: the default meter is the CUDA caching allocator's (sizes in its 512-byte blocks),
// and a recomputed stage draws its dropout masks from the CUDA generator put back. Runs where
// libtorch has CUDA and a GPU is present (tests/gpu/run.sh), says it is skipped elsewhere.
TEST_CASE("cuda: autograd's gradients with dropout, each op's peak as predicted (needs a GPU)") {
#if defined(REMAT_TORCH_CUDA)
  if (!torch::cuda::is_available()) {
    MESSAGE("skipped: no GPU (libtorch has CUDA)");
    return;
  }
  // Bitwise equality needs deterministic kernels; cuBLAS reads this before its first handle.
  setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", 0);
  at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
  const torch::Device gpu(torch::kCUDA, 0);
  for (model_case c : {resnet_case(gpu), gpt_case(gpu)}) {
    CAPTURE(c.name);
    c.net->train();
    const snapshot before = state_of(c.net);
    const remat::torch::profiled_chain p = remat::torch::profile(c.net, c.input, c.loss);
    const remat::chain& ch = p.chain;
    CHECK(ch.input_size % 512 == 0);
    for (const remat::stage& st : ch.stages) CHECK(st.output_size % 512 == 0);
    const remat::size_type store_all =
        remat::solve(ch, remat::max_size, {.solver = remat::solver::store_all})
            .schedule.peak_memory;
    for (remat::solver s : {remat::solver::optimal, remat::solver::sequential}) {
      const remat::size_type least = remat::solve(ch, 0, {.solver = s}).min_feasible_budget;
      remat::torch::executor ex(c.net, {.solve = {.solver = s}});
      ex.use_profile(p);
      for (int i = 0; i <= 2; ++i) {
        const remat::size_type budget = least + (store_all - least) * i / 2;
        CAPTURE(remat::name(s));
        CAPTURE(budget);
        const snapshot ref = reference_step(c.net, c.input, c.loss, 7);
        restore(c.net, before);
        torch::manual_seed(7);  // the CPU's and every GPU's generator
        const remat::torch::step_result r = ex.step(c.input, c.loss, budget);
        REQUIRE(r.feasible);
        const snapshot got = state_of(c.net);
        for (std::size_t j = 0; j < got.grads.size(); ++j) CHECK(same(got.grads[j], ref.grads[j]));
        for (std::size_t j = 0; j < got.buffers.size(); ++j)
          CHECK(same(got.buffers[j], ref.buffers[j]));
        CHECK(same(r.input_gradient, ref.input_grad));
        CHECK(r.measured_peak <= budget);
        CHECK(r.op_peaks == remat::torch::expected_op_peaks(p, r.schedule.ops));
        CHECK(r.as_predicted);
        restore(c.net, before, false);
      }
    }
  }
  at::globalContext().setDeterministicAlgorithms(false, false);
#else
  MESSAGE("skipped: this libtorch has no CUDA");
#endif
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
    restore(c.net, before);
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
  SUBCASE("an input on another device than the profile of its shape") {
    const std::vector<remat::torch::stage> stages{
        {[](const at::Tensor& t) { return t * 2; }, nullptr, {}, std::vector<at::Tensor>{}}};
    remat::torch::executor ex(stages);
    ex.profile(x, sum_loss());
    CHECK_THROWS_WITH_AS(ex.step(x.to(at::kMeta), sum_loss(), remat::max_size),
                         doctest::Contains("the input is on meta, the profile at its shape "
                                           "[5, 8] Float was measured on cpu"),
                         remat::torch::model_error);
  }
  SUBCASE("a budget below the least feasible: a result, nothing run") {
    model_case c = resnet_case();
    remat::torch::executor ex(c.net);
    const remat::size_type least =
        remat::solve(ex.profile(c.input, c.loss).chain, 0).min_feasible_budget;
    const remat::torch::step_result r = ex.step(c.input, c.loss, least - 1);
    CHECK(!r.feasible);
    CHECK(r.min_feasible_budget == least);
    CHECK(r.schedule.ops.empty());
    CHECK(r.measured_peak == 0);
    for (const auto& p : c.net->parameters()) CHECK(!p.grad().defined());
  }
}

namespace {

// Whether `ops` moves an activation (a) or a tape (t).
bool moves(const std::vector<remat::op>& ops, remat::tensor_kind kind) {
  return std::any_of(ops.begin(), ops.end(), [&](const remat::op& o) {
    return o.kind == remat::op_kind::offload && o.tensor == kind;
  });
}

}  // namespace

TEST_CASE("offloading: autograd's gradients, and the budget kept whatever the copies take") {
  at::set_num_threads(1);
  for (model_case c : {resnet_case(), gpt_case()}) {
    CAPTURE(c.name);
    c.net->train();
    const snapshot before = state_of(c.net);
    remat::torch::profiled_chain p = remat::torch::profile(c.net, c.input, c.loss);
    // A link on which moving a stage's tape takes about as long as its forward: offloading then
    // competes with recomputation.
    double tapes = 0, forwards = 0;
    for (const remat::stage& s : p.chain.stages) {
      tapes += static_cast<double>(s.tape_size);
      forwards += s.forward_time;
    }
    const remat::transfer_rates link{tapes / forwards, tapes / forwards};
    remat::chain linked = p.chain;
    linked.transfer = link;
    const remat::size_type store_all =
        remat::solve(linked, remat::max_size, {.solver = remat::solver::store_all})
            .schedule.peak_memory;
    const remat::size_type recompute_least =
        remat::solve(linked, 0, {.solver = remat::solver::optimal}).min_feasible_budget;

    // Copies delayed by up to 2 ms each, pseudo-randomly (the same delays every run).
    std::uint64_t state = 12345;
    auto delay = [&state](std::size_t) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      std::this_thread::sleep_for(std::chrono::microseconds((state >> 33) % 2000));
    };
    std::size_t steps = 0, compared = 0, out_of_order = 0, below_recompute = 0;
    bool moved_activation = false, moved_tape = false;
    remat::size_type most_above = 0, most_below = 0, largest_peak_difference = 0;
    for (remat::solver s : {remat::solver::offload, remat::solver::save_on_cpu,
                            remat::solver::vdnn, remat::solver::sequential_offload}) {
      CAPTURE(remat::name(s));
      const remat::size_type least = remat::solve(linked, 0, {.solver = s}).min_feasible_budget;
      if (least == remat::solve_result::no_budget) continue;
      std::vector<remat::size_type> budgets = {least, store_all};
      if (s == remat::solver::offload) {
        // The least budget it fits below recomputation's least (offloading a_0 or a
        // checkpoint saves what recomputation cannot), by bisection.
        remat::size_type infeasible = 0, below = recompute_least;
        while (below - infeasible > 1) {
          const remat::size_type mid = infeasible + (below - infeasible) / 2;
          (remat::solve(linked, mid, {.solver = s}).feasible ? below : infeasible) = mid;
        }
        if (below < recompute_least) budgets.push_back(below);
      }
      for (const bool delayed : {false, true}) {
        remat::torch::executor ex(c.net, {.solve = {.solver = s},
                                          .transfer = link,
                                          .before_copy = delayed ? std::function<void(std::size_t)>(delay)
                                                         : nullptr});
        ex.use_profile(p);
        for (const remat::size_type budget : budgets) {
          CAPTURE(budget);
          CAPTURE(delayed);
          const snapshot ref = reference_step(c.net, c.input, c.loss, 7);
          restore(c.net, before);
          torch::manual_seed(7);
          const remat::torch::step_result r = ex.step(c.input, c.loss, budget);
          REQUIRE(r.feasible);
          ++steps;
          below_recompute += budget < recompute_least;
          moved_activation |= moves(r.schedule.ops, remat::tensor_kind::activation);
          moved_tape |= moves(r.schedule.ops, remat::tensor_kind::tape);
          const snapshot got = state_of(c.net);
          for (std::size_t j = 0; j < got.grads.size(); ++j)
            CHECK(same(got.grads[j], ref.grads[j]));
          for (std::size_t j = 0; j < got.buffers.size(); ++j)
            CHECK(same(got.buffers[j], ref.buffers[j]));
          CHECK(same(r.input_gradient, ref.input_grad));
          // The guarantee: never above the model's peak, whatever the timing.
          CHECK(r.measured_peak <= r.schedule.peak_memory);
          CHECK(r.schedule.peak_memory <= budget);
          CHECK(r.within_budget);
          // Where the timing was as predicted, each op allocated what the model says.
          CHECK(r.as_predicted);
          for (std::size_t i = 0; i < r.schedule.ops.size(); ++i) {
            if (remat::is_transfer(r.schedule.ops[i].kind)) continue;
            const remat::size_type d = r.op_peaks[i] - r.expected_op_peaks[i];
            if (r.in_predicted_order[i]) {
              ++compared;
            } else {
              ++out_of_order;
              most_above = std::max(most_above, d);
              most_below = std::max(most_below, -d);
            }
          }
          largest_peak_difference =
              std::max(largest_peak_difference, r.expected_peak - r.measured_peak);
          restore(c.net, before, false);
        }
      }
    }
    CHECK(moved_activation);
    CHECK(moved_tape);
    CHECK(below_recompute > 0);
    CHECK(compared > 0);
    MESSAGE(c.name << ": " << steps << " offloading steps (" << below_recompute
                   << " below recomputation's least budget). Compute ops whose copies came in "
                      "the predicted order: "
                   << compared << ", each allocated the prediction to the byte; the "
                   << out_of_order << " others (a copy ran during them, or earlier or later than "
                      "predicted) allocated at most "
                   << most_above << " bytes more and " << most_below
                   << " bytes less than their prediction. Step peaks: at most "
                   << largest_peak_difference << " bytes below the prediction, never above.");
  }
}

// On a GPU: offloads and prefetches on two CUDA streams of their own, into pinned host memory;
// gradients as plain autograd's and the caching allocator's peak within the model's, with copies
// as they come and delayed. Runs where libtorch has CUDA and a GPU is present (tests/gpu/run.sh).
TEST_CASE("cuda offloading: autograd's gradients, the budget kept (needs a GPU)") {
#if defined(REMAT_TORCH_CUDA)
  if (!torch::cuda::is_available()) {
    MESSAGE("skipped: no GPU (libtorch has CUDA)");
    return;
  }
  setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", 0);
  at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
  const torch::Device gpu(torch::kCUDA, 0);
  for (model_case c : {resnet_case(gpu), gpt_case(gpu)}) {
    CAPTURE(c.name);
    c.net->train();
    const snapshot before = state_of(c.net);
    const remat::torch::profiled_chain p = remat::torch::profile(c.net, c.input, c.loss);
    double tapes = 0, forwards = 0;
    for (const remat::stage& s : p.chain.stages) {
      tapes += static_cast<double>(s.tape_size);
      forwards += s.forward_time;
    }
    const remat::transfer_rates link{tapes / forwards, tapes / forwards};
    remat::chain linked = p.chain;
    linked.transfer = link;
    const remat::size_type store_all =
        remat::solve(linked, remat::max_size, {.solver = remat::solver::store_all})
            .schedule.peak_memory;
    bool moved_activation = false, moved_tape = false;
    for (remat::solver s : {remat::solver::offload, remat::solver::save_on_cpu,
                            remat::solver::vdnn}) {
      CAPTURE(remat::name(s));
      const remat::size_type least = remat::solve(linked, 0, {.solver = s}).min_feasible_budget;
      if (least == remat::solve_result::no_budget) continue;
      for (const bool delayed : {false, true}) {
        remat::torch::executor ex(
            c.net, {.solve = {.solver = s},
                    .transfer = link,
                    .before_copy = delayed ? std::function<void(std::size_t)>([](std::size_t i) {
                      std::this_thread::sleep_for(std::chrono::microseconds(300 * (i % 5)));
                    })
                                           : nullptr});
        ex.use_profile(p);
        for (const remat::size_type budget : {least, (least + store_all) / 2}) {
          CAPTURE(budget);
          CAPTURE(delayed);
          const snapshot ref = reference_step(c.net, c.input, c.loss, 7);
          restore(c.net, before);
          torch::manual_seed(7);
          const remat::torch::step_result r = ex.step(c.input, c.loss, budget);
          REQUIRE(r.feasible);
          moved_activation |= moves(r.schedule.ops, remat::tensor_kind::activation);
          moved_tape |= moves(r.schedule.ops, remat::tensor_kind::tape);
          const snapshot got = state_of(c.net);
          for (std::size_t j = 0; j < got.grads.size(); ++j)
            CHECK(same(got.grads[j], ref.grads[j]));
          for (std::size_t j = 0; j < got.buffers.size(); ++j)
            CHECK(same(got.buffers[j], ref.buffers[j]));
          CHECK(same(r.input_gradient, ref.input_grad));
          CHECK(r.measured_peak <= r.schedule.peak_memory);
          CHECK(r.within_budget);
          restore(c.net, before, false);
        }
      }
    }
    CHECK(moved_activation);
    CHECK(moved_tape);
  }
  at::globalContext().setDeterministicAlgorithms(false, false);
#else
  MESSAGE("skipped: this libtorch has no CUDA");
#endif
}

TEST_CASE("offloading: bad input is named") {
  at::set_num_threads(1);
  torch::manual_seed(4);
  torch::nn::Sequential net(torch::nn::Linear(8, 8), torch::nn::ReLU(), torch::nn::Linear(8, 8));
  CHECK_THROWS_WITH_AS(
      remat::torch::executor(net, {.transfer = {-1, 1}}),
      doctest::Contains("executor_options::transfer: a bandwidth must be finite and >= 0"),
      std::invalid_argument);
  // vDNN offloads the input a_0; here it is a view of a larger tensor: the step runs on a copy.
  const at::Tensor batch = torch::randn({10, 8});
  const at::Tensor x = batch.slice(0, 0, 5);
  const at::Tensor batch_before = batch.clone();
  for (auto& q : net->parameters()) q.mutable_grad() = torch::zeros_like(q);
  at::Tensor xr = x.detach().requires_grad_(true);
  sum_loss()(net->forward(xr)).backward();
  std::vector<at::Tensor> want;
  for (auto& q : net->parameters()) {
    want.push_back(q.grad().clone());
    q.mutable_grad().zero_();
  }
  remat::torch::executor ex(net, {.solve = {.solver = remat::solver::vdnn}, .transfer = {1e3, 1e3}});
  const remat::torch::step_result r = ex.step(x, sum_loss(), remat::max_size);
  REQUIRE(r.feasible);
  CHECK(moves(r.schedule.ops, remat::tensor_kind::activation));
  CHECK(r.measured_peak <= r.schedule.peak_memory);
  CHECK(r.as_predicted);
  CHECK(torch::equal(r.input_gradient, xr.grad()));
  std::size_t j = 0;
  for (auto& q : net->parameters()) CHECK(torch::equal(q.grad(), want[j++]));
  CHECK(torch::equal(batch, batch_before));

  // A copy that fails (here, its hook) stops the step before the backward: nothing changed.
  for (auto& q : net->parameters()) q.mutable_grad().reset();
  remat::torch::executor failing(
      net, {.solve = {.solver = remat::solver::vdnn},
            .transfer = {1e3, 1e3},
            .before_copy = [](std::size_t) { throw std::runtime_error("no link today"); }});
  CHECK_THROWS_WITH_AS(failing.step(x, sum_loss(), remat::max_size), "no link today",
                       std::runtime_error);
  for (const auto& q : net->parameters()) CHECK(!q.grad().defined());
  CHECK(torch::equal(x, batch_before.slice(0, 0, 5)));

  // A stage that keeps a tensor of its own alive (a cache) has a tape larger than its output
  // and what autograd saved: offloading that tape is refused, naming the stage.
  auto cache = std::make_shared<std::vector<at::Tensor>>();
  torch::nn::Sequential leaky(
      torch::nn::Linear(8, 8), torch::nn::Functional([cache](const at::Tensor& t) {
        cache->push_back(t.detach() * 2);
        return torch::relu(t);
      }),
      torch::nn::Linear(8, 8));
  remat::torch::executor moving(
      leaky, {.solve = {.solver = remat::solver::save_on_cpu}, .transfer = {1e3, 1e3}});
  CHECK_THROWS_WITH_AS(moving.step(x, sum_loss(), remat::max_size),
                       doctest::Contains("stage 1, F_all: the tape t_2 is 320 bytes, but its "
                                         "output and what autograd saved that this stage "
                                         "allocated are 160"),
                       remat::torch::model_error);
  for (const auto& q : leaky->parameters()) CHECK(!q.grad().defined());
}

namespace {

// Whether op `op` waits for op `on` to end (`released`: for offload `on` to release its copy).
bool waits_for(const remat::torch::detail::transfer_plan& p, std::size_t op, std::size_t on,
               bool released) {
  using until = remat::detail::stream_wait::until;
  const auto& g = p.program;
  return std::any_of(g.waits.begin() + static_cast<std::ptrdiff_t>(g.waits_begin[op]),
                     g.waits.begin() + static_cast<std::ptrdiff_t>(g.waits_begin[op + 1]),
                     [&](const auto& w) {
                       return w.op == on && (w.what == until::released) == released;
                     });
}

}  // namespace

TEST_CASE("offloading: each allocation waits for the frees the model puts before it") {
  // docs/offload.md's chain A: F_all(0) O(0,a) F_all(1) loss B(1) P(0,a) B(0).
  remat::chain c;
  c.input_size = 5;
  c.stages = {{4, 4, 1, 1, 0, 0}, {4, 8, 1, 1, 0, 0}};
  c.loss_time = 1;
  c.loss_overhead = 20;
  const std::vector<remat::op> ops = {
      {remat::op_kind::forward_all, 0},
      {remat::op_kind::offload, 0, remat::tensor_kind::activation},
      {remat::op_kind::forward_all, 1},
      {remat::op_kind::loss, 2},
      {remat::op_kind::backward, 1},
      {remat::op_kind::prefetch, 0, remat::tensor_kind::activation},
      {remat::op_kind::backward, 0}};
  SUBCASE("a_0's copy ends with F_all(0): everything after waits for its free") {
    c.transfer = {5.0 / 4, 5.0 / 4};
    const auto p = remat::torch::detail::make_transfer_plan(c, ops);
    CHECK(p.program.waits_begin[1] == p.program.waits_begin[2]);  // a_0 is ready from the start
    CHECK(p.program.release_after[1] == 0);  // F_all(0) reads a_0: the release waits for it too
    for (const std::size_t i : {2UL, 3UL, 4UL, 6UL}) CHECK(waits_for(p, i, 1, true));
    CHECK(waits_for(p, 5, 1, true));   // the host copy, and its memory
    CHECK(waits_for(p, 5, 3, false));  // the loss frees its transient before P allocates
    CHECK(!waits_for(p, 5, 4, false));  // P runs beside B(1)
    CHECK(waits_for(p, 6, 5, false));   // B(0) reads what P brought back
  }
  SUBCASE("at 5/12 the copy runs until 12: F_all(1), the loss and B(1) allocate beside it") {
    c.transfer = {5.0 / 12, 5.0 / 12};
    const auto p = remat::torch::detail::make_transfer_plan(c, ops);
    for (const std::size_t i : {2UL, 3UL, 4UL}) CHECK(!waits_for(p, i, 1, true));
    CHECK(waits_for(p, 5, 1, true));
    CHECK(waits_for(p, 6, 1, true));
  }
}
