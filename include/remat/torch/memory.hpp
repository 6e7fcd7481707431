// Measuring the memory libtorch allocates: one interface, `remat::torch::memory_meter`, over
//
//   * `cpu_memory()`: an exact tracker of libtorch's CPU allocator. The first call installs an
//     allocator that wraps the one libtorch had (c10::SetCPUAllocator) and counts every byte a
//     tensor asks for, so current and peak are exact and repeatable to the byte. It stays
//     installed for the life of the process (tensors allocated through it may outlive any
//     object); memory allocated before the first call is not counted.
//   * `cuda_memory(device)`: the CUDA caching allocator's own statistics (allocated bytes,
//     current and peak), where libtorch was built with CUDA (REMAT_TORCH_CUDA, set by the
//     remat::torch target). The allocator rounds every block up to 512 bytes and counts the
//     rounded size: `allocated_size` says what a tensor of n bytes counts on a device.
//   * `default_memory(device)`: the meter for tensors on `device`, what profiles and steps
//     measure with unless told otherwise.
//
//   remat::torch::memory_meter& m = remat::torch::cpu_memory();
//   m.reset_peak();
//   auto y = net->forward(x);
//   std::int64_t transient = m.peak() - m.current();
#pragma once

#include <remat/concepts.hpp>
#include <remat/torch/detail/compat.hpp>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/Device.h>
#if defined(REMAT_TORCH_CUDA)
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

namespace remat::torch {

/// Bytes allocated on one device: what is held now, and the most held since the last
/// `reset_peak`. Implementations are thread-safe.
class memory_meter {
 public:
  virtual ~memory_meter() = default;
  [[nodiscard]] virtual size_type current() const = 0;
  [[nodiscard]] virtual size_type peak() const = 0;
  /// Makes the peak what is held now.
  virtual void reset_peak() = 0;

 protected:
  memory_meter() = default;
  memory_meter(const memory_meter&) = default;
  memory_meter& operator=(const memory_meter&) = default;
};

namespace detail {

// Wraps the CPU allocator libtorch had. Each block carries a header of one alignment unit
// (64 bytes, libtorch's CPU alignment, so the tensor's data stays aligned) holding the size
// asked for and how to free the block; the tensor sees `data == context`, which libtorch's
// raw_allocate (used by mkldnn) requires. Each block also gets a serial number, increasing in
// allocation order, so that the executor can tell the blocks a recording forward allocated from
// those that existed before it (offloading moves the former only: executor.hpp).
class tracking_cpu_allocator final : public c10::Allocator, public memory_meter {
 public:
  static constexpr std::size_t header_bytes = 64;

  explicit tracking_cpu_allocator(c10::Allocator* wrapped) : wrapped_(wrapped) {}

  c10::DataPtr allocate(std::size_t n) REMAT_TORCH_ALLOCATE_CONST override {
    if (n == 0) return wrapped_->allocate(0);
    c10::DataPtr block = wrapped_->allocate(n + header_bytes);
    auto* base = static_cast<std::byte*>(block.get());
    auto* h = reinterpret_cast<header*>(base);
    h->bytes = static_cast<size_type>(n);
    h->wrapped_deleter = block.get_deleter();
    h->wrapped_context = block.release_context();
    h->owner = this;
    h->serial = serial_.fetch_add(1, std::memory_order_relaxed) + 1;
    add(h->bytes);
    void* data = base + header_bytes;
    return {data, data, &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
#if REMAT_TORCH_ALLOCATOR_HAS_COPY_DATA
  // Allocator::clone's copy: the blocks are plain host memory.
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
#endif

  [[nodiscard]] size_type current() const override {
    return current_.load(std::memory_order_relaxed);
  }
  [[nodiscard]] size_type peak() const override { return peak_.load(std::memory_order_relaxed); }
  void reset_peak() override { peak_.store(current(), std::memory_order_relaxed); }

  /// The serial number the next block will be above: blocks allocated after this call have
  /// `serial_of` greater than what it returns.
  [[nodiscard]] std::uint64_t last_serial() const noexcept {
    return serial_.load(std::memory_order_relaxed);
  }
  /// A block's serial number (1, 2, ... in allocation order), or 0 if this tracker did not
  /// allocate it.
  [[nodiscard]] static std::uint64_t serial_of(const c10::DataPtr& p) noexcept {
    if (p.get() == nullptr || p.get_deleter() != &release) return 0;
    return reinterpret_cast<const header*>(static_cast<const std::byte*>(p.get()) - header_bytes)
        ->serial;
  }

 private:
  struct header {
    size_type bytes;
    c10::DeleterFnPtr wrapped_deleter;
    void* wrapped_context;
    const tracking_cpu_allocator* owner;
    std::uint64_t serial;
  };
  static_assert(sizeof(header) <= header_bytes);

  static void release(void* data) {
    if (data == nullptr) return;
    auto* h = reinterpret_cast<header*>(static_cast<std::byte*>(data) - header_bytes);
    h->owner->current_.fetch_sub(h->bytes, std::memory_order_relaxed);
    if (h->wrapped_deleter != nullptr) h->wrapped_deleter(h->wrapped_context);
  }

  void add(size_type n) const {  // const: called by allocate, const before libtorch 2.3
    const size_type now = current_.fetch_add(n, std::memory_order_relaxed) + n;
    size_type seen = peak_.load(std::memory_order_relaxed);
    while (now > seen && !peak_.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
    }
  }

  c10::Allocator* wrapped_;
  mutable std::atomic<size_type> current_{0};
  mutable std::atomic<size_type> peak_{0};
  mutable std::atomic<std::uint64_t> serial_{0};
};

// The tracker, installed on the first call.
inline tracking_cpu_allocator& cpu_tracker() {
  static tracking_cpu_allocator* const tracker = [] {
    // Never destroyed: tensors freed during static destruction still find it.
    auto* t = new tracking_cpu_allocator(c10::GetCPUAllocator());
    c10::SetCPUAllocator(t, /*priority=*/1);
    return t;
  }();
  return *tracker;
}

}  // namespace detail

/// The tracker of libtorch's CPU allocator, installed on the first call (thread-safe) with a
/// priority above libtorch's default one, and never removed.
inline memory_meter& cpu_memory() { return detail::cpu_tracker(); }

/// The CUDA caching allocator's size of a block of `bytes` bytes, as its statistics count it:
/// rounded up to 512 bytes (0 stays 0). The profile predicts sizes in these units wherever it
/// measures on CUDA. (With the allocator's default settings; a block of more than 1 MiB cut
/// from a cached segment keeps the segment's remainder when that is under 1 MiB, and is then
/// counted larger: docs/libtorch.md, "Memory meters".)
inline constexpr size_type cuda_block_bytes = 512;
[[nodiscard]] inline size_type allocated_size(const c10::Device& device, std::size_t bytes) {
  const auto n = static_cast<size_type>(bytes);
  if (!device.is_cuda() || n == 0) return n;
  return (n + cuda_block_bytes - 1) / cuda_block_bytes * cuda_block_bytes;
}

#if defined(REMAT_TORCH_CUDA)
/// The CUDA caching allocator's statistics for `device`: bytes allocated to tensors (not the
/// allocator's cached reserve), in its units (`allocated_size`).
class cuda_memory final : public memory_meter {
 public:
  explicit cuda_memory(int device)
      : device_(static_cast<detail::compat::cuda_device_index>(device)) {}
  [[nodiscard]] size_type current() const override { return stat().current; }
  [[nodiscard]] size_type peak() const override { return stat().peak; }
  void reset_peak() override { c10::cuda::CUDACachingAllocator::resetPeakStats(device_); }

 private:
  [[nodiscard]] detail::compat::cuda_stat stat() const {
    return c10::cuda::CUDACachingAllocator::getDeviceStats(device_)
        .allocated_bytes[static_cast<std::size_t>(detail::compat::cuda_stat_type::AGGREGATE)];
  }
  detail::compat::cuda_device_index device_;
};
#endif

/// The meter for tensors on `device`: `cpu_memory()` for the CPU, a `cuda_memory` of the device
/// for a GPU (one per device, made on first use, never destroyed). Throws
/// `std::invalid_argument` for a device remat cannot measure (another kind, or CUDA where this
/// libtorch has none).
inline memory_meter& default_memory(const c10::Device& device) {
  if (device.is_cpu()) return cpu_memory();
#if defined(REMAT_TORCH_CUDA)
  if (device.is_cuda() && device.has_index()) {
    static std::mutex mutex;
    static auto* const meters = new std::map<int, std::unique_ptr<cuda_memory>>();
    const std::lock_guard<std::mutex> lock(mutex);
    std::unique_ptr<cuda_memory>& m = (*meters)[device.index()];
    if (!m) m = std::make_unique<cuda_memory>(device.index());
    return *m;
  }
  const std::string measured = "the CPU and CUDA devices";
#else
  const std::string measured = "the CPU only (this libtorch has no CUDA)";
#endif
  throw std::invalid_argument("remat::torch: no memory meter for tensors on " + device.str() +
                              ": remat measures " + measured +
                              "; pass a memory_meter of your own in the options");
}

}  // namespace remat::torch
