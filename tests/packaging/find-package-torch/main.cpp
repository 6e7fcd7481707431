// A consumer of the installed remat::torch: the tracker counts a tensor's bytes exactly.
#include <remat/torch/memory.hpp>

#include <c10/core/CPUAllocator.h>

int main() {
  remat::torch::memory_meter& m = remat::torch::cpu_memory();
  const remat::size_type before = m.current();
  c10::DataPtr block = c10::GetCPUAllocator()->allocate(1000);
  return m.current() - before == 1000 ? 0 : 1;
}
