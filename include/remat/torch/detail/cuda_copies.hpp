// The CUDA half of the libtorch executor's offloading (docs/offload.md on a GPU): the compute
// stream is the device's current stream when the step starts; offloads and prefetches run on two
// streams of their own, one per direction, each driven by its copy thread of the three-stream
// runner (detail/planning/streams.hpp), which waits for each copy to end before the op counts as
// ended. So the runner's rule keeps the budget as on the CPU, in the caching allocator's bytes:
//
// * An offload waits, on its stream, for the compute op that made the tensor (an event recorded
//   after each compute op) and copies to pinned host memory (libtorch's pinned allocator). Its
//   device block is freed on the compute stream, which allocated it, once the copy has ended and
//   the compute ops issued before it that read the tensor have been issued: stream order keeps
//   their kernels ahead of any reuse.
// * A prefetch allocates on its own stream (so the caching allocator hands it no block the
//   compute stream may still use), copies back, and marks the block as used by the compute
//   stream (`recordStream`), so that when the compute stream frees it, it is reused only once
//   the compute stream's work on it has run.
//
// Only where libtorch has CUDA (REMAT_TORCH_CUDA); elsewhere offloading a GPU tensor is refused.
#pragma once

#if defined(REMAT_TORCH_CUDA)

#include <remat/torch/detail/compat.hpp>

#include <ATen/ATen.h>
#include <ATen/cuda/PinnedMemoryAllocator.h>
#include <c10/core/Storage.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>
#include <vector>

namespace remat::torch::detail {

class cuda_copies {
 public:
  static constexpr std::size_t input = static_cast<std::size_t>(-1);  // a_0: no op made it

  // For a step of `ops` ops on `device` (a GPU).
  cuda_copies(c10::Device device, std::size_t ops)
      : compute_(c10::cuda::getCurrentCUDAStream(device.index())),
        d2h_(c10::cuda::getStreamFromPool(false, device.index())),
        h2d_(c10::cuda::getStreamFromPool(false, device.index())),
        computed_(ops) {
    input_ready_.record(compute_);  // a_0 is ready once what the stream holds now has run
  }

  // On the compute thread, once compute op i's kernels are issued.
  void computed(std::size_t i) { computed_[i].record(compute_); }

  // On the offload thread: each storage's bytes to new pinned host blocks, once `producer` (a
  // compute op; `input` for a_0) has run, or at once for a tensor a prefetch brought back
  // (`prefetched`: its copy had ended). Returns when the copies have ended.
  std::vector<c10::DataPtr> to_host(const std::vector<c10::Storage>& storages,
                                    std::size_t producer, bool prefetched) {
    if (!prefetched) (producer == input ? input_ready_ : computed_[producer]).block(d2h_);
    std::vector<c10::DataPtr> host;
    host.reserve(storages.size());
    for (const c10::Storage& s : storages) {
      host.push_back(at::cuda::getPinnedMemoryAllocator()->allocate(s.nbytes()));
      C10_CUDA_CHECK(cudaMemcpyAsync(host.back().get(), s.data(), s.nbytes(),
                                     cudaMemcpyDeviceToHost, d2h_.stream()));
    }
    d2h_.synchronize();
    return host;
  }

  // On the prefetch thread: a device block per storage from its allocator on the prefetch
  // stream, the host bytes copied in, the storages pointed at them (the host blocks are freed).
  // Returns when the copies have ended.
  void to_device(const std::vector<c10::Storage>& storages) {
    std::vector<c10::DataPtr> blocks;
    blocks.reserve(storages.size());
    {
      const c10::cuda::CUDAStreamGuard on_copy_stream(h2d_);
      for (const c10::Storage& s : storages) {
        c10::Allocator* a = c10::cuda::CUDACachingAllocator::get();
        blocks.push_back(a->allocate(s.nbytes()));
        C10_CUDA_CHECK(cudaMemcpyAsync(blocks.back().get(), s.data(), s.nbytes(),
                                       cudaMemcpyHostToDevice, h2d_.stream()));
      }
    }
    h2d_.synchronize();
    for (std::size_t i = 0; i < storages.size(); ++i) {
      c10::cuda::CUDACachingAllocator::recordStream(blocks[i], compute_);
      storages[i].unsafeGetStorageImpl()->set_data_ptr_noswap(std::move(blocks[i]));
    }
  }

 private:
  c10::cuda::CUDAStream compute_, d2h_, h2d_;
  compat::cuda_event input_ready_;
  std::vector<compat::cuda_event> computed_;
};

}  // namespace remat::torch::detail

#endif  // REMAT_TORCH_CUDA
