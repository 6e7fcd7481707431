// What differs between the libtorch releases remat::torch is built against (Debian's 1.13 and
// PyTorch 2.x), in one place, keyed on <torch/version.h>. The rest of the adapter names what is
// declared here instead of testing versions itself.
//
//   since 2.3  c10::Allocator::allocate is no longer const, and copy_data (used by
//              Allocator::clone) is pure virtual: an allocator must define it.
//   since 2.3  the CUDA caching allocator's statistics take a c10::DeviceIndex, not an int.
//   since 2.5  its Stat and StatType live in c10::CachingDeviceAllocator
//              (c10/core/CachingDeviceAllocator.h; later releases move them on to
//              c10::CachingAllocator and keep them visible there), no longer in
//              c10::cuda::CUDACachingAllocator.
//   later      CUDAEvent moves from ATen (at::cuda) to c10 (c10::cuda).
//
// Checked against the headers of Debian's 1.13 and of the 2.5.1 and 2.15.0 wheels.
#pragma once

#include <torch/version.h>

#if defined(REMAT_TORCH_CUDA)
#include <c10/cuda/CUDACachingAllocator.h>
#if __has_include(<c10/cuda/CUDAEvent.h>)
#include <c10/cuda/CUDAEvent.h>
#else
#include <ATen/cuda/CUDAEvent.h>
#endif
#endif

#define REMAT_TORCH_VERSION_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||                \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

// `c10::Allocator::allocate`'s qualifier: const before 2.3.
#if REMAT_TORCH_VERSION_AT_LEAST(2, 3)
#define REMAT_TORCH_ALLOCATE_CONST
#define REMAT_TORCH_ALLOCATOR_HAS_COPY_DATA 1
#else
#define REMAT_TORCH_ALLOCATE_CONST const
#define REMAT_TORCH_ALLOCATOR_HAS_COPY_DATA 0
#endif

#if defined(REMAT_TORCH_CUDA)
namespace remat::torch::detail::compat {

#if REMAT_TORCH_VERSION_AT_LEAST(2, 5)
using cuda_stat = c10::CachingDeviceAllocator::Stat;
using cuda_stat_type = c10::CachingDeviceAllocator::StatType;
#else
using cuda_stat = c10::cuda::CUDACachingAllocator::Stat;
using cuda_stat_type = c10::cuda::CUDACachingAllocator::StatType;
#endif

// A CUDA event: ATen's before it moved to c10 (c10/cuda/CUDAEvent.h, found by its header).
#if __has_include(<c10/cuda/CUDAEvent.h>)
using cuda_event = c10::cuda::CUDAEvent;
#else
using cuda_event = at::cuda::CUDAEvent;
#endif

#if REMAT_TORCH_VERSION_AT_LEAST(2, 3)
using cuda_device_index = c10::DeviceIndex;
#else
using cuda_device_index = int;
#endif

}  // namespace remat::torch::detail::compat
#endif
