// A chain type without an input size is no `chain_like`, and the compiler names the concept.
// EXPECT: chain_like
#include <remat/simulate.hpp>

#include <cstdint>
#include <vector>

struct my_chain {
  std::vector<remat::stage> stages{remat::stage{1, 1, 1, 1, 0, 0}};
#ifdef REMAT_COMPILE_FAIL_FIXED
  std::int64_t input_size = 1;
#endif
};

int main() {
  const std::vector<remat::op> ops{remat::f_all(0), remat::loss_op(1), remat::backward(0)};
  return remat::simulate(my_chain{}, std::span<const remat::op>(ops)).valid() ? 0 : 1;
}
