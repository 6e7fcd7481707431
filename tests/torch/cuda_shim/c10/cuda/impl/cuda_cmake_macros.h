// Stands in for the header a CUDA build of libtorch generates (Debian's CPU build ships the other
// c10/cuda headers without it), so that remat::torch::cuda_memory can be compiled, not linked,
// against libtorch 1.13's real CUDA caching-allocator declarations here. Used only by the
// remat_torch_cuda_meter_check object library in tests/CMakeLists.txt.
#pragma once
#define C10_CUDA_BUILD_SHARED_LIBS
