// Moving a storage's bytes between the metered allocator and unmetered host memory, for the
// libtorch executor's offloads and prefetches: an offload copies a storage's bytes to host memory
// (plain aligned `new`, which no meter counts) and then swaps the storage's data pointer to that
// copy, so every tensor and view that shares the storage (the saved input of the next stage's
// tape, the user's input tensor for a_0) follows, and the metered block is freed; a prefetch
// allocates a block from the storage's own allocator, copies back and swaps again. Values never
// change.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/Storage.h>

#include <cstddef>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

namespace remat::torch::detail {

inline constexpr std::size_t host_alignment = 64;

inline void delete_host_block(void* p) { ::operator delete(p, std::align_val_t{host_alignment}); }

// Host memory no meter counts.
inline c10::DataPtr host_block(std::size_t bytes) {
  void* p = ::operator new(bytes, std::align_val_t{host_alignment});
  return {p, p, &delete_host_block, c10::Device(c10::DeviceType::CPU)};
}

// Copies each storage's bytes to a new host block (the device copies stay).
inline std::vector<c10::DataPtr> copy_to_host(const std::vector<c10::Storage>& storages) {
  std::vector<c10::DataPtr> host;
  host.reserve(storages.size());
  for (const c10::Storage& s : storages) {
    host.push_back(host_block(s.nbytes()));
    std::memcpy(host.back().get(), s.data(), s.nbytes());
  }
  return host;
}

// Points each storage at its host copy: the device blocks are freed.
inline void install_host_copies(const std::vector<c10::Storage>& storages,
                                std::vector<c10::DataPtr>& host) {
  for (std::size_t i = 0; i < storages.size(); ++i)
    storages[i].unsafeGetStorageImpl()->set_data_ptr_noswap(std::move(host[i]));
  host.clear();
}

// Allocates a device block for each storage from its allocator.
inline std::vector<c10::DataPtr> allocate_device(const std::vector<c10::Storage>& storages) {
  std::vector<c10::DataPtr> blocks;
  blocks.reserve(storages.size());
  for (const c10::Storage& s : storages) {
    c10::Allocator* a = s.unsafeGetStorageImpl()->allocator();
    blocks.push_back((a != nullptr ? a : c10::GetCPUAllocator())->allocate(s.nbytes()));
  }
  return blocks;
}

// Copies each storage's (host) bytes into its block and points the storage at it: the host
// blocks are freed.
inline void install_device_copies(const std::vector<c10::Storage>& storages,
                                  std::vector<c10::DataPtr>& blocks) {
  for (std::size_t i = 0; i < storages.size(); ++i) {
    std::memcpy(blocks[i].get(), storages[i].data(), storages[i].nbytes());
    storages[i].unsafeGetStorageImpl()->set_data_ptr_noswap(std::move(blocks[i]));
  }
  blocks.clear();
}

}  // namespace remat::torch::detail
