// Compile-only check of remat::torch::cuda_memory, the CUDA half of memory.hpp, on a machine whose
// libtorch has no CUDA: it is compiled with REMAT_TORCH_CUDA against libtorch's own c10/cuda
// declarations and the CUDA toolkit's headers, never linked or run (that needs a CUDA libtorch
// and a GPU). A change in either API breaks this build instead of a user's.
#include <remat/torch/memory.hpp>

#if !defined(REMAT_TORCH_CUDA)
#error "this check compiles the CUDA meter: REMAT_TORCH_CUDA must be defined"
#endif

namespace {
[[maybe_unused]] remat::size_type use_cuda_meter(int device) {
  remat::torch::cuda_memory meter(device);
  remat::torch::memory_meter& any = meter;
  any.reset_peak();
  return any.peak() - any.current();
}
}  // namespace
