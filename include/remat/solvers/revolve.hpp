// Revolve: the binomial checkpointing of Griewank and Walther (ACM TOMS 26(1), 2000, Algorithm
// 799 "Revolve"), which treats the chain as homogeneous.
//
// Reversing n steps whose first input is held, with c snapshots (the held input is one of them):
// one step is a "turn": F_all(i), B(i) (for the chain's last stage F_all(L-1), loss, B(L-1): the
// loss reads the tape). For n >= 2, advance m steps from the input without recording (F_ck(i),
// then F_none(i+1 .. i+m-1)), keep a_{i+m} as a new snapshot, reverse the last n - m steps with
// c - 1 snapshots, then the first m steps with c (the snapshot of a_{i+m} is free again: B(i+m)
// dropped it). With c = 1 the only choice is m = n - 1 (the state a_{i+n-1} is worked on, not
// stored), as in Revolve, where the current state is not a snapshot.
//
// m is chosen so that the number of advances (F_ck and F_none ops) is Griewank's minimum
//   t(n, c) = r n - C(c + r, c + 1),  r the least integer with C(c + r, c) >= n:
// t(., c) is convex with slope r(n, c) at n (it grows by r(n, c) from n - 1 to n), so the cost of
// a split, m + t(m, c) + t(n - m, c - 1), changes by 1 + r(m, c) - r(n - m + 1, c - 1) from m - 1
// to m, a non-decreasing difference; the largest m where it is <= 0 is the largest optimal
// advance, found by bisection. On the homogeneous chain the whole schedule makes L F_all and
// t(L, s) advances (the tests check both against the formula), and its peak is s + 4 (the
// snapshots, the state worked on, a tape and two gradients), so at budget M it uses M - 4
// snapshots and takes L + t(L, M - 4). That is one forward less than `checkpoint-only` at the
// same M (docs/model.md's L + t(L, M - 4) + 1): Revolve's turn of the last step records it and
// reverses it at once, which in docs/model.md's ops is the loss reading the tape t_L, a use of the
// tape branch that the DP without it cannot make. This mapping is the judgement call; it is what
// Revolve does, and still a persistent schedule, so `optimal` is never slower.
//
// The solver tries s = L - 1 (more would change nothing) down to 1 snapshots and keeps the largest
// s whose schedule, replayed on the chain's real byte sizes, fits the budget; the homogeneous
// assumption is Revolve's, so more snapshots need not mean faster or smaller on a real chain.
// `min_feasible_budget` is the least peak over every s. `options.slots` does not apply. Time
// and memory are those of replaying every candidate, O(sum over s of t(L, s)): s = 1 alone is
// L^2 / 2 ops, fine for the few hundred stages of real networks, not for tens of thousands.
#pragma once

#include <remat/chain.hpp>
#include <remat/concepts.hpp>
#include <remat/detail/solvers/segmented.hpp>
#include <remat/schedule.hpp>
#include <remat/solver_options.hpp>

#include <cstdint>
#include <utility>
#include <vector>

namespace remat {
namespace detail {

// Revolve's repetition number: the least r with C(c + r, c) >= n, for n >= 1, c >= 1.
constexpr std::int64_t revolve_repetitions(std::int64_t n, std::int64_t c) noexcept {
  if (c == 1) return n - 1;  // C(1 + r, 1) = r + 1
  std::int64_t r = 0;
  std::int64_t binomial = 1;  // C(c + r, r); below n, so the product below cannot overflow
  while (binomial < n) {
    ++r;
    binomial = binomial * (c + r) / r;
  }
  return r;
}

// The largest optimal advance m for reversing n >= 2 steps with c >= 1 snapshots.
constexpr std::int64_t revolve_split(std::int64_t n, std::int64_t c) noexcept {
  if (c == 1) return n - 1;
  std::int64_t lo = 1;  // the difference at m = lo is <= 0 (or lo = 1)
  std::int64_t hi = n;  // the difference at m = hi is > 0 (or hi = n)
  while (hi - lo > 1) {
    const std::int64_t m = lo + (hi - lo) / 2;
    if (1 + revolve_repetitions(m, c) - revolve_repetitions(n - m + 1, c - 1) <= 0)
      lo = m;
    else
      hi = m;
  }
  return lo;
}

// Revolve's schedule for a chain of `length` stages with `snapshots` >= 1 snapshots.
constexpr std::vector<op> revolve_ops(std::int32_t length, std::int32_t snapshots) {
  struct task {
    std::int32_t i, n, c;  // reverse n steps from stage i with c snapshots
  };
  std::vector<op> ops;
  std::vector<task> stack{{0, length, snapshots}};
  while (!stack.empty()) {
    const task tk = stack.back();
    stack.pop_back();
    if (tk.n == 1) {
      ops.push_back(f_all(tk.i));
      if (tk.i == length - 1) ops.push_back(loss_op(length));
      ops.push_back(backward(tk.i));
    } else {
      const auto m = static_cast<std::int32_t>(revolve_split(tk.n, tk.c));
      ops.push_back(f_ck(tk.i));
      for (std::int32_t k = tk.i + 1; k < tk.i + m; ++k) ops.push_back(f_none(k));
      stack.push_back({tk.i, m, tk.c});
      stack.push_back({tk.i + m, tk.n - m, tk.c - 1});
    }
  }
  return ops;
}

}  // namespace detail

/// Revolve's binomial schedule with the most snapshots whose schedule fits `budget`.
template <chain_like C>
constexpr solve_result solve_revolve(const C& chain_in, size_type budget,
                                     const solve_options& options = {}) {
  const chain c = to_chain(chain_in);
  const auto length = static_cast<std::int32_t>(c.length());
  detail::knob_search search(c, budget, solver::revolve, detail::keep_rule::first_fit);
  for (std::int32_t s = length > 1 ? length - 1 : 1; s >= 1; --s)
    search.offer(detail::revolve_ops(length, s));
  return detail::keep_in_flight(std::move(search).result(), budget, options);
}

namespace detail {
// `solver::revolve`'s row: its solve (no DP over memory: nothing to estimate).
template <>
struct solver_entry<solver::revolve> : entry<&solve_revolve<chain>> {};
}  // namespace detail

}  // namespace remat
