// Runs a schedule on the host: the user's code does the math, the executor owns the memory.
//
//   remat::plan_result p = remat::plan(chain, budget);
//   remat::host_executor ex(p.memory);
//   std::memcpy(ex.input().data(), x, ex.input().size());
//   ex.run(net);                      // net.forward(call), net.backward(call), net.loss(call)
//   use(ex.input_gradient());         // g_0, valid until the next run
//
// The arena is allocated once, when the executor is built; `run` allocates nothing and only
// calls the user's code on ranges of it (see op_calls.hpp for what each call holds). Two debug
// aids: `poison` fills every range the schedule frees with 0xFF bytes (a NaN for float and
// double), so a use after free shows in the gradients; `separate_allocations` gives each buffer
// its own heap block, made when the buffer is created and freed when it is dropped, so a memory
// checker (AddressSanitizer, valgrind) reports any access outside a live buffer.
#pragma once

#include <remat/detail/planning/program.hpp>
#include <remat/memory_plan.hpp>
#include <remat/op_calls.hpp>

#include <cstddef>
#include <cstring>
#include <memory>
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
concept host_callbacks = requires(C& c, const forward_call& f, const backward_call& b,
                                  const loss_call& l) {
  c.forward(f);
  c.backward(b);
  c.loss(l);
};

struct host_executor_options {
  /// Fill with 0xFF bytes the whole arena but a_0 when a run starts, and every buffer the
  /// schedule drops (workspaces included) right after the op that drops it.
  bool poison = false;
  /// Debug mode: one heap allocation per buffer, made when it is created (filled with 0xFF) and
  /// freed when it is dropped. Allocates while running; for memory checkers only.
  bool separate_allocations = false;
};

class host_executor {
 public:
  /// Takes a plan (checked with `check_memory_plan`; `std::invalid_argument` if unsound) and
  /// allocates its arena, aligned to the plan's alignment.
  explicit host_executor(memory_plan plan, host_executor_options options = {})
      : plan_(std::move(plan)),
        program_(detail::make_program(plan_)),
        options_(options),
        bases_(plan_.buffers.size(), nullptr) {
    if (options_.separate_allocations) {
      owned_.resize(plan_.buffers.size());
      allocate(memory_plan::input());
      return;
    }
    arena_ = {static_cast<std::byte*>(
                  ::operator new(static_cast<std::size_t>(plan_.arena_bytes), alignment())),
              aligned_delete{alignment()}};
    for (std::size_t id = 0; id < plan_.buffers.size(); ++id)
      bases_[id] = arena_.get() + plan_.buffers[id].offset;
  }

  /// The input a_0: write it before `run`. It keeps its place and contents across runs.
  [[nodiscard]] std::span<std::byte> input() noexcept { return bytes(memory_plan::input()); }
  /// g_0 after a run, until the next one.
  [[nodiscard]] std::span<const std::byte> input_gradient() const noexcept {
    const buffer_id id = program_.input_gradient;
    return {bases_[id], bases_[id] == nullptr ? 0 : size(id)};
  }

  /// Runs the schedule once, calling `callbacks` for every op in order. Allocates nothing
  /// (unless `separate_allocations`). An exception from a callback ends the run and propagates.
  template <host_callbacks C>
  void run(C&& callbacks) {
    if (options_.separate_allocations) release_all_but_input();
    if (options_.poison && !options_.separate_allocations) poison_all_but_input();
    const std::size_t n = program_.steps.size();
    for (std::size_t i = 0; i < n; ++i) {
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
    }
  }

  [[nodiscard]] const memory_plan& plan() const noexcept { return plan_; }
  [[nodiscard]] size_type arena_bytes() const noexcept { return plan_.arena_bytes; }
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
    switch (s.kind) {
      case op_kind::forward_none:
      case op_kind::forward_checkpoint:
      case op_kind::forward_all:
        callbacks.forward(forward_call{s.stage, s.kind == op_kind::forward_all, bytes(s.input),
                                       bytes(s.output), bytes(s.saved), bytes(s.workspace)});
        break;
      case op_kind::backward:
        callbacks.backward(backward_call{s.stage, bytes(s.input), bytes(s.output), bytes(s.saved),
                                         bytes(s.output_gradient), bytes(s.input_gradient),
                                         bytes(s.workspace)});
        break;
      case op_kind::loss:
        callbacks.loss(loss_call{bytes(s.input), bytes(s.input_gradient), bytes(s.workspace)});
        break;
      case op_kind::offload:
      case op_kind::prefetch:
      case op_kind::wait: break;  // a program has none (detail/planning/program.hpp refuses them)
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
  std::vector<std::unique_ptr<std::byte[]>> owned_;  // separate_allocations only
  std::vector<std::byte*> bases_;                    // where each buffer starts, when it exists
};

}  // namespace remat
