// remat/torch/detail/rng.hpp: what a recomputation puts back so that it draws what the first run
// drew. The CPU generator through libtorch; the CUDA generators' seed-and-offset logic through a
// fake with at::CUDAGeneratorImpl's four members (reading a real one needs a GPU).
#include <remat/torch/detail/rng.hpp>
// Before doctest: libtorch's logging header defines a CHECK of its own, which must not replace
// doctest's.
#include <ATen/ATen.h>

#include <doctest/doctest.h>


#include <cstddef>
#include <cstdint>

namespace {

// at::CUDAGeneratorImpl's seed and offset, as it treats them: setting the seed resets the offset.
struct fake_philox {
  std::uint64_t seed = 67280421310721;
  std::uint64_t offset = 0;
  int seeds_set = 0;
  [[nodiscard]] std::uint64_t current_seed() const { return seed; }
  [[nodiscard]] std::uint64_t philox_offset_per_thread() const { return offset; }
  void set_current_seed(std::uint64_t s) {
    seed = s;
    offset = 0;
    ++seeds_set;
  }
  void set_philox_offset_per_thread(std::uint64_t o) { offset = o; }
};

}  // namespace

TEST_CASE("rng: the CPU generator put back draws the same numbers, normal samples included") {
  using namespace remat::torch::detail;
  (void)at::randn({3});  // leaves a cached normal sample in the generator, which must come back
  const rng_state saved = save_rng();
  const at::Tensor a = at::rand({64});
  const at::Tensor b = at::randn({5});
  restore_rng(saved);
  CHECK(at::equal(at::rand({64}), a));
  CHECK(at::equal(at::randn({5}), b));
  CHECK(!at::equal(at::rand({64}), a));  // and then the generator goes on
}

TEST_CASE("rng: a CUDA generator's offset is put back, its seed only where it changed") {
  using namespace remat::torch::detail;
  fake_philox g;
  g.offset = 48;
  const philox_state saved = save_philox(g);
  CHECK((saved == philox_state{67280421310721, 48}));
  g.offset = 48 + 4 * 1024;  // a dropout drew
  restore_philox(g, saved);
  CHECK(save_philox(g) == saved);
  CHECK(g.seeds_set == 0);  // setting the seed would reset the offset (and refuse under capture)

  g.set_current_seed(7);  // reseeded since: the seed comes back, then the offset
  g.offset = 12;
  restore_philox(g, saved);
  CHECK(save_philox(g) == saved);
  CHECK(g.seeds_set == 2);
}

TEST_CASE("rng: every GPU's generator put back draws the same numbers (needs a GPU)") {
  using namespace remat::torch::detail;
#if defined(REMAT_TORCH_CUDA)
  const int gpus = static_cast<int>(c10::cuda::device_count());
  if (gpus == 0) {
    MESSAGE("skipped: no GPU (libtorch has CUDA)");
    return;
  }
  const rng_state saved = save_rng();
  REQUIRE(saved.cuda.size() == static_cast<std::size_t>(gpus));
  const auto on = at::TensorOptions().device(at::kCUDA, 0);
  const at::Tensor mask = at::dropout(at::ones({4096}, on), 0.5, /*train=*/true);
  const at::Tensor n = at::randn({33}, on);
  restore_rng(saved);
  CHECK(at::equal(at::dropout(at::ones({4096}, on), 0.5, /*train=*/true), mask));
  CHECK(at::equal(at::randn({33}, on), n));
#else
  CHECK(save_rng().cuda.empty());
  MESSAGE("skipped: this libtorch has no CUDA");
#endif
}
