// remat/compiled.hpp: the calls compiled once for remat::chain answer as the templates do. This
// file is the program's one implementation file (REMAT_COMPILED_IMPLEMENTATION).
#define REMAT_COMPILED_IMPLEMENTATION
#include <remat/compiled.hpp>
#undef REMAT_COMPILED_IMPLEMENTATION

#include <remat/estimate.hpp>
#include <remat/solve.hpp>

#include <doctest/doctest.h>

#include "random_chain.hpp"

#include <cstdint>
#include <random>

namespace unit_compiled_test {

TEST_CASE("compiled: solve and the estimates, as the templates give them") {
  std::mt19937_64 rng(45);
  for (int n = 0; n < 20; ++n) {
    const remat::chain c = remat::testing::random_chain(rng, {.min_stages = 1, .max_stages = 12});
    const remat::size_type top =
        remat::simulate(c, remat::detail::store_all_ops(static_cast<std::int32_t>(c.length())))
            .peak_memory;
    for (const remat::size_type budget : {top / 3, top / 2, top}) {
      for (const remat::solver s : {remat::solver::optimal, remat::solver::revolve}) {
        for (const remat::size_type slots : {remat::auto_slots, remat::exact_units}) {
          const remat::solve_options o{.solver = s, .slots = slots};
          CHECK(remat::compiled::solve(c, budget, o) == remat::solve(c, budget, o));
          const remat::solve_estimate e = remat::compiled::estimate_solve_at(c, budget, o);
          const remat::solve_estimate f = remat::estimate_solve_at(c, budget, o);
          CHECK(e.exact == f.exact);
          CHECK(e.within_limits == f.within_limits);
          CHECK(e.runs_dp == f.runs_dp);
        }
      }
    }
    CHECK(remat::compiled::estimate_solve(c).within_limits);
  }
  // The same errors.
  CHECK_THROWS_AS((void)remat::compiled::solve(remat::chain{}, 10), remat::chain_error);
  CHECK_THROWS_AS((void)remat::compiled::solve(remat::testing::random_chain(rng), -1),
                  remat::solver_error);
}

}  // namespace unit_compiled_test
