// Tests of remat::cuda::executor. Without a GPU only the error type and the failure to allocate
// are checked, and the program exits with 77 (ctest: skipped) saying so.
//
// With a GPU: an MLP (examples/cuda/device_mlp.hpp) is trained for two steps under store-all and
// under every solver's schedule at several budgets, eagerly, with poisoning, and as a replayed
// CUDA graph; parameters, their gradients and g_0 must be bit-identical to store-all. The device
// memory the executor takes must be its planned arena, and running must allocate nothing.
#include <remat/cuda/error.hpp>
#include <remat/cuda/executor.hpp>
#include <remat/plan.hpp>

#include "count_allocations.hpp"
#include "device_mlp.hpp"

#include <cuda_runtime_api.h>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

int failures = 0;
int checks = 0;

void expect(bool ok, const char* what, int line) {
  ++checks;
  if (ok) return;
  ++failures;
  std::fprintf(stderr, "executor.cpp:%d: FAILED: %s\n", line, what);
}
#define EXPECT(cond) expect(static_cast<bool>(cond), #cond, __LINE__)

using remat::size_type;
using remat::testing::allocations_during;

constexpr int batch = 32;

void error_type() {
  const remat::cuda_error e(cudaErrorInvalidValue, "cudaFoo(1, 2)", "here.cpp:12");
  EXPECT(e.status() == cudaErrorInvalidValue);
  EXPECT(e.call() == "cudaFoo(1, 2)");
  EXPECT(e.place() == "here.cpp:12");
  const std::string what = e.what();
  EXPECT(what.find("cudaFoo(1, 2) failed at here.cpp:12") != std::string::npos);
  EXPECT(what.find("cudaErrorInvalidValue") != std::string::npos);
  bool thrown = false;
  try {
    REMAT_CUDA_CHECK(cudaErrorMemoryAllocation);
  } catch (const remat::cuda_error& err) {
    thrown = err.status() == cudaErrorMemoryAllocation &&
             err.call() == "cudaErrorMemoryAllocation" &&
             err.place().find("executor.cpp:") != std::string::npos;
  }
  EXPECT(thrown);
  REMAT_CUDA_CHECK(cudaSuccess);  // does not throw
}

remat::memory_plan store_all_plan(const remat::chain& c) {
  const remat::plan_result p = remat::plan(
      c, remat::max_size,
      {.solve = {.solver = remat::solver::store_all}, .alignment = remat::cuda::arena_alignment});
  if (!p.feasible) throw std::logic_error("store-all does not fit an unlimited budget");
  return p.memory;
}

// What a training run leaves: parameters and gradients, g_0, and the last loss.
struct outcome {
  std::vector<float> parameters_and_gradients;
  std::vector<std::byte> input_gradient;
  float loss = 0;
};

enum class mode { eager, poison, graph };
const char* name(mode m) {
  return m == mode::eager ? "eager" : m == mode::poison ? "poison" : "graph";
}

outcome train(const std::vector<int>& widths, const remat::memory_plan& plan, mode m,
              cudaStream_t stream, int steps = 2) {
  device_mlp net(batch, widths, 1);
  remat::cuda::executor ex(plan, stream, {.poison = m == mode::poison});
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<float>> inputs;  // alive until the copies are done
  for (int step = 0; step < steps; ++step) {
    inputs.emplace_back(ex.input().size / sizeof(float));
    for (float& v : inputs.back()) v = normal(rng);
    REMAT_CUDA_CHECK(cudaMemcpyAsync(ex.input().data, inputs.back().data(), ex.input().size,
                                     cudaMemcpyHostToDevice, stream));
    net.zero_gradients(stream);
    if (m == mode::graph) {
      if (!ex.captured()) ex.capture(net);
      ex.replay();
    } else {
      ex.run(net);
    }
    net.sgd(0.05f, stream);
  }
  outcome out;
  out.parameters_and_gradients = net.parameters_and_gradients(stream);
  out.input_gradient.resize(ex.input_gradient().size);
  REMAT_CUDA_CHECK(cudaMemcpyAsync(out.input_gradient.data(), ex.input_gradient().data,
                                   out.input_gradient.size(), cudaMemcpyDeviceToHost, stream));
  out.loss = net.last_loss(stream);
  return out;
}

bool identical(const outcome& a, const outcome& b) {
  return a.parameters_and_gradients.size() == b.parameters_and_gradients.size() &&
         std::memcmp(a.parameters_and_gradients.data(), b.parameters_and_gradients.data(),
                     a.parameters_and_gradients.size() * sizeof(float)) == 0 &&
         a.input_gradient == b.input_gradient &&
         std::bit_cast<std::uint32_t>(a.loss) == std::bit_cast<std::uint32_t>(b.loss);
}

void gradients_match_store_all(const std::vector<int>& widths, cudaStream_t stream) {
  const remat::chain c = device_mlp::chain_of(batch, widths);
  const remat::memory_plan reference_plan = store_all_plan(c);
  const outcome reference = train(widths, reference_plan, mode::eager, stream);
  bool finite = std::isfinite(reference.loss), nonzero = false;
  for (const float v : reference.parameters_and_gradients) {
    finite = finite && std::isfinite(v);
    nonzero = nonzero || v != 0.0f;
  }
  EXPECT(finite);
  EXPECT(nonzero);
  EXPECT(identical(train(widths, reference_plan, mode::graph, stream), reference));

  const size_type top = reference_plan.lower_bound;
  const size_type least = remat::solve(c, top).min_feasible_budget;
  int schedules = 0, recomputing = 0;
  for (const remat::solver s : remat::all_solvers) {
    if (s == remat::solver::exhaustive && c.length() > remat::exhaustive_max_stages) continue;
    if (remat::needs_link(s)) continue;  // executors run schedules without transfers
    for (const double f : {0.0, 0.3, 0.6, 1.0}) {
      const auto budget = least + static_cast<size_type>(f * static_cast<double>(top - least)) +
                          static_cast<size_type>(c.length()) * remat::cuda::arena_alignment * 2;
      remat::plan_result p;
      try {
        p = remat::plan(c, budget,
                        {.solve = {.solver = s}, .alignment = remat::cuda::arena_alignment});
      } catch (const remat::solver_error& e) {
        std::printf("  solver %s skipped: %s\n", std::string(remat::name(s)).c_str(), e.what());
        continue;
      }
      if (!p.feasible) continue;
      ++schedules;
      recomputing += p.solution.plan.ops.size() > 2 * c.length() + 1;
      EXPECT(p.memory.arena_bytes <= budget);
      for (const mode m : {mode::eager, mode::poison, mode::graph}) {
        const bool same = identical(train(widths, p.memory, m, stream), reference);
        if (!same)
          std::fprintf(stderr, "  %s at budget %lld, %s: gradients differ from store-all\n",
                       std::string(remat::name(s)).c_str(), static_cast<long long>(budget),
                       name(m));
        EXPECT(same);
      }
    }
  }
  std::printf(
      "  %zu stages: %d schedules (%d with recomputation) x 3 modes bit-identical to "
      "store-all\n",
      c.length(), schedules, recomputing);
  EXPECT(schedules >= 6);
  EXPECT(recomputing >= 3);
}

void memory_is_the_arena(cudaStream_t stream) {
  // Big enough that the arena is many 2 MiB pages: the driver's granularity.
  const std::vector<int> widths = {1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024, 16};
  constexpr int big_batch = 512;
  const remat::chain c = device_mlp::chain_of(big_batch, widths);
  const size_type top = store_all_plan(c).lower_bound;
  const remat::plan_result p = remat::plan(c, top / 2, {.alignment = remat::cuda::arena_alignment});
  EXPECT(p.feasible);
  if (!p.feasible) return;
  device_mlp net(big_batch, widths, 3);
  void* warm = nullptr;  // any first-allocation cost of the context is paid here
  REMAT_CUDA_CHECK(cudaMalloc(&warm, 1));
  REMAT_CUDA_CHECK(cudaFree(warm));
  REMAT_CUDA_CHECK(cudaDeviceSynchronize());
  std::size_t free_before = 0, free_built = 0, free_warm = 0, free_after = 0, total = 0;
  REMAT_CUDA_CHECK(cudaMemGetInfo(&free_before, &total));
  {
    remat::cuda::executor ex(p.memory, stream);
    REMAT_CUDA_CHECK(cudaMemGetInfo(&free_built, &total));
    const auto taken = static_cast<size_type>(free_before - free_built);
    const size_type arena = p.memory.arena_bytes;
    std::printf(
        "  arena %lld bytes (lower bound %lld, ratio %.4f); device memory taken by the "
        "executor: %lld bytes\n",
        static_cast<long long>(arena), static_cast<long long>(p.memory.lower_bound),
        p.memory.ratio(), static_cast<long long>(taken));
    EXPECT(ex.arena().size == static_cast<std::size_t>(arena));
    EXPECT(taken >= arena);
    EXPECT(taken <= arena + (size_type{2} << 20));  // the driver's page rounding, no more

    net.zero_gradients(stream);
    ex.run(net);  // loads the kernels' module, which may take device memory once
    REMAT_CUDA_CHECK(cudaStreamSynchronize(stream));
    REMAT_CUDA_CHECK(cudaMemGetInfo(&free_warm, &total));
    EXPECT(allocations_during([&] {
             for (int i = 0; i < 3; ++i) ex.run(net);
           }) == 0);
    REMAT_CUDA_CHECK(cudaStreamSynchronize(stream));
    REMAT_CUDA_CHECK(cudaMemGetInfo(&free_after, &total));
    EXPECT(free_after == free_warm);  // running takes no device memory

    ex.capture(net);
    ex.replay();
    REMAT_CUDA_CHECK(cudaStreamSynchronize(stream));
    REMAT_CUDA_CHECK(cudaMemGetInfo(&free_warm, &total));
    EXPECT(allocations_during([&] {
             for (int i = 0; i < 3; ++i) ex.replay();
           }) == 0);
    REMAT_CUDA_CHECK(cudaStreamSynchronize(stream));
    REMAT_CUDA_CHECK(cudaMemGetInfo(&free_after, &total));
    EXPECT(free_after == free_warm);
  }
}

// Forwards to a network, and makes a failing runtime call after one forward.
struct failing_after_forward {
  device_mlp& net;
  std::int32_t stage;
  void forward(const remat::cuda::forward_call& f, cudaStream_t s) {
    net.forward(f, s);
    int count = 0;
    if (f.stage == stage && cudaGetDeviceCount(&count) == cudaSuccess)
      (void)cudaSetDevice(count);  // no such device: an error the executor must catch
  }
  void backward(const remat::cuda::backward_call& b, cudaStream_t s) { net.backward(b, s); }
  void loss(const remat::cuda::loss_call& l, cudaStream_t s) { net.loss(l, s); }
};

struct throwing_loss {
  device_mlp& net;
  void forward(const remat::cuda::forward_call& f, cudaStream_t s) { net.forward(f, s); }
  void backward(const remat::cuda::backward_call& b, cudaStream_t s) { net.backward(b, s); }
  void loss(const remat::cuda::loss_call&, cudaStream_t) { throw std::runtime_error("no loss"); }
};

void errors_name_the_op(cudaStream_t stream) {
  const std::vector<int> widths = {32, 48, 32, 16};
  device_mlp net(batch, widths, 5);
  remat::cuda::executor ex(store_all_plan(net.chain()), stream);

  bool logic = false;
  try {
    ex.replay();
  } catch (const std::logic_error&) {
    logic = true;
  }
  EXPECT(logic);

  bool caught = false;
  try {
    ex.run(failing_after_forward{net, 1});
  } catch (const remat::cuda_error& e) {
    caught = e.status() == cudaErrorInvalidDevice &&
             e.place().find("forward(1), op 1") != std::string::npos;
    std::printf("  a failing call inside a callback: %s\n", e.what());
  }
  EXPECT(caught);

  bool thrown = false;
  try {
    ex.capture(throwing_loss{net});
  } catch (const std::runtime_error& e) {
    thrown = std::string(e.what()) == "no loss";
  }
  EXPECT(thrown);
  EXPECT(!ex.captured());
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusActive;
  REMAT_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  EXPECT(status == cudaStreamCaptureStatusNone);
  ex.run(net);  // the executor and the stream still work
  REMAT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

int no_device(cudaError_t why) {
  // Allocating an arena must fail with a cuda_error that names cudaMalloc.
  bool caught = false;
  try {
    remat::cuda::executor ex(store_all_plan(device_mlp::chain_of(batch, {8, 8, 8})), nullptr);
  } catch (const remat::cuda_error& e) {
    caught = e.status() != cudaSuccess && e.call().find("cudaMalloc") != std::string::npos;
    std::printf("without a device, building an executor throws: %s\n", e.what());
  }
  EXPECT(caught);
  if (failures > 0) return 1;
  std::printf(
      "SKIP: no CUDA device (%s): %d checks of the error type passed, the GPU tests were "
      "not run\n",
      cudaGetErrorName(why), checks);
  return 77;
}

}  // namespace

int main() {
  try {
    error_type();
    int devices = 0;
    const cudaError_t found = cudaGetDeviceCount(&devices);
    if (found != cudaSuccess || devices == 0)
      return no_device(found != cudaSuccess ? found : cudaErrorNoDevice);
    cudaDeviceProp prop{};
    REMAT_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("device 0: %s\n", prop.name);
    cudaStream_t stream = nullptr;
    REMAT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    std::printf("gradients against store-all\n");
    gradients_match_store_all({64, 96, 48, 128, 80, 96, 64, 112, 48, 80, 96, 64, 10}, stream);
    gradients_match_store_all({40, 72, 56, 88, 64, 24}, stream);
    std::printf("device memory\n");
    memory_is_the_arena(stream);
    std::printf("errors\n");
    errors_name_the_op(stream);
    REMAT_CUDA_CHECK(cudaStreamDestroy(stream));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAILED: unexpected exception: %s\n", e.what());
    return 1;
  }
  std::printf("%d checks, %d failed\n", checks, failures);
  return failures == 0 ? 0 : 1;
}
