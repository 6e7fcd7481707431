// Runs a schedule on a GPU: the user's kernels on the user's stream, on one cudaMalloc'd arena.
//
//   remat::plan_result p = remat::plan(chain, budget, {.alignment = remat::cuda::arena_alignment});
//   remat::cuda::executor ex(p.memory, stream);      // the only allocations: arena (and pools)
//   cudaMemcpyAsync(ex.input().data, x, ex.input().size, cudaMemcpyDefault, stream);
//   ex.run(net);      // net.forward(call, stream), net.backward(call, stream), net.loss(call,
//                     // stream)
//   ex.capture(net);  // or record the whole schedule once as a CUDA graph ...
//   ex.replay();      // ... and launch it again and again
//
// A plan with transfers (docs/offload.md, docs/executors.md) also gets a pinned host pool for
// the host copies and two copy streams of the executor's own, device to host for the offloads
// and host to device for the prefetches, so that copies run on the copy engines while the
// user's stream computes. The plan's waits become events: one per op, recorded after it on its
// stream, waited for (cudaStreamWaitEvent) by the ops listed after it on other streams. A run
// forks the copy streams from the user's stream and joins them back at its end, so it is
// ordered after earlier work on that stream, later work is ordered after all of it, and stream
// capture records the copies in the same graph.
//
// Needs only the CUDA runtime's host API (a plain C++ compiler builds it; link CUDA::cudart, or
// the `remat::cuda` CMake target). The callbacks enqueue work on the stream they are given and
// must not synchronize it during a capture. Every CUDA call the executor makes is checked, and so
// are kernel launches, after each callback (cudaGetLastError): a failure throws
// `remat::cuda_error` naming the op. Running allocates nothing on the device or the host.
#pragma once

#include <remat/check_plan.hpp>
#include <remat/cuda/error.hpp>
#include <remat/detail/planning/program.hpp>
#include <remat/memory_plan.hpp>
#include <remat/op_calls.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

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
concept callbacks = forward_handler<C, forward_call, cudaStream_t> &&
    backward_handler<C, backward_call, cudaStream_t> && loss_handler<C, loss_call, cudaStream_t>;

struct executor_options {
  /// Fill with 0xFF bytes (a NaN for float and double) the whole arena but a_0 when a run
  /// starts, and every buffer the schedule drops right after the op that drops it (host copies
  /// too, by a host function on the copy stream).
  bool poison = false;
  /// Record when each op of a `run` starts and ends (CUDA events with timing, two per op), for
  /// `last_run()`. Replays are not timed.
  bool timing = false;
};

/// When each op of the last timed run started and ended on its stream, in seconds from the
/// run's start (what the CUDA events measured), and the whole run. `check_run(plan, start, end)`
/// accepts them.
struct run_times {
  std::vector<double> start, end;
  double seconds = 0;
};

class executor {
 public:
  /// Checks the plan (`std::invalid_argument` if unsound) and makes every allocation: the arena,
  /// `arena_bytes` bytes with cudaMalloc, and for a plan with transfers the host pool
  /// (`host_bytes` pinned bytes, cudaHostAlloc), the two copy streams and one event per op.
  /// `stream` is used by every later call; it must be a created stream (not the legacy default
  /// stream) for `capture`.
  executor(memory_plan memory, cudaStream_t stream, executor_options options = {})
      : plan_(std::move(memory)),
        program_(detail::make_program(plan_)),
        stream_(stream),
        options_(options),
        transfers_(plan_.has_transfers()) {
    if (plan_.arena_bytes > 0) {
      void* p = nullptr;
      REMAT_CUDA_CHECK(cudaMalloc(&p, static_cast<std::size_t>(plan_.arena_bytes)));
      arena_.reset(static_cast<std::byte*>(p));
    }
    if (plan_.host_bytes > 0) {
      void* p = nullptr;
      REMAT_CUDA_CHECK(
          cudaHostAlloc(&p, static_cast<std::size_t>(plan_.host_bytes), cudaHostAllocDefault));
      host_pool_.reset(static_cast<std::byte*>(p));
    }
    const std::size_t n = program_.steps.size();
    if (transfers_) {
      for (stream_ptr& s : copy_streams_) {
        cudaStream_t raw = nullptr;
        REMAT_CUDA_CHECK(cudaStreamCreateWithFlags(&raw, cudaStreamNonBlocking));
        s.reset(raw);
      }
      fork_ = make_event(false);
      for (event_ptr& e : join_) e = make_event(false);
    }
    if (transfers_ || options_.timing) {
      done_.reserve(n);
      for (std::size_t i = 0; i < n; ++i) done_.push_back(make_event(options_.timing));
    }
    if (options_.timing) {
      started_.reserve(n);
      for (std::size_t i = 0; i < n; ++i) started_.push_back(make_event(true));
      run_begin_ = make_event(true);
      run_end_ = make_event(true);
      times_.start.assign(n, 0);
      times_.end.assign(n, 0);
    }
    if (options_.poison) {
      host_fills_.resize(program_.dropped.size());
      for (std::size_t j = 0; j < program_.dropped.size(); ++j)
        if (const buffer_id id = program_.dropped[j]; plan_.buffers[id].on_host)
          host_fills_[j] = {base(id), size(id)};
    }
  }

  /// The input a_0 on the device: write it (on the stream) before a run. It keeps its place and
  /// contents across runs, unless the schedule offloads it (then its bytes may serve other
  /// buffers during a run: write it before every run).
  [[nodiscard]] device_bytes input() const noexcept {
    return {base(memory_plan::input()), size(memory_plan::input())};
  }
  /// g_0 after a run (once the stream reaches its end), until the next run.
  [[nodiscard]] const_device_bytes input_gradient() const noexcept {
    return {base(program_.input_gradient), size(program_.input_gradient)};
  }

  /// Enqueues the whole schedule: the callbacks in order on the stream, the copies on the copy
  /// streams, the waits between them, and the poisoning memsets if asked. Returns without
  /// waiting; everything it enqueued is done once the stream reaches its end.
  /// A type without one of the three handlers is refused at compile time with a message per
  /// missing handler.
  template <class C>
  void run(C&& c) {
    if constexpr (checked<C>()) {
      REMAT_CUDA_CHECK(cudaGetLastError());  // an error left by earlier work is not the run's
      timed_ = false;
      enqueue(c, options_.timing);
      timed_ = options_.timing;
    }
  }

  /// With `executor_options::timing`: when each op of the last `run` started and ended. Waits
  /// for that run to end. Allocates nothing.
  const run_times& last_run() {
    if (!options_.timing)
      throw std::logic_error("remat::cuda::executor: last_run() needs executor_options::timing");
    if (!timed_) throw std::logic_error("remat::cuda::executor: last_run() before a timed run");
    REMAT_CUDA_CHECK(cudaEventSynchronize(run_end_.get()));
    auto seconds = [this](cudaEvent_t e) {
      float ms = 0;
      REMAT_CUDA_CHECK(cudaEventElapsedTime(&ms, run_begin_.get(), e));
      return static_cast<double>(ms) * 1e-3;
    };
    for (std::size_t i = 0; i < program_.steps.size(); ++i) {
      times_.start[i] = seconds(started_[i].get());
      times_.end[i] = seconds(done_[i].get());
    }
    times_.seconds = seconds(run_end_.get());
    return times_;
  }

  /// Records the schedule (as `run` would enqueue it, copy streams included) into a CUDA graph,
  /// replacing any earlier one, without running it. The callbacks are called once, now;
  /// `replay` launches what they enqueued, with the same arguments, so parameters must stay at
  /// the addresses captured.
  template <class C>
  void capture(C&& c) {
    if constexpr (checked<C>()) capture_checked(c);
  }

 private:
  template <class C>
  static constexpr bool checked() {
    return remat::detail::check_handlers<std::remove_reference_t<C>, forward_call, backward_call,
                                         loss_call, cudaStream_t>();
  }

  template <class C>
  void capture_checked(C& c) {
    REMAT_CUDA_CHECK(cudaGetLastError());
    timed_ = false;  // the events of the last timed run are recorded again, inside the graph
    REMAT_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    cudaGraph_t raw = nullptr;
    try {
      enqueue(c, false);
    } catch (...) {
      // Leave the stream usable (enqueue has joined the copy streams back); the partial graph,
      // if any, is thrown away.
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

 public:
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
  /// The pinned host pool of the host copies (empty without transfers).
  [[nodiscard]] std::span<std::byte> host_pool() const noexcept {
    return {host_pool_.get(), host_pool_ ? static_cast<std::size_t>(plan_.host_bytes) : 0};
  }
  /// The copy streams, device to host (offloads) and host to device (prefetches); null without
  /// transfers.
  [[nodiscard]] cudaStream_t offload_stream() const noexcept { return copy_streams_[0].get(); }
  [[nodiscard]] cudaStream_t prefetch_stream() const noexcept { return copy_streams_[1].get(); }

 private:
  // Deleters ignore errors: a destructor cannot report them, and a failed free leaks at worst.
  struct free_device {
    void operator()(std::byte* p) const noexcept { cudaFree(p); }
  };
  struct free_host {
    void operator()(std::byte* p) const noexcept { cudaFreeHost(p); }
  };
  struct destroy_stream {
    void operator()(cudaStream_t s) const noexcept { cudaStreamDestroy(s); }
  };
  struct destroy_event {
    void operator()(cudaEvent_t e) const noexcept { cudaEventDestroy(e); }
  };
  struct destroy_graph {
    void operator()(cudaGraph_t g) const noexcept { cudaGraphDestroy(g); }
  };
  struct destroy_graph_exec {
    void operator()(cudaGraphExec_t g) const noexcept { cudaGraphExecDestroy(g); }
  };
  using stream_ptr = std::unique_ptr<std::remove_pointer_t<cudaStream_t>, destroy_stream>;
  using event_ptr = std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, destroy_event>;
  using graph_ptr = std::unique_ptr<std::remove_pointer_t<cudaGraph_t>, destroy_graph>;
  using graph_exec_ptr =
      std::unique_ptr<std::remove_pointer_t<cudaGraphExec_t>, destroy_graph_exec>;

  // Bytes of the host pool to fill with 0xFF: the argument of a host function on a stream.
  struct host_fill {
    std::byte* at = nullptr;
    std::size_t bytes = 0;
  };
  static void CUDART_CB fill_host(void* task) {
    const auto* f = static_cast<const host_fill*>(task);
    std::memset(f->at, 0xFF, f->bytes);
  }

  static event_ptr make_event(bool timing) {
    cudaEvent_t e = nullptr;
    REMAT_CUDA_CHECK(cudaEventCreateWithFlags(
        &e, timing ? static_cast<unsigned>(cudaEventDefault) : cudaEventDisableTiming));
    return event_ptr(e);
  }

  [[nodiscard]] std::byte* base(buffer_id id) const noexcept {
    const buffer& b = plan_.buffers[id];
    std::byte* pool = b.on_host ? host_pool_.get() : arena_.get();
    return pool == nullptr ? nullptr : pool + b.offset;
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
  // The stream an op runs on: the user's for compute ops and waits, a copy stream for O and P.
  [[nodiscard]] cudaStream_t stream_of_step(const detail::program_step& s) const noexcept {
    switch (stream_of(s.kind)) {
      case stream::d2h: return copy_streams_[0].get();
      case stream::h2d: return copy_streams_[1].get();
      case stream::compute: break;
    }
    return stream_;
  }

  void poison(std::byte* p, std::size_t n, cudaStream_t s) const {
    if (n > 0) REMAT_CUDA_CHECK(cudaMemsetAsync(p, 0xFF, n, s));
  }

  // Makes the stream wait for everything enqueued on the copy streams. `checked`: throw on
  // failure; otherwise (an exception is already on its way) do what can be done.
  void join(bool checked) {
    for (std::size_t k = 0; k < 2; ++k) {
      if (checked) {
        REMAT_CUDA_CHECK(cudaEventRecord(join_[k].get(), copy_streams_[k].get()));
        REMAT_CUDA_CHECK(cudaStreamWaitEvent(stream_, join_[k].get(), 0));
      } else if (cudaEventRecord(join_[k].get(), copy_streams_[k].get()) == cudaSuccess) {
        (void)cudaStreamWaitEvent(stream_, join_[k].get(), 0);
      }
    }
  }

  [[nodiscard]] std::string describe(const detail::program_step& s, std::size_t i) const {
    const std::string what =
        s.kind == op_kind::loss       ? std::string("the user's loss")
        : s.kind == op_kind::backward ? "the user's backward(" + std::to_string(s.stage) + ")"
        : is_transfer(s.kind)         ? to_string(plan_.steps[i].op)
                                      : "the user's forward(" + std::to_string(s.stage) + ")";
    return what + ", op " + std::to_string(i) + " of the schedule";
  }

  template <class C>
  void enqueue(C& c, bool timed) {
    if (options_.poison && arena_) {
      const buffer& in = plan_.buffers[memory_plan::input()];
      const auto begin = static_cast<std::size_t>(in.offset);
      const auto end = begin + static_cast<std::size_t>(in.size);
      poison(arena_.get(), begin, stream_);
      poison(arena_.get() + end, static_cast<std::size_t>(plan_.arena_bytes) - end, stream_);
    }
    if (timed) REMAT_CUDA_CHECK(cudaEventRecord(run_begin_.get(), stream_));
    try {
      if (transfers_) {  // the fork: the copy streams start after what the stream holds so far
        REMAT_CUDA_CHECK(cudaEventRecord(fork_.get(), stream_));
        for (const stream_ptr& s : copy_streams_)
          REMAT_CUDA_CHECK(cudaStreamWaitEvent(s.get(), fork_.get(), 0));
      }
      for (std::size_t i = 0; i < program_.steps.size(); ++i) enqueue_step(c, i, timed);
    } catch (...) {
      if (transfers_) join(false);  // the stream ends after what was enqueued: reusable
      throw;
    }
    if (transfers_) join(true);
    if (timed) REMAT_CUDA_CHECK(cudaEventRecord(run_end_.get(), stream_));
  }

  template <class C>
  void enqueue_step(C& c, std::size_t i, bool timed) {
    const detail::program_step& s = program_.steps[i];
    const cudaStream_t on = stream_of_step(s);
    for (std::size_t w = program_.waits_begin[i]; w < program_.waits_begin[i + 1]; ++w)
      REMAT_CUDA_CHECK(cudaStreamWaitEvent(on, done_[program_.waits[w].op].get(), 0));
    if (timed) REMAT_CUDA_CHECK(cudaEventRecord(started_[i].get(), on));
    const auto writable = [this](const detail::byte_range& r) { return bytes(r); };
    const auto read_only = [this](const detail::byte_range& r) { return const_bytes(r); };
    // A transfer runs here: O and P copy on their stream; a wait has done its waiting, above.
    if (!remat::detail::call_handler<forward_call, backward_call, loss_call>(c, s, writable,
                                                                             read_only, stream_) &&
        rule(s.kind).makes != operand::none && s.input.size > 0)
      REMAT_CUDA_CHECK(cudaMemcpyAsync(
          bytes(s.output).data, bytes(s.input).data, static_cast<std::size_t>(s.input.size),
          rule(s.kind).makes == operand::host_copy ? cudaMemcpyDeviceToHost
                                                   : cudaMemcpyHostToDevice,
          on));
    if (const cudaError_t launch = cudaGetLastError(); launch != cudaSuccess)
      detail::throw_cuda_error(launch, "a kernel launch", describe(s, i));
    if (options_.poison)
      for (std::size_t j = program_.dropped_begin[i]; j < program_.dropped_begin[i + 1]; ++j) {
        const buffer_id id = program_.dropped[j];
        const buffer& b = plan_.buffers[id];
        if (b.on_host) {
          REMAT_CUDA_CHECK(cudaLaunchHostFunc(on, fill_host, &host_fills_[j]));
          continue;
        }
        // An offloaded tensor's bytes are free once its last reader has ended too.
        if (b.last_read != b.last_op && b.last_read != i)
          REMAT_CUDA_CHECK(cudaStreamWaitEvent(on, done_[b.last_read].get(), 0));
        poison(base(id), size(id), on);
      }
    if (!done_.empty()) REMAT_CUDA_CHECK(cudaEventRecord(done_[i].get(), on));
  }

  memory_plan plan_;
  detail::program program_;
  cudaStream_t stream_;
  executor_options options_;
  bool transfers_ = false;
  std::unique_ptr<std::byte, free_device> arena_;
  std::unique_ptr<std::byte, free_host> host_pool_;
  stream_ptr copy_streams_[2];      // d2h, h2d; plans with transfers only
  event_ptr fork_, join_[2];        // a run's fork from the stream and join back, per copy stream
  std::vector<event_ptr> done_;     // per op, recorded after it (transfers or timing)
  std::vector<event_ptr> started_;  // per op, recorded before it (timing)
  event_ptr run_begin_, run_end_;   // timing
  run_times times_;
  bool timed_ = false;                 // the last run was timed and finished enqueuing
  std::vector<host_fill> host_fills_;  // poison: per entry of program_.dropped that is on the host
  graph_exec_ptr graph_exec_;
};

}  // namespace remat::cuda
