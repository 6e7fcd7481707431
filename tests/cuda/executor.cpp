// Tests of remat::cuda::executor. Without a GPU only the error type and the failure to allocate
// are checked, and the program exits with 77 (ctest: skipped) saying so.
//
// With a GPU: an MLP (examples/cuda/device_mlp.hpp) is trained for two steps under store-all and
// under every solver's schedule at several budgets, eagerly, with poisoning, and as a replayed
// CUDA graph; parameters, their gradients and g_0 must be bit-identical to store-all. The device
// memory the executor takes must be its planned arena, and running must allocate nothing.
//
// Offloading: the MLP, and a network of integer hashes computed alike on the CPU and the GPU
// (word_net.hpp), are trained under the offloading solvers' schedules (copies on the executor's
// copy streams, the plan's waits as events); the GPU's results must be bit-identical to store-all's
// and to the host executor's on the same plans, eagerly, poisoned and as graphs. A timed run's
// measured op times must keep the plan (check_run), and running must allocate nothing.
#include <remat/check_plan.hpp>
#include <remat/cuda/error.hpp>
#include <remat/cuda/executor.hpp>
#include <remat/host_executor.hpp>  // before plan.hpp: its constructor's `plan` would shadow remat::plan
#include <remat/plan.hpp>

#include "count_allocations.hpp"
#include "device_mlp.hpp"
#include "word_net.hpp"

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

// Runs `once` once (it may load the kernels' module and take device memory then), then three
// times more: those allocate nothing on the host and take no device memory.
template <class Once>
void expect_steady(cudaStream_t stream, Once once) {
  once();
  REMAT_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::size_t free_warm = 0, free_after = 0, total = 0;
  REMAT_CUDA_CHECK(cudaMemGetInfo(&free_warm, &total));
  EXPECT(allocations_during([&] {
           for (int i = 0; i < 3; ++i) once();
         }) == 0);
  REMAT_CUDA_CHECK(cudaStreamSynchronize(stream));
  REMAT_CUDA_CHECK(cudaMemGetInfo(&free_after, &total));
  EXPECT(free_after == free_warm);
}

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
      recomputing += p.solution.schedule.ops.size() > 2 * c.length() + 1;
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
  std::size_t free_before = 0, free_built = 0, total = 0;
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
    expect_steady(stream, [&] { ex.run(net); });
    ex.capture(net);
    expect_steady(stream, [&] { ex.replay(); });
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

// The four offloading solvers, each at budgets from its least to store-all's peak: `visit(s,
// budget, plan)` for every plan that fits (arena within the budget, as plan() promises).
template <class Visit>
int for_offloading_plans(const remat::chain& c, const std::vector<double>& fractions,
                         Visit&& visit) {
  const size_type top = store_all_plan(c).lower_bound;
  int plans = 0;
  for (const remat::solver s : {remat::solver::offload, remat::solver::save_on_cpu,
                                remat::solver::vdnn, remat::solver::sequential_offload}) {
    const size_type least =
        remat::solve(c, top, {.solver = s, .slots = remat::exact_units}).min_feasible_budget;
    EXPECT(least != remat::solve_result::no_budget);
    if (least == remat::solve_result::no_budget) continue;
    for (const double f : fractions) {
      const auto budget = least + static_cast<size_type>(f * static_cast<double>(top - least)) +
                          static_cast<size_type>(c.length()) * remat::cuda::arena_alignment * 2;
      const remat::plan_result p = remat::plan(
          c, budget, {.solve = {.solver = s}, .alignment = remat::cuda::arena_alignment});
      if (!p.feasible) continue;
      EXPECT(p.memory.arena_bytes <= budget);
      ++plans;
      visit(s, budget, p.memory);
    }
  }
  return plans;
}

// The word net's offloading plans: the chain, and the host executor's results under store-all.
struct word_case {
  std::vector<word_math::u32> words = {1024, 1536, 1024, 2048, 768, 1536, 1024, 2048, 512};
  word_math::u32 rounds = 3;
  remat::chain chain() const {
    remat::chain c = word_net::chain_of(words, rounds);
    c.transfer = {4.0, 4.0};  // a 4 KiB activation moves in a fifth of its forward
    return c;
  }
  std::size_t stages() const { return words.size() - 1; }
};

// Without a GPU too: on the host executor, every offloading plan of the word net gives
// store-all's words (what the GPU's are then compared with).
void word_net_on_the_host() {
  const word_case w;
  const word_net::outcome reference =
      word_net::train_on_host(store_all_plan(w.chain()), w.stages(), w.rounds);
  int offloading = 0;
  const int plans = for_offloading_plans(
      w.chain(), {0.0, 0.3, 1.0}, [&](remat::solver, size_type, const remat::memory_plan& plan) {
        offloading += plan.has_transfers();
        EXPECT(word_net::train_on_host(plan, w.stages(), w.rounds) == reference);
      });
  std::printf("word net on the host executor: %d plans (%d offloading) give store-all's words\n",
              plans, offloading);
  EXPECT(offloading >= 8);
}

void word_net_matches_host_executor(cudaStream_t stream) {
  const word_case w;
  const remat::chain c = w.chain();
  const remat::memory_plan all = store_all_plan(c);
  const word_net::outcome reference = word_net::train_on_host(all, w.stages(), w.rounds);
  EXPECT(word_net::train_on_device(all, w.stages(), w.rounds, word_net::mode::eager, stream) ==
         reference);
  int offloading = 0;
  const int plans = for_offloading_plans(
      c, {0.0, 0.3, 1.0}, [&](remat::solver s, size_type budget, const remat::memory_plan& plan) {
        offloading += plan.has_transfers();
        for (const word_net::mode m :
             {word_net::mode::eager, word_net::mode::poison, word_net::mode::graph}) {
          const bool same =
              word_net::train_on_device(plan, w.stages(), w.rounds, m, stream) == reference;
          if (!same)
            std::fprintf(stderr,
                         "  %s at budget %lld, %s: the GPU's words differ from the host's\n",
                         std::string(remat::name(s)).c_str(), static_cast<long long>(budget),
                         word_net::name(m));
          EXPECT(same);
        }
      });
  std::printf("  word net: %d plans (%d offloading) x 3 modes bit-identical to the host executor\n",
              plans, offloading);
}

void mlp_offloading_matches_store_all(const std::vector<int>& widths, cudaStream_t stream) {
  remat::chain c = device_mlp::chain_of(batch, widths);
  c.transfer = {8.0, 8.0};  // a typical activation moves in about a quarter of its forward
  const outcome reference = train(widths, store_all_plan(c), mode::eager, stream);
  int offloading = 0;
  const int plans = for_offloading_plans(
      c, {0.0, 0.5}, [&](remat::solver s, size_type budget, const remat::memory_plan& plan) {
        offloading += plan.has_transfers();
        for (const mode m : {mode::eager, mode::poison, mode::graph}) {
          const bool same = identical(train(widths, plan, m, stream), reference);
          if (!same)
            std::fprintf(stderr, "  %s at budget %lld, %s: gradients differ from store-all\n",
                         std::string(remat::name(s)).c_str(), static_cast<long long>(budget),
                         name(m));
          EXPECT(same);
        }
      });
  std::printf("  MLP, %zu stages: %d plans (%d offloading) x 3 modes bit-identical to store-all\n",
              c.length(), plans, offloading);
  EXPECT(offloading >= 4);
}

// An offloading plan of the word net with 256 KiB activations, at save-on-cpu's least budget.
remat::memory_plan offloading_plan(const std::vector<word_math::u32>& words,
                                   word_math::u32 rounds) {
  remat::chain c = word_net::chain_of(words, rounds);
  c.transfer = {16.0, 16.0};
  const size_type least =
      remat::solve(c, remat::max_size, {.solver = remat::solver::save_on_cpu}).min_feasible_budget;
  const remat::plan_result p = remat::plan(
      c, least + static_cast<size_type>(c.length()) * 4096,
      {.solve = {.solver = remat::solver::save_on_cpu}, .alignment = remat::cuda::arena_alignment});
  if (!p.feasible || !p.memory.has_transfers())
    throw std::logic_error("save-on-cpu found no offloading plan: " + p.reason);
  return p.memory;
}

void offloading_runs_allocate_nothing_and_keep_the_plan(cudaStream_t stream) {
  const std::vector<word_math::u32> words(9, 65536);
  constexpr word_math::u32 rounds = 16;
  const remat::memory_plan plan = offloading_plan(words, rounds);
  word_net::device_word_net net(words.size() - 1, rounds);
  remat::cuda::executor ex(plan, stream, {.timing = true});
  EXPECT(plan.host_bytes > 0);
  EXPECT(ex.host_pool().size() == static_cast<std::size_t>(plan.host_bytes));
  EXPECT(ex.offload_stream() != nullptr && ex.prefetch_stream() != nullptr);
  bool before_run = false;
  try {
    (void)ex.last_run();
  } catch (const std::logic_error&) {
    before_run = true;
  }
  EXPECT(before_run);

  net.zero_gradients(stream);
  expect_steady(stream, [&] { ex.run(net); });

  // The times the events measured: every buffer's bytes were free when it was created.
  const remat::cuda::run_times& t = ex.last_run();
  const remat::run_memory seen = remat::check_run(plan, t.start, t.end);
  if (!seen.ok())
    std::fprintf(stderr, "  a measured run broke the plan: %s\n", seen.problem.c_str());
  EXPECT(seen.ok());
  EXPECT(seen.live_peak <= plan.arena_bytes);
  bool ordered = t.seconds > 0;
  for (std::size_t i = 0; i < t.start.size(); ++i) ordered = ordered && t.end[i] >= t.start[i];
  EXPECT(ordered);
  std::printf("  a timed offloading run: %zu ops in %.3f ms, check_run: %s\n", t.start.size(),
              t.seconds * 1e3, seen.ok() ? "kept" : seen.problem.c_str());

  ex.capture(net);
  expect_steady(stream, [&] { ex.replay(); });
}

struct throwing_word_loss {
  word_net::device_word_net& net;
  void forward(const remat::cuda::forward_call& f, cudaStream_t s) { net.forward(f, s); }
  void backward(const remat::cuda::backward_call& b, cudaStream_t s) { net.backward(b, s); }
  void loss(const remat::cuda::loss_call&, cudaStream_t) { throw std::runtime_error("no loss"); }
};

// A capture that fails halfway, with copies already forked off the stream, leaves the stream
// out of capture and the executor usable; its later runs give the host executor's results.
void offloading_capture_failure_leaves_a_usable_stream(cudaStream_t stream) {
  const std::vector<word_math::u32> words(7, 4096);
  constexpr word_math::u32 rounds = 2;
  const remat::memory_plan plan = offloading_plan(words, rounds);
  const std::size_t stages = words.size() - 1;
  word_net::device_word_net net(stages, rounds);
  remat::cuda::executor ex(plan, stream);
  bool thrown = false;
  try {
    ex.capture(throwing_word_loss{net});
  } catch (const std::runtime_error& e) {
    thrown = std::string(e.what()) == "no loss";
  }
  EXPECT(thrown);
  EXPECT(!ex.captured());
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusActive;
  REMAT_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  EXPECT(status == cudaStreamCaptureStatusNone);
  (void)cudaGetLastError();  // what the abandoned capture left is not the next run's
  bool ran = true;
  try {
    const std::vector<word_math::u32> x = word_net::input_of(ex.input().size / 4, 0);
    REMAT_CUDA_CHECK(cudaMemcpyAsync(ex.input().data, x.data(), ex.input().size,
                                     cudaMemcpyHostToDevice, stream));
    net.zero_gradients(stream);
    ex.run(net);
    net.update(stream);
    const word_net::outcome got = net.result(ex.input_gradient(), stream);
    EXPECT(got == word_net::train_on_host(plan, stages, rounds, 1));
  } catch (const std::exception& e) {
    ran = false;
    std::fprintf(stderr, "  a run after the failed capture threw: %s\n", e.what());
  }
  EXPECT(ran);
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
  caught = false;
  try {
    remat::cuda::executor ex(offloading_plan(std::vector<word_math::u32>(5, 1024), 1), nullptr);
  } catch (const remat::cuda_error& e) {
    caught = e.status() != cudaSuccess && e.call().find("cudaMalloc") != std::string::npos;
  }
  EXPECT(caught);
  if (failures > 0) return 1;
  std::printf(
      "SKIP: no CUDA device (%s): %d checks of the error type and of the host's word net "
      "passed, the GPU tests were not run\n",
      cudaGetErrorName(why), checks);
  return 77;
}

}  // namespace

int main() {
  try {
    error_type();
    word_net_on_the_host();
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
    std::printf("offloading\n");
    word_net_matches_host_executor(stream);
    mlp_offloading_matches_store_all({64, 96, 48, 128, 80, 96, 64, 112, 48, 80, 96, 64, 10},
                                     stream);
    offloading_runs_allocate_nothing_and_keep_the_plan(stream);
    offloading_capture_failure_leaves_a_usable_stream(stream);
    REMAT_CUDA_CHECK(cudaStreamDestroy(stream));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAILED: unexpected exception: %s\n", e.what());
    return 1;
  }
  std::printf("%d checks, %d failed\n", checks, failures);
  return failures == 0 ? 0 : 1;
}
