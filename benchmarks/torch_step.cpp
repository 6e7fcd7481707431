// A training step of a libtorch model run by remat::torch::executor: the measured time against
// the makespan remat predicts from the profiled stage times, per solver and budget.
//
// Models: the ResNet and the GPT of examples/libtorch, one CPU thread. Budgets: the least the
// solver fits, a third and two thirds of the way to store-all's peak, and store-all's peak.
// Counters: `predicted_ms` (the schedule's makespan), `measured_ms` (the step's wall time, mean)
// and `ratio` (measured / predicted), plus the budget and the measured peak in MiB.
#include <remat/solve.hpp>
#include <remat/torch/executor.hpp>
#include <remat/torch/profile.hpp>

#include <benchmark/benchmark.h>
#include <models.hpp>

#include <torch/torch.h>

#include <map>
#include <string>

namespace {

struct workload {
  torch::nn::Sequential net;
  torch::Tensor input;
  remat::torch::loss_function loss;
  remat::torch::profiled_chain profile;
};

workload& resnet() {
  static workload w = [] {
    at::set_num_threads(1);
    torch::manual_seed(1);
    workload r{models::resnet(6, 32, 10), torch::randn({16, 3, 32, 32}), {}, {}};
    const torch::Tensor labels = torch::randint(10, {16}, torch::kLong);
    r.loss = [labels](const torch::Tensor& y) {
      return torch::nn::functional::cross_entropy(y, labels);
    };
    r.profile = remat::torch::profile(r.net, r.input, r.loss);
    return r;
  }();
  return w;
}

workload& gpt() {
  static workload w = [] {
    at::set_num_threads(1);
    torch::manual_seed(2);
    workload r{
        models::gpt(6, 64, 4, 256, 64, 0.1), torch::randint(256, {8, 64}, torch::kLong), {}, {}};
    const torch::Tensor targets = torch::randint(256, {8, 64}, torch::kLong);
    r.loss = [targets](const torch::Tensor& y) { return models::next_token_loss(y, targets); };
    r.profile = remat::torch::profile(r.net, r.input, r.loss);
    return r;
  }();
  return w;
}

void step(benchmark::State& state, workload& (*model)(), remat::solver solver) {
  workload& w = model();
  const remat::chain& c = w.profile.chain;
  const remat::size_type store_all =
      remat::solve(c, remat::max_size, {.solver = remat::solver::store_all}).plan.peak_memory;
  const remat::size_type least = remat::solve(c, 0, {.solver = solver}).min_feasible_budget;
  const remat::size_type budget = least + (store_all - least) * state.range(0) / 3;
  remat::torch::executor ex(w.net, {.solve = {.solver = solver}});
  ex.use_profile(w.profile);
  double measured = 0, predicted = 0;
  remat::size_type peak = 0;
  for (auto _ : state) {
    for (auto& p : w.net->parameters())
      if (p.grad().defined()) p.mutable_grad().zero_();
    const remat::torch::step_result r = ex.step(w.input, w.loss, budget);
    if (!r.feasible) {
      state.SkipWithError("no schedule fits");
      return;
    }
    measured += r.measured_ms;
    predicted = r.plan.makespan;
    peak = r.measured_peak;
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["budget_MiB"] = static_cast<double>(budget) / (1 << 20);
  state.counters["peak_MiB"] = static_cast<double>(peak) / (1 << 20);
  state.counters["predicted_ms"] = predicted;
  state.counters["measured_ms"] = measured / n;
  state.counters["ratio"] = measured / n / predicted;
}

#define REMAT_TORCH_STEP(model, kind)                                  \
  BENCHMARK_CAPTURE(step, model##_##kind, &model, remat::solver::kind) \
      ->DenseRange(0, 3)                                               \
      ->Unit(benchmark::kMillisecond)                                  \
      ->MinTime(0.5)

REMAT_TORCH_STEP(resnet, optimal);
REMAT_TORCH_STEP(resnet, sequential);
REMAT_TORCH_STEP(gpt, optimal);
REMAT_TORCH_STEP(gpt, sequential);

}  // namespace
