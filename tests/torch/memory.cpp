#include <remat/torch/memory.hpp>
// Before doctest: libtorch's logging header defines a CHECK of its own, which must not replace
// doctest's.
#include <ATen/ATen.h>

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <thread>
#include <vector>

TEST_CASE("cpu_memory counts every tensor byte, exactly") {
  remat::torch::memory_meter& m = remat::torch::cpu_memory();
  const remat::size_type before = m.current();
  {
    const at::Tensor a = at::empty({1000}, at::kFloat);
    CHECK(m.current() - before == 4000);
    const at::Tensor b = at::zeros({3, 7}, at::kDouble);
    CHECK(m.current() - before == 4000 + 168);
  }
  CHECK(m.current() == before);
}

TEST_CASE("cpu_memory: the peak is the most held since reset_peak, and resets to what is held") {
  remat::torch::memory_meter& m = remat::torch::cpu_memory();
  const at::Tensor kept = at::empty({256}, at::kFloat);
  m.reset_peak();
  CHECK(m.peak() == m.current());
  const remat::size_type base = m.current();
  { const at::Tensor t = at::empty({1 << 20}, at::kByte); }
  { const at::Tensor t = at::empty({1 << 10}, at::kByte); }
  CHECK(m.current() == base);
  CHECK(m.peak() - base == (1 << 20));
  m.reset_peak();
  CHECK(m.peak() == base);
}

TEST_CASE("cpu_memory: data is aligned and equals the context (mkldnn's raw_allocate needs it)") {
  (void)remat::torch::cpu_memory();
  c10::Allocator* a = c10::GetCPUAllocator();
  void* p = a->raw_allocate(100);
  CHECK(reinterpret_cast<std::uintptr_t>(p) % 64 == 0);
  a->raw_deallocate(p);
  const at::Tensor t = at::empty({17}, at::kFloat);
  CHECK(reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 64 == 0);
  CHECK(t.storage().data_ptr().get_context() == t.data_ptr());
}

TEST_CASE("cpu_memory: a zero-byte tensor costs nothing") {
  remat::torch::memory_meter& m = remat::torch::cpu_memory();
  const remat::size_type before = m.current();
  const at::Tensor t = at::empty({0, 5}, at::kFloat);
  CHECK(m.current() == before);
}

TEST_CASE("cpu_memory: exact under concurrent allocation and release") {
  remat::torch::memory_meter& m = remat::torch::cpu_memory();
  const remat::size_type before = m.current();
  m.reset_peak();
  constexpr int threads = 4;
  constexpr int rounds = 200;
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i)
    pool.emplace_back([] {
      for (int r = 0; r < rounds; ++r) {
        const at::Tensor t = at::empty({1000}, at::kByte);
        const at::Tensor u = at::empty({24}, at::kByte);
      }
    });
  for (std::thread& t : pool) t.join();
  CHECK(m.current() == before);
  // At most every thread's two tensors at once; at least one thread's.
  CHECK(m.peak() - before <= threads * 1024);
  CHECK(m.peak() - before >= 1024);
}

TEST_CASE("allocated_size: exact on the CPU, the caching allocator's 512-byte blocks on CUDA") {
  using remat::torch::allocated_size;
  const c10::Device cpu(c10::kCPU);
  const c10::Device gpu(c10::kCUDA, 0);  // a device named, not used: no GPU needed
  const std::size_t sizes[] = {0U, 1U, 511U, 512U, 513U, 4000U};
  for (const std::size_t n : sizes) CHECK(allocated_size(cpu, n) == static_cast<remat::size_type>(n));
  CHECK(allocated_size(gpu, 0) == 0);
  CHECK(allocated_size(gpu, 1) == 512);
  CHECK(allocated_size(gpu, 512) == 512);
  CHECK(allocated_size(gpu, 513) == 1024);
  CHECK(allocated_size(gpu, 4000) == 4096);
  CHECK(allocated_size(gpu, std::size_t{3} << 20) == 3 << 20);
}

TEST_CASE("default_memory: the CPU's is cpu_memory(); a device remat cannot measure is named") {
  CHECK(&remat::torch::default_memory(c10::Device(c10::kCPU)) == &remat::torch::cpu_memory());
  CHECK_THROWS_WITH_AS(remat::torch::default_memory(c10::Device(c10::kMeta)),
                       doctest::Contains("no memory meter for tensors on meta"),
                       std::invalid_argument);
#if defined(REMAT_TORCH_CUDA)
  // One meter per device, made without touching the GPU (reading it needs one).
  remat::torch::memory_meter& a = remat::torch::default_memory(c10::Device(c10::kCUDA, 0));
  CHECK(&a == &remat::torch::default_memory(c10::Device(c10::kCUDA, 0)));
  CHECK(&a != &remat::torch::default_memory(c10::Device(c10::kCUDA, 1)));
  CHECK(dynamic_cast<remat::torch::cuda_memory*>(&a) != nullptr);
#else
  CHECK_THROWS_WITH_AS(remat::torch::default_memory(c10::Device(c10::kCUDA, 0)),
                       doctest::Contains("this libtorch has no CUDA"), std::invalid_argument);
#endif
}
