// A training step of a libtorch model run by remat::torch::executor: the measured time against
// the makespan remat predicts from the profiled stage times, per solver and budget.
//
// Models: the ResNet and the GPT of examples/libtorch, one CPU thread. Budgets: the least the
// solver fits, a third and two thirds of the way to store-all's peak, and store-all's peak.
// Counters: `predicted_ms` (the schedule's makespan), `measured_ms` (the step's wall time, mean)
// and `ratio` (measured / predicted), plus the budget and the measured peak in MiB.
//
// Offloading (`offload`, `save_on_cpu`, `vdnn`, `sequential_offload`): the executor gets a link
// on which moving a stage's tape takes about as long as its forward (the tapes' bytes over the
// forwards' time, each way); its copies are memcpy's on two threads. The least budget is the
// least `offload` fits (by bisection: below recomputation's where offloading a_0 or a checkpoint
// helps). Extra counter: `wait_ms`, how long the compute stream waited (for a copy, or for the
// memory a copy still held) in a step, mean.
#include <remat/solve.hpp>
#include <remat/torch/executor.hpp>
#include <remat/torch/profile.hpp>

#include <benchmark/benchmark.h>
#include <models.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

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

bool moves_tensors(remat::solver s) {
  return s == remat::solver::offload || remat::needs_link(s);
}

// A link on which moving a stage's tape takes about as long as its forward.
remat::transfer_rates link_of(const remat::chain& c) {
  double tapes = 0, forwards = 0;
  for (const remat::stage& s : c.stages) {
    tapes += static_cast<double>(s.tape_size);
    forwards += s.forward_time;
  }
  return {tapes / forwards, tapes / forwards};
}

// How long the compute stream waited in a step: before each compute op or wait, the time since
// the one before it ended.
double compute_wait_ms(const remat::torch::step_result& r) {
  double wait = 0, free_at = 0;
  for (std::size_t i = 0; i < r.schedule.ops.size(); ++i) {
    const remat::op_kind k = r.schedule.ops[i].kind;
    if (k == remat::op_kind::offload || k == remat::op_kind::prefetch) continue;
    if (free_at > 0) wait += std::max(0.0, r.op_start_ms[i] - free_at);
    free_at = r.op_end_ms[i];
  }
  return wait;
}

void step(benchmark::State& state, workload& (*model)(), remat::solver solver) {
  workload& w = model();
  remat::chain c = w.profile.chain;
  const bool offloads = moves_tensors(solver);
  if (offloads) c.transfer = link_of(c);
  const remat::size_type store_all =
      remat::solve(c, remat::max_size, {.solver = remat::solver::store_all}).schedule.peak_memory;
  remat::size_type least = remat::solve(c, 0, {.solver = solver}).min_feasible_budget;
  if (solver == remat::solver::offload) {
    remat::size_type infeasible = 0;
    while (least - infeasible > 1) {
      const remat::size_type mid = infeasible + (least - infeasible) / 2;
      (remat::solve(c, mid, {.solver = solver}).feasible ? least : infeasible) = mid;
    }
  }
  const remat::size_type budget = least + (store_all - least) * state.range(0) / 3;
  remat::torch::executor ex(w.net, {.solve = {.solver = solver}, .transfer = c.transfer});
  ex.use_profile(w.profile);
  double measured = 0, predicted = 0, wait = 0;
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
    predicted = r.schedule.makespan;
    peak = std::max(peak, r.measured_peak);
    wait += compute_wait_ms(r);
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["budget_MiB"] = static_cast<double>(budget) / (1 << 20);
  state.counters["peak_MiB"] = static_cast<double>(peak) / (1 << 20);
  state.counters["predicted_ms"] = predicted;
  state.counters["measured_ms"] = measured / n;
  state.counters["ratio"] = measured / n / predicted;
  if (offloads) state.counters["wait_ms"] = wait / n;
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
REMAT_TORCH_STEP(resnet, offload);
REMAT_TORCH_STEP(resnet, save_on_cpu);
REMAT_TORCH_STEP(resnet, vdnn);
REMAT_TORCH_STEP(gpt, offload);
REMAT_TORCH_STEP(gpt, save_on_cpu);
REMAT_TORCH_STEP(gpt, vdnn);

}  // namespace
