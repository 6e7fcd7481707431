// remat compiled once, for programs that solve `remat::chain`s from several files. A translation
// unit that calls `remat::solve` instantiates every solver and engine for its chain type (the
// README's first example takes seconds and hundreds of MB to compile); this header declares the
// same calls for `remat::chain` only, so that a file including it parses the model's types and
// nothing of the solvers, and one file of the program compiles them:
//
//   // in exactly one .cpp of the program:
//   #define REMAT_COMPILED_IMPLEMENTATION
//   #include <remat/compiled.hpp>
//
//   // in every other file:
//   #include <remat/compiled.hpp>
//   const remat::solve_result r = remat::compiled::solve(net, budget, {.slots = remat::exact_units});
//
// Each function returns what its namesake of <remat/solve.hpp> or <remat/estimate.hpp> returns
// for the same arguments, and throws the same errors; they are not constexpr.
// benchmarks/compile_time.sh measures the README's first example compiled both ways.
#pragma once

#include <remat/chain.hpp>
#include <remat/solver_options.hpp>

namespace remat::compiled {

/// `remat::solve(chain, budget, options)`.
solve_result solve(const chain& c, size_type budget, const solve_options& options = {});

/// `remat::estimate_solve_at(chain, budget, options)`.
solve_estimate estimate_solve_at(const chain& c, size_type budget,
                                 const solve_options& options = {});

/// `remat::estimate_solve(chain, options, probe_seconds)`.
solve_estimate estimate_solve(const chain& c, const solve_options& options = {},
                              double probe_seconds = 0.05);

}  // namespace remat::compiled

#ifdef REMAT_COMPILED_IMPLEMENTATION
#include <remat/estimate.hpp>
#include <remat/solve.hpp>

namespace remat::compiled {

solve_result solve(const chain& c, size_type budget, const solve_options& options) {
  return remat::solve(c, budget, options);
}

solve_estimate estimate_solve_at(const chain& c, size_type budget, const solve_options& options) {
  return remat::estimate_solve_at(c, budget, options);
}

solve_estimate estimate_solve(const chain& c, const solve_options& options, double probe_seconds) {
  return remat::estimate_solve(c, options, probe_seconds);
}

}  // namespace remat::compiled
#endif
