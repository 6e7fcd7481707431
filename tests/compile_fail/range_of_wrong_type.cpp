// A chain whose stages are a range of doubles, not of stages: it is no `chain_like`, and the
// compiler says that the element type is no `stage_like`.
// EXPECT: stage_like
#include <remat/solve.hpp>

#include <cstdint>
#include <vector>

struct my_chain {
#ifdef REMAT_COMPILE_FAIL_FIXED
  std::vector<remat::stage> stages{remat::stage{1, 1, 1, 1, 0, 0}};
#else
  std::vector<double> stages{1.0, 2.0};
#endif
  std::int64_t input_size = 1;
};

int main() {
  return remat::solve(my_chain{}, 100).feasible ? 0 : 1;
}
