// Training a perceptron on the GPU under several memory budgets, eagerly and as a CUDA graph.
//
//   train_mlp_cuda [--layers 16] [--width 1024] [--batch 256] [--steps 10]
//
// For store-all and a few smaller budgets: plan (solve, place in one arena within the budget),
// train `steps` steps with remat::cuda::executor, print the time per step, and check that the
// weights and gradients end bit-identical to store-all's. Exits 1 if they do not, 0 without a GPU.
#include "device_mlp.hpp"

#include <remat/cuda/error.hpp>
#include <remat/cuda/executor.hpp>
#include <remat/plan.hpp>

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <random>
#include <string>
#include <vector>

namespace {

struct settings {
  int layers = 16, width = 1024, batch = 256, steps = 10;
};

settings parse(int argc, char** argv) {
  settings s;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (flag == "--layers")
      s.layers = value;
    else if (flag == "--width")
      s.width = value;
    else if (flag == "--batch")
      s.batch = value;
    else if (flag == "--steps")
      s.steps = value;
  }
  return s;
}

struct result {
  float ms_per_step = 0;
  std::vector<float> parameters_and_gradients;
  float loss = 0;
};

// Trains a fresh network: one step to warm up (module loading, graph capture), then `steps`
// timed steps. Every network starts from the same weights and sees the same batches.
result train(const settings& s, const std::vector<int>& widths, const remat::memory_plan& plan,
             bool graph, const std::vector<std::vector<float>>& batches, cudaStream_t stream) {
  device_mlp net(s.batch, widths, 1);
  remat::cuda::executor ex(plan, stream);
  cudaEvent_t start = nullptr, stop = nullptr;
  REMAT_CUDA_CHECK(cudaEventCreate(&start));
  REMAT_CUDA_CHECK(cudaEventCreate(&stop));
  for (int step = 0; step <= s.steps; ++step) {
    if (step == 1) REMAT_CUDA_CHECK(cudaEventRecord(start, stream));
    const std::vector<float>& x = batches[static_cast<std::size_t>(step)];
    REMAT_CUDA_CHECK(cudaMemcpyAsync(ex.input().data, x.data(), ex.input().size,
                                     cudaMemcpyHostToDevice, stream));
    net.zero_gradients(stream);
    if (graph) {
      if (!ex.captured()) ex.capture(net);
      ex.replay();
    } else {
      ex.run(net);
    }
    net.sgd(0.01f, stream);
  }
  REMAT_CUDA_CHECK(cudaEventRecord(stop, stream));
  REMAT_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  REMAT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  REMAT_CUDA_CHECK(cudaEventDestroy(start));
  REMAT_CUDA_CHECK(cudaEventDestroy(stop));
  return {ms / static_cast<float>(s.steps), net.parameters_and_gradients(stream),
          net.last_loss(stream)};
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  const settings s = parse(argc, argv);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: nothing to train\n");
    return 0;
  }
  try {
    std::vector<int> widths(static_cast<std::size_t>(s.layers), s.width);
    widths.push_back(16);
    const remat::chain c = device_mlp::chain_of(s.batch, widths);
    const remat::size_type store_all =
        remat::solve(c, remat::max_size, {.solver = remat::solver::store_all}).min_feasible_budget;

    std::mt19937 rng(3);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<std::vector<float>> batches(static_cast<std::size_t>(s.steps) + 1);
    for (auto& x : batches) {
      x.resize(static_cast<std::size_t>(s.batch) * static_cast<std::size_t>(s.width));
      for (float& v : x) v = normal(rng);
    }
    cudaStream_t stream = nullptr;
    REMAT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

    std::printf("%d layers of width %d, batch %d, %d steps; store-all peak %.1f MiB\n", s.layers,
                s.width, s.batch, s.steps, static_cast<double>(store_all) / (1 << 20));
    std::printf("%-10s %11s %11s %7s %5s %11s %11s %9s %s\n", "budget", "arena MiB", "bound MiB",
                "ratio", "ops", "eager ms", "graph ms", "loss", "vs store-all");
    std::vector<float> reference;
    bool all_identical = true;
    for (const double fraction : {1.0, 0.6, 0.4, 0.25}) {
      const auto budget = static_cast<remat::size_type>(fraction * static_cast<double>(store_all)) +
                          (fraction == 1.0 ? remat::size_type{64} << 20 : 0);  // room to align
      const remat::plan_result p = remat::plan(
          c, budget,
          {.solve = {.solver = fraction == 1.0 ? remat::solver::store_all : remat::solver::optimal},
           .alignment = remat::cuda::arena_alignment});
      const std::string label =
          fraction == 1.0 ? "store-all" : std::to_string(static_cast<int>(fraction * 100)) + "%";
      if (!p.feasible) {
        std::printf("%-10s %s\n", label.c_str(), p.reason.c_str());
        if (reference.empty()) return 1;  // store-all must run: it is the reference
        continue;
      }
      const result eager = train(s, widths, p.memory, false, batches, stream);
      const result graph = train(s, widths, p.memory, true, batches, stream);
      if (reference.empty()) reference = eager.parameters_and_gradients;
      const bool identical = same_bits(eager.parameters_and_gradients, reference) &&
                             same_bits(graph.parameters_and_gradients, reference);
      all_identical = all_identical && identical;
      std::printf("%-10s %11.1f %11.1f %7.4f %5zu %11.3f %11.3f %9.5f %s\n", label.c_str(),
                  static_cast<double>(p.memory.arena_bytes) / (1 << 20),
                  static_cast<double>(p.memory.lower_bound) / (1 << 20), p.memory.ratio(),
                  p.solution.schedule.ops.size(), static_cast<double>(eager.ms_per_step),
                  static_cast<double>(graph.ms_per_step), static_cast<double>(eager.loss),
                  identical ? "identical" : "DIFFERENT");
    }
    REMAT_CUDA_CHECK(cudaStreamDestroy(stream));
    return all_identical ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
