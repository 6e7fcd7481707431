// The generators' state, saved and put back without allocating a tensor: what a recomputation
// restores so that it draws the same dropout masks. The CPU generator always; with CUDA
// (REMAT_TORCH_CUDA), every device's default CUDA generator too, as torch.utils.checkpoint
// does (its seed and Philox offset: torch.cuda.get_rng_state's content). Apart from state.hpp
// so that a user of it alone (the Python meter module, python/torch_meter.cpp) compiles none of
// libtorch's module headers.
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#if defined(REMAT_TORCH_CUDA)
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

namespace remat::torch::detail {

// The CPU generator's whole state (what dropout draws from), without allocating a tensor. The
// optionals are c10::optional before libtorch 2.x, std::optional since: named by what the
// generator returns.
struct cpu_rng_state {
  at::mt19937 engine;
  decltype(std::declval<at::CPUGeneratorImpl&>().next_float_normal_sample()) next_float;
  decltype(std::declval<at::CPUGeneratorImpl&>().next_double_normal_sample()) next_double;
};

inline cpu_rng_state save_cpu_rng() {
  at::Generator g = at::detail::getDefaultCPUGenerator();  // a handle to the one generator
  const std::lock_guard<std::mutex> lock(g.mutex());
  auto* impl = g.get<at::CPUGeneratorImpl>();
  return {impl->engine(), impl->next_float_normal_sample(), impl->next_double_normal_sample()};
}

inline void restore_cpu_rng(const cpu_rng_state& s) {
  at::Generator g = at::detail::getDefaultCPUGenerator();  // a handle to the one generator
  const std::lock_guard<std::mutex> lock(g.mutex());
  auto* impl = g.get<at::CPUGeneratorImpl>();
  impl->set_engine(s.engine);
  impl->set_next_float_normal_sample(s.next_float);
  impl->set_next_double_normal_sample(s.next_double);
}

// A Philox generator's state (a CUDA generator's): its seed and offset.
struct philox_state {
  std::uint64_t seed = 0;
  std::uint64_t offset = 0;
  friend bool operator==(const philox_state&, const philox_state&) = default;
};

// `Philox` is at::CUDAGeneratorImpl, or a type with its four members (the tests' fake: these
// run without a GPU).
template <class Philox>
philox_state save_philox(const Philox& g) {
  return {g.current_seed(), g.philox_offset_per_thread()};
}

// Puts `s` back. Setting the seed resets the offset to 0, so the offset is set after it; the
// seed is set only where it changed (a recomputation only moved the offset).
template <class Philox>
void restore_philox(Philox& g, const philox_state& s) {
  if (g.current_seed() != s.seed) g.set_current_seed(s.seed);
  g.set_philox_offset_per_thread(s.offset);
}

// Every generator a stage may draw from.
struct rng_state {
  cpu_rng_state cpu;
  std::vector<philox_state> cuda;  // per CUDA device, in device order; empty without CUDA
};

inline rng_state save_rng() {
  rng_state s{save_cpu_rng(), {}};
#if defined(REMAT_TORCH_CUDA)
  const auto n = static_cast<int>(c10::cuda::device_count());  // 0 without a GPU
  s.cuda.reserve(static_cast<std::size_t>(n));
  for (int d = 0; d < n; ++d) {
    at::Generator g = at::cuda::detail::getDefaultCUDAGenerator(static_cast<c10::DeviceIndex>(d));
    const std::lock_guard<std::mutex> lock(g.mutex());
    s.cuda.push_back(save_philox(*g.get<at::CUDAGeneratorImpl>()));
  }
#endif
  return s;
}

inline void restore_rng(const rng_state& s) {
  restore_cpu_rng(s.cpu);
#if defined(REMAT_TORCH_CUDA)
  for (std::size_t d = 0; d < s.cuda.size(); ++d) {
    at::Generator g = at::cuda::detail::getDefaultCUDAGenerator(static_cast<c10::DeviceIndex>(d));
    const std::lock_guard<std::mutex> lock(g.mutex());
    restore_philox(*g.get<at::CUDAGeneratorImpl>(), s.cuda[d]);
  }
#endif
}

}  // namespace remat::torch::detail
