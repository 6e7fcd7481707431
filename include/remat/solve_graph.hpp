// Solving a graph: linearize it (linearize.hpp), solve the chain of its blocks, and return the
// schedule only once its node-level replay (graph_simulate.hpp) confirms it: valid, within the
// peak the chain-level replay claims, at the makespan the solver claims.
//
//   remat::graph_solve_result r = remat::solve_graph(g, budget);
//   if (r.result.feasible) run(r.result.schedule.ops);  // ops on the chain of blocks
//   r.replay.peak_memory;                               // the node-level peak
#pragma once

#include <remat/graph.hpp>
#include <remat/graph_simulate.hpp>
#include <remat/linearize.hpp>
#include <remat/solve.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace remat {

/// A graph's solve: the linearization, the chain solve's result (its ops on `lin.chain`), and
/// the node-level replay of its schedule (empty when infeasible).
struct graph_solve_result {
  linearization lin;
  solve_result result;
  node_replay replay;
};

namespace detail::graphs {

// Whether two makespans agree up to the rounding of summing the same times in another order.
inline bool same_makespan(double a, double b) {
  return std::fabs(a - b) <= 1e-9 * std::max({1.0, std::fabs(a), std::fabs(b)});
}

}  // namespace detail::graphs

/// Solves the linearized graph `lin` of `g` (see `solve_graph(g, budget, options)`).
inline graph_solve_result solve_graph(const graph& g, linearization lin, size_type budget,
                                      const solve_options& options = {}) {
  graph_solve_result out;
  out.result = solve(lin.chain, budget, options);
  if (out.result.feasible) {
    out.replay = simulate_nodes(g, lin, out.result.schedule.ops);
    auto fail = [&](const std::string& why) {
      throw std::logic_error("remat internal error: a schedule of the " +
                             std::string(name(options.solver)) + " solver on a graph's blocks " +
                             why + " (budget " + std::to_string(budget) +
                             "); please report this with the graph");
    };
    if (!out.replay.valid()) fail("is invalid at node level: " + out.replay.error);
    if (out.replay.peak_memory > out.result.schedule.peak_memory)
      fail("peaks higher at node level than its chain-level replay (" +
           std::to_string(out.replay.peak_memory) + " > " +
           std::to_string(out.result.schedule.peak_memory) + ")");
    if (!detail::graphs::same_makespan(out.replay.makespan, out.result.schedule.makespan))
      fail("takes another time at node level than claimed (" +
           std::to_string(out.replay.makespan) + " vs " +
           std::to_string(out.result.schedule.makespan) + ")");
  }
  out.lin = std::move(lin);
  return out;
}

/// Linearizes `g` (throws `graph_error` for a bad graph), solves the chain of its blocks with
/// `options` at `budget` (bytes of activations, tapes, gradients and transients; globals are
/// outside it), and replays the schedule node by node before returning it. A schedule that the
/// node-level replay refuses or finds above the chain-level peak is a bug in the block costs: a
/// `std::logic_error`, never a result. Offloading solvers get a chain without a link to host
/// memory (graphs are solved without offloading).
inline graph_solve_result solve_graph(const graph& g, size_type budget,
                                      const solve_options& options = {}) {
  return solve_graph(g, linearize(g), budget, options);
}

}  // namespace remat
