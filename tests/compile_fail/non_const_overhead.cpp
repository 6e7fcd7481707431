// An optional cost whose member function is not const cannot be read through the const
// reference remat holds; rather than silently using 0 for it, compilation fails and says why.
// EXPECT: cannot be called on a const object
#include <remat/solve.hpp>

#include <cstdint>
#include <vector>

struct my_stage {
  double forward_time = 1;
  double backward_time = 1;
  std::int64_t output_size = 1;
  std::int64_t tape_size = 2;
#ifdef REMAT_COMPILE_FAIL_FIXED
  std::int64_t forward_overhead() const { return 3; }
#else
  std::int64_t forward_overhead() { return 3; }
#endif
};

struct my_chain {
  std::vector<my_stage> stages{my_stage{}};
  std::int64_t input_size = 1;
};

int main() {
  return remat::solve(my_chain{}, 100).feasible ? 0 : 1;
}
