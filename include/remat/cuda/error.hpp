// CUDA errors as exceptions, at the boundary of remat's CUDA code.
//
//   REMAT_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, stream));
//
// throws `remat::cuda_error` when the call does not return cudaSuccess; the exception carries
// the status, the call as written and where it was made.
#pragma once

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace remat {

/// A CUDA call that failed: `what()` reads like
/// `cudaMalloc(&p, 1024) failed at executor.hpp:80: cudaErrorMemoryAllocation (out of memory)`.
class cuda_error : public std::runtime_error {
 public:
  cuda_error(cudaError_t status, std::string call, std::string place)
      : std::runtime_error(call + " failed at " + place + ": " + cudaGetErrorName(status) + " (" +
                           cudaGetErrorString(status) + ")"),
        status_(status),
        call_(std::move(call)),
        place_(std::move(place)) {}

  /// The status the call returned.
  [[nodiscard]] cudaError_t status() const noexcept { return status_; }
  /// The call, as written in the source.
  [[nodiscard]] const std::string& call() const noexcept { return call_; }
  /// Where: `file:line`, or the op of a schedule during which a kernel launch failed.
  [[nodiscard]] const std::string& place() const noexcept { return place_; }

 private:
  cudaError_t status_;
  std::string call_;
  std::string place_;
};

namespace detail {

[[noreturn]] inline void throw_cuda_error(cudaError_t status, const char* call, std::string place) {
  throw cuda_error(status, call, std::move(place));
}

// The place is built only on failure.
inline void check_cuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status != cudaSuccess)
    throw_cuda_error(status, call, std::string(file) + ":" + std::to_string(line));
}

}  // namespace detail
}  // namespace remat

/// Throws `remat::cuda_error` unless `call` returns cudaSuccess.
#define REMAT_CUDA_CHECK(call) ::remat::detail::check_cuda((call), #call, __FILE__, __LINE__)
