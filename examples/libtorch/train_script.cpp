// Trains a network saved from Python in TorchScript pieces, under a memory budget.
//
//   /usr/bin/python3 examples/libtorch/export_pieces.py resnet18 pieces
//   train_script pieces/resnet18 [STEPS]
//
// Each piece (00.pt, 01.pt, ... in order) is one stage: `stages_of` takes the script modules
// with their parameters and buffers. The budget is a third of the way from the least that any
// schedule fits to what storing everything takes; every step says what it measured against what
// the profile predicted.
#include <remat/solve.hpp>
#include <remat/torch/executor.hpp>

#include <torch/script.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: train_script PIECES_DIR [STEPS]\n");
    return 2;
  }
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(argv[1]))
    if (e.path().extension() == ".pt") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "train_script: no .pt pieces in %s\n", argv[1]);
    return 2;
  }
  std::vector<torch::jit::Module> pieces;
  std::vector<at::Tensor> parameters;
  for (const auto& f : files) {
    pieces.push_back(torch::jit::load(f.string()));
    for (const at::Tensor& p : pieces.back().parameters()) parameters.push_back(p);
  }
  const int steps = argc == 3 ? std::atoi(argv[2]) : 3;

  at::set_num_threads(1);
  torch::manual_seed(0);
  const at::Tensor images = torch::randn({8, 3, 64, 64});
  const at::Tensor labels = torch::randint(10, {8}, torch::kLong);
  auto loss = [&](const at::Tensor& y) { return torch::nn::functional::cross_entropy(y, labels); };

  remat::torch::executor ex(pieces, {.enforce_budget = true});
  const remat::chain& chain = ex.profile(images, loss).chain;
  const remat::size_type all =
      remat::solve(chain, remat::max_size, {.solver = remat::solver::store_all})
          .schedule.peak_memory;
  const remat::size_type least = remat::solve(chain, 0).min_feasible_budget;
  const remat::size_type budget = least + (all - least) / 3;
  std::printf("%zu pieces; store-all peaks at %lld bytes, the least budget is %lld; budget %lld\n",
              pieces.size(), static_cast<long long>(all), static_cast<long long>(least),
              static_cast<long long>(budget));

  torch::optim::SGD opt(parameters, 0.01);
  for (int i = 0; i < steps; ++i) {
    opt.zero_grad();
    const remat::torch::step_result r = ex.step(images, loss, budget);
    opt.step();
    std::printf("step %d: loss %.4f, measured peak %lld bytes (predicted %lld, %s), %.1f ms\n", i,
                r.loss, static_cast<long long>(r.measured_peak),
                static_cast<long long>(r.expected_peak),
                r.as_predicted ? "every op as predicted" : "NOT as predicted", r.measured_ms);
    if (!r.within_budget || !r.as_predicted) return 1;
  }
}
