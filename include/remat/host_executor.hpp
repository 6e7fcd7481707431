// Runs a schedule on the host: the user's code does the math, the executor owns the memory.
//
//   remat::plan_result p = remat::plan(chain, budget);
//   remat::host_executor ex(p.memory);
//   std::memcpy(ex.input().data(), x, ex.input().size());
//   ex.run(net);                      // net.forward(call), net.backward(call), net.loss(call)
//   use(ex.input_gradient());         // g_0, valid until the next run
//
// The arena is allocated once, when the executor is built; `run` allocates nothing and only
// calls the user's code on ranges of it (see op_calls.hpp for what each call holds).
//
// A plan with transfers (docs/offload.md) also gets a host pool for the host copies and two copy
// threads, one per direction as a GPU's copy engines: offloads and prefetches are memcpy's
// between the arena and the pool, running while the caller's thread computes. Every op starts
// in issue order once the plan's waits are met, so whatever the copies and callbacks take, no
// range of the arena is written while something else still uses it: a late op costs time (a
// stall, reported by `last_run`), never memory. The callbacks run on the caller's thread. Two debug
// aids: `poison` fills every range the schedule frees with 0xFF bytes (a NaN for float and
// double), so a use after free shows in the gradients; `separate_allocations` gives each buffer
// its own heap block, made when the buffer is created and freed when it is dropped, so a memory
// checker (AddressSanitizer, valgrind) reports any access outside a live buffer.
#pragma once

#include <remat/check_plan.hpp>
#include <remat/detail/planning/program.hpp>
#include <remat/detail/planning/streams.hpp>
#include <remat/memory_plan.hpp>
#include <remat/op_calls.hpp>

#include <chrono>
#include <cstddef>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <new>
#include <span>
#include <utility>
#include <vector>

namespace remat {

using forward_call = basic_forward_call<std::span<std::byte>, std::span<const std::byte>>;
using backward_call = basic_backward_call<std::span<std::byte>, std::span<const std::byte>>;
using loss_call = basic_loss_call<std::span<std::byte>, std::span<const std::byte>>;

/// The user's code for a host run: `c.forward(const forward_call&)`,
/// `c.backward(const backward_call&)` and `c.loss(const loss_call&)`.
template <class C>
concept host_callbacks = forward_handler<C, forward_call> && backward_handler<C, backward_call> &&
    loss_handler<C, loss_call>;

struct host_executor_options {
  /// Fill with 0xFF bytes the whole arena but a_0 when a run starts, and every buffer the
  /// schedule drops (workspaces included) right after the op that drops it.
  bool poison = false;
  /// Debug mode: one heap allocation per buffer, made when it is created (filled with 0xFF) and
  /// freed when it is dropped. Allocates while running; for memory checkers only. Plans without
  /// transfers only.
  bool separate_allocations = false;
  /// Called on the copy thread before each offload or prefetch, with the op's index: a hook for
  /// tracing, and for tests that delay copies to prove that timing never costs memory.
  std::function<void(std::size_t)> before_copy{};
};

/// When each op of the last run started and ended, in seconds from the run's start, and how long
/// it stalled: waited for a range of the arena (or host pool) that an earlier op still used,
/// after its inputs were ready and the op before it had started. Stalls are 0 without transfers.
struct run_report {
  std::vector<double> start, end, stall;
  double seconds = 0;  ///< the whole run
  [[nodiscard]] double total_stall() const noexcept {
    double sum = 0;
    for (const double s : stall) sum += s;
    return sum;
  }
};

class host_executor {
 public:
  /// Takes a plan (checked with `check_memory_plan`; `std::invalid_argument` if unsound) and
  /// allocates its arena, aligned to the plan's alignment.
  explicit host_executor(memory_plan memory, host_executor_options options = {})
      : plan_(std::move(memory)),
        program_(detail::make_program(plan_)),
        options_(std::move(options)),
        bases_(plan_.buffers.size(), nullptr) {
    const std::size_t n = program_.steps.size();
    report_.start.assign(n, 0);
    report_.end.assign(n, 0);
    report_.stall.assign(n, 0);
    const bool transfers = plan_.has_transfers();
    if (transfers && options_.separate_allocations)
      throw std::invalid_argument(
          "host_executor: separate_allocations runs plans without transfers only (this plan "
          "offloads; its buffers live on three threads)");
    if (options_.separate_allocations) {
      owned_.resize(plan_.buffers.size());
      allocate(memory_plan::input());
      return;
    }
    arena_ = {static_cast<std::byte*>(
                  ::operator new(static_cast<std::size_t>(plan_.arena_bytes), alignment())),
              aligned_delete{alignment()}};
    if (plan_.host_bytes > 0)
      host_pool_ = {static_cast<std::byte*>(::operator new(
                        static_cast<std::size_t>(plan_.host_bytes), alignment())),
                    aligned_delete{alignment()}};
    for (std::size_t id = 0; id < plan_.buffers.size(); ++id)
      bases_[id] =
          (plan_.buffers[id].on_host ? host_pool_.get() : arena_.get()) + plan_.buffers[id].offset;
    if (transfers) start_streams();
  }

  /// The input a_0: write it before `run`. It keeps its place and contents across runs, unless
  /// the schedule offloads it (then its bytes may serve other buffers during a run).
  [[nodiscard]] std::span<std::byte> input() noexcept { return bytes(memory_plan::input()); }
  /// g_0 after a run, until the next one.
  [[nodiscard]] std::span<const std::byte> input_gradient() const noexcept {
    const buffer_id id = program_.input_gradient;
    return {bases_[id], bases_[id] == nullptr ? 0 : size(id)};
  }

  /// Runs the schedule once, calling `callbacks` for every compute op in order (on this thread).
  /// Allocates nothing (unless `separate_allocations`). An exception from a callback (or from
  /// `before_copy`) ends the run, once the copies under way have, and propagates.
  /// A type without one of the three handlers is refused at compile time with a message per
  /// missing handler.
  template <class C>
  void run(C&& callbacks) {
    if constexpr (detail::check_handlers<std::remove_reference_t<C>, forward_call, backward_call,
                                         loss_call>())
      run_checked(callbacks);
  }

 private:
  template <class C>
  void run_checked(C& callbacks) {
    if (options_.separate_allocations) release_all_but_input();
    if (options_.poison && !options_.separate_allocations) poison_all_but_input();
    const std::size_t n = program_.steps.size();
    const auto t0 = std::chrono::steady_clock::now();
    auto since = [&t0] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    if (streams_) {
      auto nothing = [](std::size_t) {};
      streams_->run(
          nothing, nothing,
          [&](std::size_t i) {
            call(callbacks, program_.steps[i]);
            poison_after(i);
          },
          [&](std::size_t i) {
            if (options_.before_copy) options_.before_copy(i);
            const detail::program_step& s = program_.steps[i];
            if (s.input.size > 0) std::memcpy(bytes(s.output).data(), bytes(s.input).data(),
                                              static_cast<std::size_t>(s.input.size));
            poison_after(i);
          },
          nothing);
      for (std::size_t i = 0; i < n; ++i) {
        report_.start[i] = streams_->start(i);
        report_.end[i] = streams_->end(i);
        report_.stall[i] = streams_->start(i) - streams_->ready(i);
      }
      report_.seconds = since();
      return;
    }
    for (std::size_t i = 0; i < n; ++i) {
      report_.start[i] = since();
      if (options_.separate_allocations)
        for (std::size_t j = program_.created_begin[i]; j < program_.created_begin[i + 1]; ++j)
          allocate(program_.created[j]);
      call(callbacks, program_.steps[i]);
      if (options_.separate_allocations) {
        for (std::size_t j = program_.dropped_begin[i]; j < program_.dropped_begin[i + 1]; ++j)
          release(program_.dropped[j]);
      } else if (options_.poison) {
        for (std::size_t j = program_.dropped_begin[i]; j < program_.dropped_begin[i + 1]; ++j)
          poison(program_.dropped[j]);
      }
      report_.end[i] = since();
    }
    report_.seconds = since();
  }

 public:
  /// The timing of the last run (zeros before the first).
  [[nodiscard]] const run_report& last_run() const noexcept { return report_; }

  [[nodiscard]] const memory_plan& plan() const noexcept { return plan_; }
  [[nodiscard]] size_type arena_bytes() const noexcept { return plan_.arena_bytes; }
  /// The host pool of the host copies (empty without transfers).
  [[nodiscard]] std::span<std::byte> host_pool() noexcept {
    return {host_pool_.get(), host_pool_ ? static_cast<std::size_t>(plan_.host_bytes) : 0};
  }
  /// The arena (empty with `separate_allocations`).
  [[nodiscard]] std::span<std::byte> arena() noexcept {
    return {arena_.get(), arena_ ? static_cast<std::size_t>(plan_.arena_bytes) : 0};
  }

 private:
  struct aligned_delete {
    std::align_val_t alignment;
    void operator()(std::byte* p) const noexcept { ::operator delete(p, alignment); }
  };

  [[nodiscard]] std::align_val_t alignment() const noexcept {
    return std::align_val_t{static_cast<std::size_t>(plan_.alignment)};
  }
  [[nodiscard]] std::size_t size(buffer_id id) const noexcept {
    return static_cast<std::size_t>(plan_.buffers[id].size);
  }
  [[nodiscard]] std::span<std::byte> bytes(buffer_id id) const noexcept {
    return {bases_[id], size(id)};
  }
  [[nodiscard]] std::span<std::byte> bytes(const detail::byte_range& r) const noexcept {
    return {bases_[r.buffer] + r.offset, static_cast<std::size_t>(r.size)};
  }

  template <class C>
  void call(C& callbacks, const detail::program_step& s) const {
    const auto writable = [this](const detail::byte_range& r) { return bytes(r); };
    const auto read_only = [this](const detail::byte_range& r) {
      return std::span<const std::byte>(bytes(r));
    };
    // A transfer: the copy threads copy; a wait has done its waiting.
    detail::call_handler<forward_call, backward_call, loss_call>(callbacks, s, writable, read_only);
  }

  // The three streams: the program's waits, a data wait for what an op reads from another
  // stream and a memory wait for bytes it writes that another op frees.
  void start_streams() {
    detail::stream_program p;
    const std::size_t n = program_.steps.size();
    for (const detail::program_step& s : program_.steps) p.streams.push_back(stream_of(s.kind));
    p.waits_begin = program_.waits_begin;
    for (const detail::dependency& d : program_.waits)
      p.waits.push_back({d.op, d.memory ? detail::stream_wait::until::memory
                                        : detail::stream_wait::until::data});
    p.release_after.assign(n, detail::stream_program::none);
    streams_ = std::make_unique<detail::stream_runner>(std::move(p));
  }

  // With `poison`: fills the buffers dropped after op i (on a stream), once the op it waits for
  // as well (an offloaded buffer's last reader) has ended.
  void poison_after(std::size_t i) {
    if (!options_.poison) return;
    for (std::size_t j = program_.dropped_begin[i]; j < program_.dropped_begin[i + 1]; ++j) {
      const buffer_id id = program_.dropped[j];
      const buffer& b = plan_.buffers[id];
      if (b.last_read != b.last_op && b.last_read != i && !streams_->wait_ended(b.last_read))
        return;  // the run was aborted
      poison(id);
    }
  }

  void poison(buffer_id id) const noexcept { std::memset(bases_[id], 0xFF, size(id)); }

  void poison_all_but_input() noexcept {
    const auto& in = plan_.buffers[memory_plan::input()];
    const auto begin = static_cast<std::size_t>(in.offset);
    const auto end = begin + static_cast<std::size_t>(in.size);
    const std::span<std::byte> all = arena();
    std::memset(all.data(), 0xFF, begin);
    std::memset(all.data() + end, 0xFF, all.size() - end);
  }

  void allocate(buffer_id id) {
    owned_[id] = std::make_unique<std::byte[]>(size(id));
    bases_[id] = owned_[id].get();
    poison(id);
  }
  void release(buffer_id id) noexcept {
    owned_[id].reset();
    bases_[id] = nullptr;
  }
  void release_all_but_input() noexcept {
    for (std::size_t id = 1; id < owned_.size(); ++id) release(static_cast<buffer_id>(id));
  }

  memory_plan plan_;
  detail::program program_;
  host_executor_options options_;
  std::unique_ptr<std::byte[], aligned_delete> arena_{nullptr, aligned_delete{}};
  std::unique_ptr<std::byte[], aligned_delete> host_pool_{nullptr, aligned_delete{}};
  std::unique_ptr<detail::stream_runner> streams_;  // plans with transfers only
  run_report report_;
  std::vector<std::unique_ptr<std::byte[]>> owned_;  // separate_allocations only
  std::vector<std::byte*> bases_;                    // where each buffer starts, when it exists
};

}  // namespace remat
