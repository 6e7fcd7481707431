// The CPU generator's state, saved and put back without allocating a tensor: what a
// recomputation restores so that it draws the same dropout masks. Apart from state.hpp so that a
// user of it alone (the Python meter module, python/torch_meter.cpp) compiles none of libtorch's
// module headers.
#pragma once

#include <ATen/CPUGeneratorImpl.h>

#include <mutex>

namespace remat::torch::detail {

// The CPU generator's whole state (what dropout draws from), without allocating a tensor.
struct rng_state {
  at::mt19937 engine;
  c10::optional<float> next_float;
  c10::optional<double> next_double;
};

inline rng_state save_rng() {
  at::Generator g = at::detail::getDefaultCPUGenerator();  // a handle to the one generator
  const std::lock_guard<std::mutex> lock(g.mutex());
  auto* impl = g.get<at::CPUGeneratorImpl>();
  return {impl->engine(), impl->next_float_normal_sample(), impl->next_double_normal_sample()};
}

inline void restore_rng(const rng_state& s) {
  at::Generator g = at::detail::getDefaultCPUGenerator();  // a handle to the one generator
  const std::lock_guard<std::mutex> lock(g.mutex());
  auto* impl = g.get<at::CPUGeneratorImpl>();
  impl->set_engine(s.engine);
  impl->set_next_float_normal_sample(s.next_float);
  impl->set_next_double_normal_sample(s.next_double);
}

}  // namespace remat::torch::detail
