// Exhaustive search: the least-time schedule over all op sequences, persistent or not, with
// the transfer ops where the chain has a `transfer` (detail/exhaustive/timed_search.hpp).
//
// A state is the set of held tensors (a_0..a_L, t_1..t_L, g_0..g_L); every op of docs/model.md
// whose peak fits the budget is an edge weighted by its time, and Dijkstra finds the cheapest path
// from {a_0} to any state holding g_0. Exponential in the chain length: the ground truth for tests
// on chains of a handful of stages.
//
// What the search leaves out unless `solve_options::drop_recorded_inputs`: F_none(k) while
// t_{k+1} is held. The model lets that op drop a_k and later re-make it for B(k), but in a
// framework the recording of t_{k+1} holds a_k (autograd saves a stage's input for its
// backward), so the drop frees nothing and the schedule would peak above its prediction
// (docs/model.md, "Schedules an executor can run"). No persistent schedule has such an op, so
// the search is never worse than the optimal solver either way.
#pragma once

#include <remat/chain.hpp>
#include <remat/concepts.hpp>
#include <remat/detail/exhaustive/timed_search.hpp>
#include <remat/detail/verify/finish.hpp>
#include <remat/schedule.hpp>
#include <remat/simulate.hpp>
#include <remat/solver_options.hpp>
#include <remat/solvers/store_all.hpp>
#include <remat/walk.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <queue>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace remat {

namespace detail {

// The held sets of the search without transfers, as bits: a_0..a_L, g_0..g_L, t_1..t_L, and for
// each held tape t_k the option that recorded it (in `width_[k]` bits past the held set). What an
// op does in a state is the walk's.
class held_state_space {
 public:
  // `drop_recorded_inputs`: solve_options' (F_none(k) also while t_{k+1} is held).
  explicit held_state_space(const chain& c, bool drop_recorded_inputs = false)
      : c_(c), L_(static_cast<std::int32_t>(c.length())), drop_recorded_(drop_recorded_inputs) {
    shift_.assign(c.length() + 1, 0);
    width_.assign(c.length() + 1, 0);
    auto next = static_cast<std::uint32_t>(3 * L_ + 2);
    for (std::size_t k = 1; k <= c.length(); ++k) {
      shift_[k] = next;
      width_[k] = static_cast<std::uint32_t>(std::bit_width(option_count(c.stages[k - 1]) - 1));
      next += width_[k];
    }
    if (next > 64)
      throw_solver_error("exhaustive: the chain's held tensors and options take " +
                         std::to_string(next) + " bits; the search keeps them in 64");
  }

  using state = std::uint64_t;
  state initial() const { return bit_a(0); }
  bool done(state s) const { return (s & bit_g(0)) != 0; }

  // Calls f(op, next_state, time, peak, held) for every op that is valid in state `s` (`held`:
  // the memory `s` holds): each op is peeked on a walker holding what `s` holds (walk.hpp), which
  // says whether it runs, what it makes and frees, its time and transient; its peak is what `s`
  // holds, what it makes and its transient.
  template <class F>
  void for_each_op(state s, F&& f) const {
    const walker& here = walker_of(s);
    const size_type held = here.device_bytes();
    const auto try_op = [&](const op& o) {
      const walk_step step = here.peek(o);
      if (!step.ok()) return;
      const walked_op& x = step.op;
      state next = s;
      for (const value_id id : x.frees)
        if (id != no_value) next = without(next, here.values()[id]);
      size_type made = 0;
      if (x.made != no_value) {
        next = with(next, step.made);
        made = step.made.bytes;
      }
      f(o, next, x.time, held + made + x.transient, held);
    };
    for (std::int32_t k = 0; k < L_; ++k) {
      try_op(f_ck(k));
      if (drop_recorded_ || !has(s, bit_t(k + 1))) try_op(f_none(k));
      for (std::size_t o = 0; o < option_count(c_.stages[static_cast<std::size_t>(k)]); ++o)
        try_op(f_all(k, static_cast<std::uint16_t>(o)));
      try_op(backward(k));
    }
    try_op(loss_op(L_));
  }

 private:
  static bool has(state s, state bit) { return (s & bit) != 0; }
  state bit_a(std::int32_t k) const { return state{1} << k; }
  state bit_g(std::int32_t k) const { return state{1} << (L_ + 1 + k); }
  state bit_t(std::int32_t k) const { return state{1} << (2 * L_ + 1 + k); }  // k >= 1

  // The option of the held tape t_k.
  std::uint16_t tape_option(state s, std::int32_t k) const {
    const std::uint32_t shift = shift_[static_cast<std::size_t>(k)];
    const std::uint32_t width = width_[static_cast<std::size_t>(k)];
    if (width == 0) return 0;
    return static_cast<std::uint16_t>((s >> shift) & ((state{1} << width) - 1));
  }

  // A walker holding what `s` holds: the space's one walker, restarted (no allocation once its
  // memory has grown; a space serves one search, not several threads).
  const walker& walker_of(state s) const {
    held_.clear();
    for (std::int32_t k = 0; k <= L_; ++k) {
      if (has(s, bit_a(k))) held_.push_back({{'a', k}, false, 0});
      if (k > 0 && has(s, bit_t(k))) held_.push_back({{'t', k}, false, tape_option(s, k)});
      if (has(s, bit_g(k))) held_.push_back({{'g', k}, false, 0});
    }
    scratch_.restart(held_);
    return scratch_;
  }

  // `s` holding, or no longer holding, value `v` (a tape with its option).
  state bit_of(const walked_value& v) const {
    return v.kind == 'a' ? bit_a(v.index) : v.kind == 'g' ? bit_g(v.index) : bit_t(v.index);
  }
  state with(state s, const walked_value& v) const {
    s |= bit_of(v);
    if (v.kind == 't') s |= state{v.option} << shift_[static_cast<std::size_t>(v.index)];
    return s;
  }
  state without(state s, const walked_value& v) const {
    if (v.kind == 't') s &= ~(state{v.option} << shift_[static_cast<std::size_t>(v.index)]);
    return s & ~bit_of(v);
  }

  const chain& c_;
  std::int32_t L_;
  bool drop_recorded_;
  std::vector<std::uint32_t> shift_;  // [k]: the first bit of t_k's option
  std::vector<std::uint32_t> width_;  // [k]: its bits
  mutable std::vector<held_tensor> held_;
  mutable walker scratch_{c_};
};

// Dijkstra over held sets. `combine(path_cost, op_time, op_peak)` gives the cost of extending a
// path: the sum of times for the fastest schedule, the running maximum peak for the least memory
// (both are monotone, so Dijkstra is exact). The loss runs only where the memory held is at most
// `loss_limit` (the retained memory, docs/pipelines.md). Returns the ops of the best path to g_0,
// and whether there is one.
template <class Cost, class Combine>
std::pair<bool, std::vector<op>> exhaustive_search(
    const chain& c, size_type budget, Cost start_cost, Combine combine,
    bool drop_recorded_inputs = false,
    size_type loss_limit = std::numeric_limits<size_type>::max()) {
  using state = held_state_space::state;
  const held_state_space space(c, drop_recorded_inputs);
  struct node {
    Cost cost;
    state prev;
    op via;
    bool closed;
  };
  std::unordered_map<state, node> nodes;
  using entry = std::pair<Cost, state>;  // ties broken by state: deterministic
  std::priority_queue<entry, std::vector<entry>, std::greater<>> queue;
  nodes[space.initial()] = {start_cost, space.initial(), {}, false};
  queue.push({start_cost, space.initial()});
  while (!queue.empty()) {
    const Cost cost = queue.top().first;
    const state s = queue.top().second;
    queue.pop();
    node& n = nodes[s];
    if (n.closed || cost > n.cost) continue;
    n.closed = true;
    if (space.done(s)) {
      // Predecessors were closed before their successors, so this walk ends at the start.
      std::vector<op> ops;
      for (state at = s; at != space.initial(); at = nodes[at].prev) ops.push_back(nodes[at].via);
      std::reverse(ops.begin(), ops.end());
      return {true, ops};
    }
    space.for_each_op(s, [&](op o, state next, double time, size_type peak, size_type held) {
      if (peak > budget) return;
      if (o.kind == op_kind::loss && held > loss_limit) return;
      const Cost next_cost = combine(cost, time, peak);
      auto [it, inserted] = nodes.try_emplace(next, node{next_cost, s, o, false});
      if (!inserted) {
        if (it->second.closed || !(next_cost < it->second.cost)) return;
        it->second = {next_cost, s, o, false};
      }
      queue.push({next_cost, next});
    });
  }
  return {false, {}};
}

// The memories held right before the loss in the states a sequence within `budget` reaches (the
// values `retained` can take), sorted, without duplicates.
inline std::vector<size_type> reachable_retained(const chain& c, size_type budget,
                                                 bool drop_recorded_inputs) {
  using state = held_state_space::state;
  const held_state_space space(c, drop_recorded_inputs);
  std::unordered_map<state, bool> seen{{space.initial(), true}};
  std::vector<state> todo{space.initial()};
  std::vector<size_type> out;
  while (!todo.empty()) {
    const state s = todo.back();
    todo.pop_back();
    space.for_each_op(s, [&](op o, state next, double, size_type peak, size_type held) {
      if (peak > budget) return;
      if (o.kind == op_kind::loss) out.push_back(held);
      if (seen.try_emplace(next, true).second) todo.push_back(next);
    });
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// The exhaustive search with K = `options.in_flight` > 1 micro-batches in flight: for every value
// R `retained` can take, in increasing order, the fastest sequence within budget - (K - 1) R whose
// loss runs holding at most R, kept where strictly faster than those before (ties: the least
// retained); the least budget likewise, the least over R of the least peak with the loss holding
// at most R, plus (K - 1) R.
inline solve_result exhaustive_in_flight(const chain& c, size_type budget,
                                         const solve_options& options) {
  const bool drop = options.drop_recorded_inputs;
  const auto K = static_cast<size_type>(options.in_flight);
  const size_type any = std::numeric_limits<size_type>::max();
  solve_result out;
  out.budget = budget;
  out.min_feasible_budget = solve_result::no_budget;
  for (const size_type R : reachable_retained(c, any, drop)) {
    const auto least = exhaustive_search(
        c, any, c.input_size,
        [](size_type path, double, size_type peak) { return std::max(path, peak); }, drop, R);
    if (!least.first) continue;
    const size_type need = replay(c, least.second).peak_memory + (K - 1) * R;
    if (out.min_feasible_budget == solve_result::no_budget || need < out.min_feasible_budget)
      out.min_feasible_budget = need;
  }
  double best = std::numeric_limits<double>::infinity();
  std::vector<op> best_ops;
  for (const size_type R : reachable_retained(c, budget, drop)) {
    if ((K - 1) * R > budget) break;
    auto found = exhaustive_search(
        c, budget - (K - 1) * R, 0.0,
        [](double path, double time, size_type) { return path + time; }, drop, R);
    if (!found.first) continue;
    const double makespan = replay(c, found.second).makespan;
    if (makespan < best) {
      best = makespan;
      best_ops = std::move(found.second);
    }
  }
  if (best_ops.empty()) return out;
  solve_result r = finish(c, solver::exhaustive, budget, std::move(best_ops), best);
  if (r.schedule.peak_memory + (K - 1) * r.retained > budget)
    throw_internal_error("exhaustive", "breaks the in-flight constraint");
  r.min_feasible_budget = out.min_feasible_budget;
  return r;
}

}  // namespace detail

/// The least-time schedule over all op sequences that fit `budget` (sizes as given, no
/// discretization); with `options.in_flight` = K > 1, those with peak + (K - 1) * retained <=
/// budget. Refuses chains longer than `exhaustive_max_stages` with a `solver_error`.
template <chain_like C>
solve_result solve_exhaustive(const C& chain_in, size_type budget,
                              const solve_options& options = {}) {
  const bool drop = options.drop_recorded_inputs;
  const chain c = to_chain(chain_in);
  if (budget < 0) detail::throw_solver_error("the budget must be >= 0");
  if (c.length() > exhaustive_max_stages)
    detail::throw_solver_error("exhaustive: the chain has " + std::to_string(c.length()) +
                               " stages; the search over all op sequences is limited to " +
                               std::to_string(exhaustive_max_stages) + " (use the optimal solver)");
  const bool link = c.transfer.offload_bandwidth > 0 || c.transfer.prefetch_bandwidth > 0;
  if (options.in_flight > 1) {
    if (link)
      detail::throw_solver_error(
          "exhaustive: offloading with micro-batches in flight (in_flight = " +
          std::to_string(options.in_flight) +
          ") is not modelled; solve the chain without its transfer link");
    return detail::exhaustive_in_flight(c, budget, options);
  }
  if (link) {
    if (c.length() > exhaustive_max_transfer_stages)
      detail::throw_solver_error(
          "exhaustive: the chain has " + std::to_string(c.length()) +
          " stages; the search over all op sequences with transfers is limited to " +
          std::to_string(exhaustive_max_transfer_stages) + " (use the offload solver)");
    // The least budget: bisection between 0 and store-all's peak (the searches are monotone in
    // the budget: a sequence that fits fits every larger budget).
    size_type lo = 0;
    size_type hi = detail::replay(c, detail::store_all_ops(static_cast<std::int32_t>(c.length())))
                       .peak_memory;  // feasible
    while (lo < hi) {
      const size_type mid = lo + (hi - lo) / 2;
      if (!detail::timed_search(c, mid, drop).run().first.empty())
        hi = mid;
      else
        lo = mid + 1;
    }
    solve_result out;
    if (budget >= hi) {
      auto [ops, searched] = detail::timed_search(c, budget, drop).run();
      const double makespan = detail::replay(c, ops).makespan;
      if (!(std::abs(makespan - searched) <= 1e-9 * std::max(1.0, makespan)))
        detail::throw_internal_error("exhaustive", "replays in " + std::to_string(makespan) +
                                                       ", not the " + std::to_string(searched) +
                                                       " its search found");
      out = detail::finish(c, solver::exhaustive, budget, std::move(ops), makespan);
    }
    out.budget = budget;
    out.min_feasible_budget = hi;
    return out;
  }
  // Store-all is always a path, so the least-peak search always succeeds.
  const auto least_peak = detail::exhaustive_search(
      c, std::numeric_limits<size_type>::max(), c.input_size,
      [](size_type path, double, size_type peak) { return std::max(path, peak); }, drop);
  const size_type min_budget = detail::replay(c, least_peak.second).peak_memory;
  if (budget < min_budget) {
    solve_result out;
    out.budget = budget;
    out.min_feasible_budget = min_budget;
    return out;
  }
  auto fastest = detail::exhaustive_search(
      c, budget, 0.0, [](double path, double time, size_type) { return path + time; }, drop);
  const double makespan = detail::replay(c, fastest.second).makespan;
  solve_result out =
      detail::finish(c, solver::exhaustive, budget, std::move(fastest.second), makespan);
  out.min_feasible_budget = min_budget;
  return out;
}

namespace detail {
// `solver::exhaustive`'s row: its solve (no DP over memory: nothing to estimate).
template <>
struct solver_entry<solver::exhaustive> : entry<&solve_exhaustive<chain>> {};
}  // namespace detail

}  // namespace remat
