// Runs a schedule on a GPU: the user's kernels on the user's stream, on one cudaMalloc'd arena.
//
//   remat::plan_result p = remat::plan(chain, budget, {.alignment = remat::cuda::arena_alignment});
//   remat::cuda::executor ex(p.memory, stream);      // the only allocation: the arena
//   cudaMemcpyAsync(ex.input().data, x, ex.input().size, cudaMemcpyDefault, stream);
//   ex.run(net);      // net.forward(call, stream), net.backward(call, stream), net.loss(call,
//   stream) ex.capture(net);  // or record the whole schedule once as a CUDA graph ... ex.replay();
//   // ... and launch it again and again
//
// Needs only the CUDA runtime's host API (a plain C++ compiler builds it; link CUDA::cudart, or
// the `remat::cuda` CMake target). The callbacks enqueue work on the stream they are given and
// must not synchronize it during a capture. Every CUDA call the executor makes is checked, and so
// are kernel launches, after each callback (cudaGetLastError): a failure throws
// `remat::cuda_error` naming the op. Running allocates nothing on the device or the host.
#pragma once

#include <remat/cuda/error.hpp>
#include <remat/detail/planning/program.hpp>
#include <remat/memory_plan.hpp>
#include <remat/op_calls.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace remat::cuda {

/// The alignment memory plans for CUDA should use: what cudaMalloc guarantees.
inline constexpr size_type arena_alignment = 256;

/// Bytes in device memory. `as<float>()` gives the typed device pointer.
template <class Byte>
struct basic_device_bytes {
  Byte* data = nullptr;
  std::size_t size = 0;

  template <class T>
  [[nodiscard]] auto as() const noexcept {
    if constexpr (std::is_const_v<Byte>)
      return reinterpret_cast<const T*>(data);
    else
      return reinterpret_cast<T*>(data);
  }
  [[nodiscard]] bool empty() const noexcept { return size == 0; }
};
using device_bytes = basic_device_bytes<std::byte>;
using const_device_bytes = basic_device_bytes<const std::byte>;

using forward_call = basic_forward_call<device_bytes, const_device_bytes>;
using backward_call = basic_backward_call<device_bytes, const_device_bytes>;
using loss_call = basic_loss_call<device_bytes, const_device_bytes>;

/// The user's code for a CUDA run: `c.forward(call, stream)`, `c.backward(call, stream)`,
/// `c.loss(call, stream)`, each enqueuing its kernels on `stream`.
template <class C>
concept callbacks = requires(C& c, const forward_call& f, const backward_call& b,
                             const loss_call& l, cudaStream_t stream) {
  c.forward(f, stream);
  c.backward(b, stream);
  c.loss(l, stream);
};

struct executor_options {
  /// Fill with 0xFF bytes (a NaN for float and double) the whole arena but a_0 when a run
  /// starts, and every buffer the schedule drops right after the op that drops it.
  bool poison = false;
};

class executor {
 public:
  /// Checks the plan (`std::invalid_argument` if unsound) and makes the one device allocation:
  /// `plan.arena_bytes` bytes with cudaMalloc. `stream` is used by every later call; it must be
  /// a created stream (not the legacy default stream) for `capture`.
  executor(memory_plan plan, cudaStream_t stream, executor_options options = {})
      : plan_(std::move(plan)),
        program_(detail::make_program(plan_)),
        stream_(stream),
        options_(options) {
    if (plan_.has_transfers())
      throw std::invalid_argument(
          "remat::cuda::executor: the plan has transfers; this executor runs schedules without "
          "offloading (remat::host_executor runs both)");
    if (plan_.arena_bytes > 0) {
      void* p = nullptr;
      REMAT_CUDA_CHECK(cudaMalloc(&p, static_cast<std::size_t>(plan_.arena_bytes)));
      arena_.reset(static_cast<std::byte*>(p));
    }
  }

  /// The input a_0 on the device: write it (on the stream) before a run. It keeps its place and
  /// contents across runs.
  [[nodiscard]] device_bytes input() const noexcept {
    return {base(memory_plan::input()), size(memory_plan::input())};
  }
  /// g_0 after a run (once the stream reaches its end), until the next run.
  [[nodiscard]] const_device_bytes input_gradient() const noexcept {
    return {base(program_.input_gradient), size(program_.input_gradient)};
  }

  /// Enqueues the whole schedule on the stream: the callbacks in order, and the poisoning
  /// memsets if asked. Returns without waiting for the stream.
  template <callbacks C>
  void run(C&& c) {
    REMAT_CUDA_CHECK(cudaGetLastError());  // an error left by earlier work is not the run's
    enqueue(c);
  }

  /// Records the schedule (as `run` would enqueue it) into a CUDA graph, replacing any earlier
  /// one, without running it. The callbacks are called once, now; `replay` launches what they
  /// enqueued, with the same arguments, so parameters must stay at the addresses captured.
  template <callbacks C>
  void capture(C&& c) {
    REMAT_CUDA_CHECK(cudaGetLastError());
    REMAT_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    cudaGraph_t raw = nullptr;
    try {
      enqueue(c);
    } catch (...) {
      // Leave the stream usable; the partial graph, if any, is thrown away.
      if (cudaStreamEndCapture(stream_, &raw) == cudaSuccess && raw != nullptr)
        cudaGraphDestroy(raw);
      throw;
    }
    REMAT_CUDA_CHECK(cudaStreamEndCapture(stream_, &raw));
    const graph_ptr graph(raw);
    cudaGraphExec_t exec = nullptr;
    REMAT_CUDA_CHECK(cudaGraphInstantiate(&exec, graph.get(), 0));
    graph_exec_.reset(exec);
  }

  /// Launches the captured graph on the stream.
  void replay() {
    if (!graph_exec_) throw std::logic_error("remat::cuda::executor: replay() before capture()");
    REMAT_CUDA_CHECK(cudaGraphLaunch(graph_exec_.get(), stream_));
  }

  [[nodiscard]] bool captured() const noexcept { return graph_exec_ != nullptr; }
  [[nodiscard]] const memory_plan& plan() const noexcept { return plan_; }
  [[nodiscard]] size_type arena_bytes() const noexcept { return plan_.arena_bytes; }
  [[nodiscard]] cudaStream_t stream() const noexcept { return stream_; }
  /// The arena on the device.
  [[nodiscard]] device_bytes arena() const noexcept {
    return {arena_.get(), static_cast<std::size_t>(plan_.arena_bytes)};
  }

 private:
  // Deleters ignore errors: a destructor cannot report them, and a failed free leaks at worst.
  struct free_device {
    void operator()(std::byte* p) const noexcept { cudaFree(p); }
  };
  struct destroy_graph {
    void operator()(cudaGraph_t g) const noexcept { cudaGraphDestroy(g); }
  };
  struct destroy_graph_exec {
    void operator()(cudaGraphExec_t g) const noexcept { cudaGraphExecDestroy(g); }
  };
  using graph_ptr = std::unique_ptr<std::remove_pointer_t<cudaGraph_t>, destroy_graph>;
  using graph_exec_ptr =
      std::unique_ptr<std::remove_pointer_t<cudaGraphExec_t>, destroy_graph_exec>;

  [[nodiscard]] std::byte* base(buffer_id id) const noexcept {
    return arena_.get() == nullptr ? nullptr : arena_.get() + plan_.buffers[id].offset;
  }
  [[nodiscard]] std::size_t size(buffer_id id) const noexcept {
    return static_cast<std::size_t>(plan_.buffers[id].size);
  }
  [[nodiscard]] device_bytes bytes(const detail::byte_range& r) const noexcept {
    std::byte* b = base(r.buffer);
    return {b == nullptr ? nullptr : b + r.offset, static_cast<std::size_t>(r.size)};
  }
  [[nodiscard]] const_device_bytes const_bytes(const detail::byte_range& r) const noexcept {
    const device_bytes b = bytes(r);
    return {b.data, b.size};
  }

  void poison(std::byte* p, std::size_t n) const {
    if (n > 0) REMAT_CUDA_CHECK(cudaMemsetAsync(p, 0xFF, n, stream_));
  }

  static std::string describe(const detail::program_step& s, std::size_t i) {
    const std::string what = s.kind == op_kind::loss ? std::string("loss")
                             : s.kind == op_kind::backward
                                 ? "backward(" + std::to_string(s.stage) + ")"
                                 : "forward(" + std::to_string(s.stage) + ")";
    return "the user's " + what + ", op " + std::to_string(i) + " of the schedule";
  }

  template <class C>
  void enqueue(C& c) {
    if (options_.poison && arena_) {
      const buffer& in = plan_.buffers[memory_plan::input()];
      const auto begin = static_cast<std::size_t>(in.offset);
      const auto end = begin + static_cast<std::size_t>(in.size);
      poison(arena_.get(), begin);
      poison(arena_.get() + end, static_cast<std::size_t>(plan_.arena_bytes) - end);
    }
    const std::size_t n = program_.steps.size();
    for (std::size_t i = 0; i < n; ++i) {
      const detail::program_step& s = program_.steps[i];
      switch (s.kind) {
        case op_kind::forward_none:
        case op_kind::forward_checkpoint:
        case op_kind::forward_all:
          c.forward(forward_call{s.stage, s.kind == op_kind::forward_all, const_bytes(s.input),
                                 bytes(s.output), bytes(s.saved), bytes(s.workspace)},
                    stream_);
          break;
        case op_kind::backward:
          c.backward(
              backward_call{s.stage, const_bytes(s.input), bytes(s.output), bytes(s.saved),
                            bytes(s.output_gradient), bytes(s.input_gradient), bytes(s.workspace)},
              stream_);
          break;
        case op_kind::loss:
          c.loss(loss_call{const_bytes(s.input), bytes(s.input_gradient), bytes(s.workspace)},
                 stream_);
          break;
        case op_kind::offload:
        case op_kind::prefetch:
        case op_kind::wait: break;  // a program has none (detail/planning/program.hpp refuses them)
      }
      if (const cudaError_t launch = cudaGetLastError(); launch != cudaSuccess)
        detail::throw_cuda_error(launch, "a kernel launch", describe(s, i));
      if (options_.poison)
        for (std::size_t j = program_.dropped_begin[i]; j < program_.dropped_begin[i + 1]; ++j)
          poison(base(program_.dropped[j]), size(program_.dropped[j]));
    }
  }

  memory_plan plan_;
  detail::program program_;
  cudaStream_t stream_;
  executor_options options_;
  std::unique_ptr<std::byte, free_device> arena_;
  graph_exec_ptr graph_exec_;
};

}  // namespace remat::cuda
