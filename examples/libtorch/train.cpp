// Trains two real libtorch networks (a ResNet with bottleneck blocks and batch norm, a GPT-style
// transformer with dropout) on the CPU under memory budgets, with remat's schedules run through
// autograd, and prints for each what remat predicted and what was measured.
//
//   train_libtorch [STEPS] [--out DIR]
//
// Per model: the chain as profiled here (remat-solve --info's figures; with --out, the chain file
// too, DIR/<model>.json, for remat-solve), then one row per run of STEPS training steps (SGD from
// the same initial weights, the same batch and the same dropout seed): store-all, `optimal` at
// four budgets from the least feasible up, and `sequential` (PyTorch's checkpoint_sequential) at
// the same budgets. Columns: the budget, the model's predicted peak, the measured peak (the most
// allocated during a step above the parameters, gradients and optimizer state, plus the input),
// the predicted step time (the schedule's makespan from the profiled times), the measured one
// (median over the steps), and whether the weights after training equal store-all's bit for bit.
// One thread, so that the CPU kernels are deterministic.
#include <remat/io/chain_json.hpp>
#include <remat/solve.hpp>
#include <remat/torch/executor.hpp>
#include <remat/torch/profile.hpp>

#include "models.hpp"
#include "solve_command.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace {

struct workload {
  std::string name;
  torch::nn::Sequential net;
  torch::Tensor input;
  remat::torch::loss_function loss;
};

workload resnet_workload() {
  torch::manual_seed(1);
  workload w{"resnet-6x32-b16-32px", models::resnet(6, 32, 10), torch::randn({16, 3, 32, 32}), {}};
  const torch::Tensor labels = torch::randint(10, {16}, torch::kLong);
  w.loss = [labels](const torch::Tensor& y) {
    return torch::nn::functional::cross_entropy(y, labels);
  };
  return w;
}

workload gpt_workload() {
  torch::manual_seed(2);
  workload w{"gpt-6x128-b8-s64",
             models::gpt(6, 128, 4, 256, 64, 0.1),
             torch::randint(256, {8, 64}, torch::kLong),
             {}};
  const torch::Tensor targets = torch::randint(256, {8, 64}, torch::kLong);
  w.loss = [targets](const torch::Tensor& y) { return models::next_token_loss(y, targets); };
  return w;
}

std::string mib(remat::size_type bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

struct run_result {
  bool feasible = false;
  remat::size_type min_budget = 0;
  remat::size_type predicted_peak = 0, measured_peak = 0;
  double predicted_ms = 0, measured_ms = 0;
  std::vector<torch::Tensor> weights;
};

// STEPS steps of SGD from the initial state, with the schedule of `solver` at `budget`.
run_result train(workload& w, const remat::torch::profiled_chain& p,
                 const std::vector<torch::Tensor>& initial, remat::solver solver,
                 remat::size_type budget, int steps) {
  {
    torch::NoGradGuard no_grad;
    auto state = w.net->parameters();
    const auto buffers = w.net->buffers();
    state.insert(state.end(), buffers.begin(), buffers.end());
    for (std::size_t i = 0; i < state.size(); ++i) state[i].copy_(initial[i]);
  }
  torch::optim::SGD opt(w.net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  remat::torch::executor ex(w.net, {.solve = {.solver = solver}});
  ex.use_profile(p);
  torch::manual_seed(3);
  run_result out;
  std::vector<double> times;
  for (int s = 0; s < steps; ++s) {
    opt.zero_grad();
    const remat::torch::step_result r = ex.step(w.input, w.loss, budget);
    if (!r.feasible) {
      out.min_budget = r.min_feasible_budget;
      return out;
    }
    opt.step();
    out.feasible = true;
    out.predicted_peak = r.schedule.peak_memory;
    out.predicted_ms = r.schedule.makespan;
    out.measured_peak = std::max(out.measured_peak, r.measured_peak);
    times.push_back(r.measured_ms);
  }
  std::sort(times.begin(), times.end());
  out.measured_ms = times[times.size() / 2];
  for (const auto& q : w.net->parameters()) out.weights.push_back(q.detach().clone());
  return out;
}

bool same_weights(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!torch::equal(a[i], b[i])) return false;
  return true;
}

void run_model(workload w, int steps, const std::string& out_dir) {
  w.net->train();
  const remat::torch::profiled_chain p = remat::torch::profile(w.net, w.input, w.loss);
  remat::io::chain_file file{p.chain, w.name + " (libtorch, CPU, 1 thread)", {}, "ms", "bytes"};
  std::printf("%s", remat::tools::format_info(remat::tools::compute_info(file, {})).c_str());
  if (!out_dir.empty()) {
    remat::io::write_chain_file(std::filesystem::path(out_dir) / (w.name + ".json"), file);
  }

  std::vector<torch::Tensor> initial;
  {
    torch::NoGradGuard no_grad;
    for (const auto& q : w.net->parameters()) initial.push_back(q.detach().clone());
    for (const auto& b : w.net->buffers()) initial.push_back(b.detach().clone());
  }
  const remat::size_type store_all =
      remat::solve(p.chain, remat::max_size, {.solver = remat::solver::store_all})
          .schedule.peak_memory;
  const remat::size_type least = remat::solve(p.chain, 0).min_feasible_budget;
  std::vector<remat::size_type> budgets;
  for (int i = 0; i < 4; ++i) budgets.push_back(least + (store_all - least) * i / 4);

  std::printf("\n%-11s %12s %15s %14s %13s %12s  %s\n", "solver", "budget MiB", "predicted MiB",
              "measured MiB", "predicted ms", "measured ms", "weights");
  const run_result reference = train(w, p, initial, remat::solver::store_all, store_all, steps);
  auto row = [&](remat::solver s, remat::size_type budget, const run_result& r) {
    if (!r.feasible) {
      std::printf("%-11s %12s  does not fit (needs %s MiB)\n", std::string(remat::name(s)).c_str(),
                  mib(budget).c_str(), mib(r.min_budget).c_str());
      return;
    }
    std::printf("%-11s %12s %15s %14s %13.1f %12.1f  %s\n", std::string(remat::name(s)).c_str(),
                mib(budget).c_str(), mib(r.predicted_peak).c_str(), mib(r.measured_peak).c_str(),
                r.predicted_ms, r.measured_ms,
                same_weights(r.weights, reference.weights) ? "= store-all" : "DIFFER");
  };
  row(remat::solver::store_all, store_all, reference);
  for (remat::solver s : {remat::solver::optimal, remat::solver::sequential})
    for (remat::size_type b : budgets) row(s, b, train(w, p, initial, s, b, steps));
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 3;
  std::string out_dir;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--out" && i + 1 < argc) {
      out_dir = argv[++i];
    } else if (!arg.empty() && arg.find_first_not_of("0123456789") == std::string::npos &&
               std::atoi(arg.c_str()) > 0) {
      steps = std::atoi(arg.c_str());
    } else {
      std::fprintf(stderr, "usage: train_libtorch [STEPS] [--out DIR]\n");
      return 2;
    }
  }
  at::set_num_threads(1);
  run_model(resnet_workload(), steps, out_dir);
  run_model(gpt_workload(), steps, out_dir);
}
