// Every row of `solver_table` with its solve and its estimate for `remat::chain` (each solver's
// header names them in its `solver_entry`): what `remat::solve` and `remat::estimate_solve_at`
// call, instead of a switch over the solvers.
#pragma once

#include <remat/chain.hpp>
#include <remat/solver_options.hpp>
#include <remat/solvers/checkpoint_only.hpp>
#include <remat/solvers/chen_greedy.hpp>
#include <remat/solvers/chen_sqrt.hpp>
#include <remat/solvers/exhaustive.hpp>
#include <remat/solvers/min_memory.hpp>
#include <remat/solvers/offload.hpp>
#include <remat/solvers/offload_baselines.hpp>
#include <remat/solvers/optimal.hpp>
#include <remat/solvers/revolve.hpp>
#include <remat/solvers/sequential.hpp>
#include <remat/solvers/store_all.hpp>

#include <array>
#include <cstddef>
#include <iterator>
#include <utility>

namespace remat::detail {

struct solver_row {
  solve_pointer solve = nullptr;
  estimate_pointer estimate = nullptr;
};

// In `solver_table`'s order.
inline constexpr std::array<solver_row, std::size(solver_table)> solver_rows =
    []<std::size_t... K>(std::index_sequence<K...>) {
  return std::array<solver_row, sizeof...(K)>{
      solver_row{solver_entry<solver_table[K].solver>::solve,
                 solver_entry<solver_table[K].solver>::estimate}...};
}
(std::make_index_sequence<std::size(solver_table)>{});

// The solve and the estimate of `s`.
constexpr const solver_row& row_of(solver s) noexcept {
  return solver_rows[static_cast<std::size_t>(&info(s) - solver_table)];
}

}  // namespace remat::detail
