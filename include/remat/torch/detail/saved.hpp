// The tensors a recording forward saves, for the libtorch executor's offloads of tapes
// (docs/offload.md). A tape t_{k+1} is stage k's recorded graph: its output and what autograd
// saved. libtorch's C++ API has no public hook for saved tensors (at::SavedTensorDefaultHooks is
// Python's), but every SavedVariable asks the default engine for hooks
// (`Engine::get_default_saved_variable_hooks`, virtual), and the engine can be replaced
// (`set_default_engine_stub`, as Python installs its own). `recording_engine` is libtorch's engine
// but for that one function: while remat records a stage whose tape will move, it gives each
// saved variable hooks that keep the tensor (as libtorch does without hooks) and report it.
#pragma once

#include <remat/chain.hpp>
#include <remat/torch/memory.hpp>

#include <ATen/ATen.h>
#include <c10/core/Storage.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/saved_variable_hooks.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <vector>

namespace remat::torch::detail {

// Where the hooks report saved tensors on this thread; null: no hooks (libtorch's behaviour).
inline thread_local std::vector<at::Tensor>* saved_sink = nullptr;

class reporting_hooks final : public ::torch::autograd::SavedVariableHooks {
 public:
  explicit reporting_hooks(std::vector<at::Tensor>* sink) : sink_(sink) {}
  void call_pack_hook(const at::Tensor& t) override {
    // Detached: an output saved by its own node keeps no reference to that node (no cycle).
    saved_ = t.detach();
    sink_->push_back(saved_);
  }
  at::Tensor call_unpack_hook() override { return saved_; }

 private:
  std::vector<at::Tensor>* sink_;
  at::Tensor saved_;
};

class recording_engine final : public ::torch::autograd::Engine {
 public:
  std::unique_ptr<::torch::autograd::SavedVariableHooks> get_default_saved_variable_hooks()
      override {
    if (saved_sink == nullptr) return nullptr;
    return std::make_unique<reporting_hooks>(saved_sink);
  }
  static ::torch::autograd::Engine& get() {
    static recording_engine* const engine = new recording_engine();  // never destroyed
    return *engine;
  }
};

// Makes `recording_engine` the default engine, once for the process. Refused where another
// engine was installed (Python's, in a process that embeds it).
inline void install_recording_engine() {
  static const bool installed = [] {
    using ::torch::autograd::Engine;
    if (&Engine::get_default_engine() != &Engine::get_base_engine())
      throw std::runtime_error(
          "remat::torch::executor: offloading a tape needs libtorch's C++ autograd engine, and "
          "another one is installed (Python's?)");
    ::torch::autograd::set_default_engine_stub(&recording_engine::get);
    return true;
  }();
  (void)installed;
}

// Reports the tensors autograd saves on this thread while it lives.
class collect_saved {
 public:
  explicit collect_saved(std::vector<at::Tensor>& into) : previous_(saved_sink) {
    saved_sink = &into;
  }
  collect_saved(const collect_saved&) = delete;
  collect_saved& operator=(const collect_saved&) = delete;
  ~collect_saved() { saved_sink = previous_; }

 private:
  std::vector<at::Tensor>* previous_;
};

// The storages of `tensors` that the CPU tracker allocated after serial `since`, each once.
inline std::vector<c10::Storage> storages_since(std::uint64_t since,
                                                const std::vector<at::Tensor>& tensors) {
  std::vector<c10::Storage> out;
  for (const at::Tensor& t : tensors) {
    if (!t.defined() || !t.has_storage()) continue;
    const c10::Storage& s = t.storage();
    if (s.nbytes() == 0 || tracking_cpu_allocator::serial_of(s.data_ptr()) <= since) continue;
    const bool seen = std::any_of(out.begin(), out.end(), [&](const c10::Storage& o) {
      return o.unsafeGetStorageImpl() == s.unsafeGetStorageImpl();
    });
    if (!seen) out.push_back(s);
  }
  return out;
}

// The storages of `tensors`, each once, but those of `known` (a stage's input, parameters and
// buffers): what a recording forward allocated, on any device (on the CPU the tracker's serials
// say it without the list).
inline std::vector<c10::Storage> storages_except(const std::vector<at::Tensor>& tensors,
                                                 const std::vector<at::Tensor>& known) {
  auto impl = [](const at::Tensor& t) { return t.storage().unsafeGetStorageImpl(); };
  std::vector<c10::Storage> out;
  for (const at::Tensor& t : tensors) {
    if (!t.defined() || !t.has_storage() || t.storage().nbytes() == 0) continue;
    const bool seen =
        std::any_of(known.begin(), known.end(),
                    [&](const at::Tensor& k) { return k.has_storage() && impl(k) == impl(t); }) ||
        std::any_of(out.begin(), out.end(), [&](const c10::Storage& o) {
          return o.unsafeGetStorageImpl() == impl(t);
        });
    if (!seen) out.push_back(t.storage());
  }
  return out;
}

inline size_type bytes_of(const std::vector<c10::Storage>& storages) {
  size_type n = 0;
  for (const c10::Storage& s : storages) n += static_cast<size_type>(s.nbytes());
  return n;
}

}  // namespace remat::torch::detail
