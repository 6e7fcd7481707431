// A user stage without a tape size is no `stage_like`: solving a chain of them does not compile,
// and the compiler names the concept.
// EXPECT: stage_like
#include <remat/solve.hpp>

#include <cstdint>
#include <vector>

struct my_stage {
  double forward_time = 1;
  double backward_time = 1;
  std::int64_t output_size = 1;
#ifdef REMAT_COMPILE_FAIL_FIXED
  std::int64_t tape_size = 1;
#endif
};

struct my_chain {
  std::vector<my_stage> stages{my_stage{}};
  std::int64_t input_size = 1;
};

int main() {
  return remat::solve(my_chain{}, 100).feasible ? 0 : 1;
}
