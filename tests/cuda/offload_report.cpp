// What offloading does on this GPU: tests/gpu/run.sh runs this and quotes its output.
//
//   cuda_offload_report [--mib 32] [--stages 8]
//
// 1. The link: 256 MiB copied between pinned host memory and the device with cudaMemcpyAsync,
//    timed with CUDA events, each direction (best of 3).
// 2. Results: the word net of word_net.hpp (1 MiB activations) trained for two steps under the
//    offloading solvers' plans, on the CUDA executor (eagerly and as a replayed graph) and on the
//    host executor: the words must be identical.
// 3. Overlap: the word net with `--mib` MiB activations, its hash rounds set so that a forward
//    takes about as long as copying its output; the chain's times and link are those measured
//    (ms, bytes per ms). For each offloading solver's plan at about its least budget: the step
//    time against store-all's and the plan's prediction, the time the copies took, the share of
//    it hidden behind kernels (from the executor's timing events), and whether the measured run
//    kept the plan (check_run). Results must be identical to store-all's on the GPU.
//
// Exits 1 on any mismatch or error, 77 without a GPU. Timings are printed, never judged.
#include "word_net.hpp"

#include <remat/check_plan.hpp>
#include <remat/cuda/error.hpp>
#include <remat/cuda/executor.hpp>
#include <remat/host_executor.hpp>  // before plan.hpp: its constructor's `plan` would shadow remat::plan
#include <remat/plan.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

using remat::size_type;
using word_math::u32;

constexpr remat::solver offloading_solvers[] = {remat::solver::offload, remat::solver::save_on_cpu,
                                                remat::solver::vdnn,
                                                remat::solver::sequential_offload};

class event {
 public:
  event() { REMAT_CUDA_CHECK(cudaEventCreate(&e_)); }
  event(const event&) = delete;
  event& operator=(const event&) = delete;
  ~event() { cudaEventDestroy(e_); }
  [[nodiscard]] cudaEvent_t get() const { return e_; }
  // Milliseconds from `from` to this event, once it has happened.
  [[nodiscard]] double ms_since(const event& from) const {
    REMAT_CUDA_CHECK(cudaEventSynchronize(e_));
    float ms = 0;
    REMAT_CUDA_CHECK(cudaEventElapsedTime(&ms, from.e_, e_));
    return static_cast<double>(ms);
  }

 private:
  cudaEvent_t e_ = nullptr;
};

// Times `work()` (enqueued on `stream`) with events: the best of `reps`, after one warm-up.
template <class Work>
double best_ms(cudaStream_t stream, int reps, Work&& work) {
  event a, b;
  work();
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    REMAT_CUDA_CHECK(cudaEventRecord(a.get(), stream));
    work();
    REMAT_CUDA_CHECK(cudaEventRecord(b.get(), stream));
    best = std::min(best, b.ms_since(a));
  }
  return best;
}

struct bandwidths {
  double d2h_gbs = 0, h2d_gbs = 0;  // GB/s (10^9 bytes)
};

bandwidths measure_link(cudaStream_t stream) {
  constexpr std::size_t bytes = std::size_t{256} << 20;
  void* host = nullptr;
  void* device = nullptr;
  REMAT_CUDA_CHECK(cudaHostAlloc(&host, bytes, cudaHostAllocDefault));
  REMAT_CUDA_CHECK(cudaMalloc(&device, bytes));
  REMAT_CUDA_CHECK(cudaMemsetAsync(device, 1, bytes, stream));
  auto gbs = [&](double ms) { return static_cast<double>(bytes) / (ms * 1e-3) / 1e9; };
  bandwidths l;
  l.d2h_gbs = gbs(best_ms(stream, 3, [&] {
    REMAT_CUDA_CHECK(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream));
  }));
  l.h2d_gbs = gbs(best_ms(stream, 3, [&] {
    REMAT_CUDA_CHECK(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream));
  }));
  REMAT_CUDA_CHECK(cudaStreamSynchronize(stream));
  REMAT_CUDA_CHECK(cudaFree(device));
  REMAT_CUDA_CHECK(cudaFreeHost(host));
  return l;
}

remat::memory_plan store_all_plan(const remat::chain& c) {
  const remat::plan_result p = remat::plan(
      c, remat::max_size,
      {.solve = {.solver = remat::solver::store_all}, .alignment = remat::cuda::arena_alignment});
  if (!p.feasible) throw std::logic_error("store-all does not fit an unlimited budget");
  return p.memory;
}

// The solver's plan at the least budget (plus `share` of the way to store-all's peak) that
// plan() places within it; an empty optional where none fits below the peak.
std::optional<remat::plan_result> offloading_plan(const remat::chain& c, remat::solver s,
                                                  double share) {
  const size_type top = store_all_plan(c).lower_bound;
  const size_type least = remat::solve(c, top, {.solver = s}).min_feasible_budget;
  if (least == remat::solve_result::no_budget) return std::nullopt;
  for (const double extra : {share, share + 0.05, share + 0.15, share + 0.3}) {
    const auto budget = least + static_cast<size_type>(extra * static_cast<double>(top - least)) +
                        static_cast<size_type>(c.length()) * remat::cuda::arena_alignment * 2;
    remat::plan_result p =
        remat::plan(c, budget, {.solve = {.solver = s}, .alignment = remat::cuda::arena_alignment});
    if (p.feasible && p.memory.has_transfers()) return p;
  }
  return std::nullopt;
}

bool check_results(cudaStream_t stream) {
  const std::vector<u32> words(7, 1u << 18);  // 1 MiB activations
  constexpr u32 rounds = 2;
  const std::size_t stages = words.size() - 1;
  remat::chain c = word_net::chain_of(words, rounds);
  c.transfer = {4.0, 4.0};  // an activation moves in a quarter of its forward
  const word_net::outcome reference = word_net::train_on_host(store_all_plan(c), stages, rounds);
  bool all = true;
  int plans = 0;
  for (const remat::solver s : offloading_solvers)
    for (const double share : {0.0, 0.5}) {
      const auto p = offloading_plan(c, s, share);
      if (!p) continue;
      ++plans;
      const bool host = word_net::train_on_host(p->memory, stages, rounds) == reference;
      const bool eager = word_net::train_on_device(p->memory, stages, rounds, word_net::mode::eager,
                                                   stream) == reference;
      const bool graph = word_net::train_on_device(p->memory, stages, rounds, word_net::mode::graph,
                                                   stream) == reference;
      std::size_t copies = 0;
      for (const remat::step& st : p->memory.steps) copies += remat::is_transfer(st.op.kind);
      std::printf(
          "  %-18s arena %6.2f MiB, host pool %6.2f MiB, %2zu transfer ops: host %s, "
          "CUDA eager %s, CUDA graph %s\n",
          std::string(remat::name(s)).c_str(),
          static_cast<double>(p->memory.arena_bytes) / (1 << 20),
          static_cast<double>(p->memory.host_bytes) / (1 << 20), copies,
          host ? "same" : "DIFFERENT", eager ? "same" : "DIFFERENT", graph ? "same" : "DIFFERENT");
      all = all && host && eager && graph;
    }
  std::printf("  %d offloading plans: %s\n", plans,
              all && plans > 0 ? "the CUDA executor's words are the host executor's, bit for bit"
                               : "MISMATCH");
  return all && plans > 0;
}

// How long `rounds` make a forward and a backward of n words to n words (ms).
std::pair<double, double> stage_ms(u32 n, u32 rounds, cudaStream_t stream) {
  void* p = nullptr;
  REMAT_CUDA_CHECK(cudaMalloc(&p, (std::size_t{6} * n + 2) * sizeof(u32)));
  auto* w = static_cast<u32*>(p);
  REMAT_CUDA_CHECK(cudaMemsetAsync(p, 0, (std::size_t{6} * n + 2) * sizeof(u32), stream));
  u32* in = w + 2;
  u32* z = in + n;
  u32* out = z + n;
  u32* g = out + n;
  u32* dz = g + n;
  u32* gin = dz + n;
  const double fw = best_ms(stream, 3, [&] {
    word_kernels::forward(in, n, z, out, n, w, rounds, stream);
    REMAT_CUDA_CHECK(cudaGetLastError());
  });
  const double bw = best_ms(stream, 3, [&] {
    word_kernels::backward(in, n, out, z, g, dz, gin, n, w, w + 1, rounds, stream);
    REMAT_CUDA_CHECK(cudaGetLastError());
  });
  REMAT_CUDA_CHECK(cudaStreamSynchronize(stream));
  REMAT_CUDA_CHECK(cudaFree(p));
  return {fw, bw};
}

struct measured {
  double step_ms = 0, copy_ms = 0, hidden_ms = 0, compute_ms = 0, predicted_ms = 0;
  bool kept = false;
  std::string problem;
  word_net::outcome result;
};

// Two steps on the plan; the second timed with the executor's events.
measured run_timed(const remat::memory_plan& plan, std::size_t stages, u32 rounds,
                   cudaStream_t stream) {
  word_net::device_word_net net(stages, rounds);
  remat::cuda::executor ex(plan, stream, {.timing = true});
  std::vector<std::vector<u32>> inputs;
  for (u32 step = 0; step < 2; ++step) {
    inputs.push_back(word_net::input_of(ex.input().size / sizeof(u32), step));
    REMAT_CUDA_CHECK(cudaMemcpyAsync(ex.input().data, inputs.back().data(), ex.input().size,
                                     cudaMemcpyHostToDevice, stream));
    net.zero_gradients(stream);
    ex.run(net);
    net.update(stream);
  }
  const remat::cuda::run_times& t = ex.last_run();
  measured m;
  m.step_ms = t.seconds * 1e3;
  // The compute stream's busy intervals (in issue order, disjoint), then each copy's share
  // inside them.
  std::vector<std::pair<double, double>> busy;
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    const remat::op_kind k = plan.steps[i].op.kind;
    m.predicted_ms = std::max(m.predicted_ms, plan.end[i]);
    if (remat::is_transfer(k)) continue;  // W: no work
    busy.emplace_back(t.start[i], t.end[i]);
    m.compute_ms += (t.end[i] - t.start[i]) * 1e3;
  }
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    const remat::op_kind k = plan.steps[i].op.kind;
    if (k != remat::op_kind::offload && k != remat::op_kind::prefetch) continue;
    m.copy_ms += (t.end[i] - t.start[i]) * 1e3;
    for (const auto& [from, to] : busy)
      m.hidden_ms += std::max(0.0, std::min(to, t.end[i]) - std::max(from, t.start[i])) * 1e3;
  }
  const remat::run_memory seen = remat::check_run(plan, t.start, t.end);
  m.kept = seen.ok();
  m.problem = seen.problem;
  m.result = net.result(ex.input_gradient(), stream);
  return m;
}

bool report_overlap(int mib, int stages, const bandwidths& l, cudaStream_t stream) {
  const u32 n = static_cast<u32>(mib) << 18;  // words
  const double bytes = 4.0 * n;
  // Rounds such that a forward takes about as long as offloading its output.
  const double copy_ms = bytes / (l.d2h_gbs * 1e6);
  constexpr u32 probe = 64;
  const double probe_ms = stage_ms(n, probe, stream).first;
  const auto rounds =
      static_cast<u32>(std::clamp(std::lround(probe * copy_ms / probe_ms), 1L, 1L << 20));
  const auto [fw, bw] = stage_ms(n, rounds, stream);
  const std::vector<u32> words(static_cast<std::size_t>(stages) + 1, n);
  remat::chain c = word_net::chain_of(words, rounds);
  for (remat::stage& s : c.stages) {
    s.forward_time = fw;
    s.backward_time = bw;
  }
  c.transfer = {l.d2h_gbs * 1e6, l.h2d_gbs * 1e6};  // bytes per ms
  std::printf(
      "  %d stages of %d MiB activations (tapes %d MiB), %u hash rounds: forward %.3f ms, "
      "backward %.3f ms, copying an activation %.3f ms\n",
      stages, mib, 2 * mib, rounds, fw, bw, copy_ms);

  const remat::memory_plan all = store_all_plan(c);
  const measured reference = run_timed(all, c.length(), rounds, stream);
  std::printf("  %-18s %9s %9s %10s %9s %9s %9s %8s  %s\n", "plan", "arena MiB", "step ms",
              "predicted", "copy ms", "hidden", "overlap", "kept", "words");
  std::printf("  %-18s %9.1f %9.3f %10.3f %9s %9s %9s %8s  %s\n", "store-all",
              static_cast<double>(all.arena_bytes) / (1 << 20), reference.step_ms,
              reference.predicted_ms, "-", "-", "-", reference.kept ? "yes" : "NO", "reference");
  bool all_same = reference.kept;
  for (const remat::solver s : offloading_solvers) {
    const auto p = offloading_plan(c, s, 0.0);
    if (!p) {
      std::printf("  %-18s no offloading plan below store-all's peak\n",
                  std::string(remat::name(s)).c_str());
      continue;
    }
    const measured m = run_timed(p->memory, c.length(), rounds, stream);
    const bool same = m.result == reference.result;
    all_same = all_same && same && m.kept;
    std::printf("  %-18s %9.1f %9.3f %10.3f %9.3f %9.3f %8.1f%% %8s  %s\n",
                std::string(remat::name(s)).c_str(),
                static_cast<double>(p->memory.arena_bytes) / (1 << 20), m.step_ms, m.predicted_ms,
                m.copy_ms, m.hidden_ms, m.copy_ms > 0 ? 100 * m.hidden_ms / m.copy_ms : 0.0,
                m.kept ? "yes" : "NO", same ? "same" : "DIFFERENT");
    if (!m.kept) std::printf("    the measured run broke the plan: %s\n", m.problem.c_str());
  }
  std::printf(
      "  overlap: the share of the copies' time during which a kernel of the step ran; "
      "kept: check_run on the measured times found no bytes shared while live\n");
  return all_same;
}

int value_of(int argc, char** argv, const std::string& flag, int fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == flag) return std::atoi(argv[i + 1]);
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const int mib = value_of(argc, argv, "--mib", 32);
  const int stages = value_of(argc, argv, "--stages", 8);
  if (mib < 1 || mib > 1024 || stages < 2 || stages > 64) {
    std::fprintf(stderr, "usage: cuda_offload_report [--mib 1..1024] [--stages 2..64]\n");
    return 2;
  }
  int devices = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess || devices == 0) {
    std::printf("SKIP: no CUDA device (%s): nothing measured\n",
                cudaGetErrorName(e != cudaSuccess ? e : cudaErrorNoDevice));
    return 77;
  }
  try {
    cudaDeviceProp prop{};
    REMAT_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("device 0: %s\n", prop.name);
    cudaStream_t stream = nullptr;
    REMAT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    std::printf("pinned bandwidth, 256 MiB, best of 3:\n");
    const bandwidths l = measure_link(stream);
    std::printf("  device to host %.2f GB/s, host to device %.2f GB/s\n", l.d2h_gbs, l.h2d_gbs);
    std::printf("results against the host executor (word net, 1 MiB activations, 2 steps):\n");
    const bool same = check_results(stream);
    std::printf("copies beside kernels (one timed step after a warm-up step):\n");
    const bool kept = report_overlap(mib, stages, l, stream);
    REMAT_CUDA_CHECK(cudaStreamDestroy(stream));
    if (!same || !kept) {
      std::fprintf(stderr, "FAILED: %s\n",
                   !same ? "the CUDA executor's results differ from the host executor's"
                         : "an offloading run differs from store-all's or broke its plan");
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAILED: %s\n", e.what());
    return 1;
  }
  return 0;
}
