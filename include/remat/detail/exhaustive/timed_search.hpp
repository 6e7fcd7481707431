// The exhaustive search with transfers (docs/offload.md): the fastest op sequence of all, the
// eight ops of the model, for tiny chains.
//
// Ops start in issue order, so the start of the last op issued, T, never decreases along a
// sequence. A state is everything that decides the future relative to T: which tensors are held,
// have host copies and exist as gradients; when each held tensor is ready, each host copy exists
// and each stream is free; the ends of the compute ops that read each held copy (an offload frees
// no earlier); the memory allocated at T and the frees still to come. Two sequences reaching the
// same state have the same futures, so a shortest-path search on T over the states is exact (A*,
// with the compute stream's remaining work as its heuristic); a sequence that has produced g_0
// ends at T plus the latest stream's end. A W that would start at T changes
// nothing and is not tried.
#pragma once

#include <remat/chain.hpp>
#include <remat/schedule.hpp>
#include <remat/solver_options.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <queue>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

namespace remat::detail {

class timed_search {
 public:
  // The most states the search closes by default before it gives up (a solver_error).
  static constexpr std::size_t default_max_states = 2'000'000;

  // `drop_recorded_inputs`: solve_options' (F_none(k) also while t_{k+1} is held).
  timed_search(const chain& c, size_type budget, bool drop_recorded_inputs = false,
               std::size_t max_states = default_max_states)
      : c_(c),
        budget_(budget),
        L_(static_cast<std::int32_t>(c.length())),
        n_(2 * static_cast<std::size_t>(L_) + 1),
        max_states_(max_states),
        drop_recorded_(drop_recorded_inputs) {}

  // The fastest sequence within the budget and its makespan; empty where none fits.
  std::pair<std::vector<op>, double> run() {
    state start;
    start.held.assign(n_, 0);
    start.host.assign(n_, 0);
    start.ready.assign(n_, 0);
    start.offload_end.assign(n_, 0);
    start.last_read.assign(n_, 0);
    start.g.assign(static_cast<std::size_t>(L_) + 1, 0);
    start.held[0] = 1;
    start.memory = c_.input_size;
    if (start.memory > budget_) return {{}, 0};

    struct node {
      double cost;
      std::string prev;
      op via;
      bool closed;
    };
    std::unordered_map<std::string, node> nodes;
    // Queue entries: (T + the heuristic, final?, key, T); a final entry's first is the
    // sequence's makespan.
    using entry = std::tuple<double, bool, std::string, double>;
    std::priority_queue<entry, std::vector<entry>, std::greater<>> queue;
    std::unordered_map<std::string, state> states;
    const std::string k0 = key(start);
    nodes[k0] = {0, "", {}, false};
    states[k0] = start;
    queue.push({remaining(start), false, k0, 0.0});
    std::size_t closed = 0;
    while (!queue.empty()) {
      // (Copies, not a structured binding: clang 14 cannot capture bindings in the lambda.)
      const double priority = std::get<0>(queue.top());
      const bool final = std::get<1>(queue.top());
      const std::string k = std::get<2>(queue.top());
      const double cost = std::get<3>(queue.top());
      queue.pop();
      node& nd = nodes[k];
      if (final) {
        std::vector<op> ops;
        for (std::string at = k; at != k0; at = nodes[at].prev) ops.push_back(nodes[at].via);
        std::reverse(ops.begin(), ops.end());
        return {ops, priority};
      }
      if (nd.closed || cost > nd.cost) continue;
      nd.closed = true;
      if (++closed > max_states_)
        throw_solver_error("exhaustive: the search with transfers passed " +
                           std::to_string(max_states_) +
                           " states; it is for chains of a few stages with few distinct times");
      const state s = states[k];
      if (s.g[0]) {
        queue.push({cost + std::max({s.compute_end, s.d2h_end, s.h2d_end}), true, k, cost});
        continue;
      }
      for_each_op(s, [&](op o, double advance, state next) {
        const std::string nk = key(next);
        const double c = cost + advance;
        auto [it, inserted] = nodes.try_emplace(nk, node{c, k, o, false});
        if (!inserted) {
          if (it->second.closed || !(c < it->second.cost)) return;
          it->second = {c, k, o, false};
        }
        states[nk] = std::move(next);
        queue.push({c + remaining(states[nk]), false, nk, c});
      });
    }
    return {{}, 0};
  }

 private:
  struct state {
    std::vector<char> held, host, g;
    std::vector<double> ready, offload_end, last_read;  // offsets from T, >= 0
    double compute_end = 0, d2h_end = 0, h2d_end = 0;
    size_type memory = 0;
    std::vector<std::pair<double, size_type>> frees;  // (offset > 0, bytes), sorted
  };

  // A lower bound of the time from T to the end (A*'s heuristic): the compute stream is busy
  // until compute_end, then runs every backward (and the loss) not yet run. It never
  // overestimates, and it falls by at most the time T advances along an op, so A* on
  // T + remaining is exact.
  double remaining(const state& s) const {
    // The backward runs from L down: with g_j the lowest gradient held, the loss and B(j .. L-1)
    // have run, B(0 .. j-1) have not.
    std::int32_t lowest = L_ + 1;
    for (std::int32_t j = L_; j >= 0; --j)
      if (s.g[static_cast<std::size_t>(j)]) lowest = j;
    double r = s.compute_end;
    if (lowest == L_ + 1) r += c_.loss_time;
    for (std::int32_t k = 0; k < std::min(lowest, L_); ++k)
      r += c_.stages[static_cast<std::size_t>(k)].backward_time;
    return r;
  }

  static std::string key(const state& s) {
    std::string k;
    auto put = [&](const void* p, std::size_t n) { k.append(static_cast<const char*>(p), n); };
    put(s.held.data(), s.held.size());
    put(s.host.data(), s.host.size());
    put(s.g.data(), s.g.size());
    put(s.ready.data(), s.ready.size() * sizeof(double));
    put(s.offload_end.data(), s.offload_end.size() * sizeof(double));
    put(s.last_read.data(), s.last_read.size() * sizeof(double));
    put(&s.compute_end, sizeof(double));
    put(&s.d2h_end, sizeof(double));
    put(&s.h2d_end, sizeof(double));
    put(&s.memory, sizeof(size_type));
    for (const auto& f : s.frees) {
      put(&f.first, sizeof(double));
      put(&f.second, sizeof(size_type));
    }
    return k;
  }

  // Moves T forward by `d` >= 0: applies the frees due by then, shifts every offset.
  static void advance(state& s, double d) {
    if (d <= 0) return;
    auto shift = [d](double& v) { v = std::max(0.0, v - d); };
    for (double& v : s.ready) shift(v);
    for (double& v : s.offload_end) shift(v);
    for (double& v : s.last_read) shift(v);
    shift(s.compute_end);
    shift(s.d2h_end);
    shift(s.h2d_end);
    std::vector<std::pair<double, size_type>> left;
    for (auto f : s.frees) {
      if (f.first <= d) {
        s.memory -= f.second;
      } else {
        f.first -= d;
        left.push_back(f);
      }
    }
    s.frees = std::move(left);
  }
  static void add_free(state& s, double at, size_type bytes) {
    if (bytes == 0) return;
    if (at <= 0) {
      s.memory -= bytes;
      return;
    }
    s.frees.emplace_back(at, bytes);
    std::sort(s.frees.begin(), s.frees.end());
  }

  std::size_t a(std::int32_t k) const { return static_cast<std::size_t>(k); }
  std::size_t t(std::int32_t k) const { return static_cast<std::size_t>(L_ + k); }
  size_type x(std::int32_t k) const {
    return k == 0 ? c_.input_size : c_.stages[static_cast<std::size_t>(k - 1)].output_size;
  }
  size_type size_of(std::size_t v) const {
    const auto k = static_cast<std::int32_t>(v);
    return k <= L_ ? x(k) : c_.stages[static_cast<std::size_t>(k - L_ - 1)].tape_size;
  }

  // Calls f(op, advance of T, next state) for every op valid in `s` whose allocations fit. The
  // search writes out each op's effect itself, apart from the op table the simulator reads: it
  // is the oracle the solvers and the simulator are checked against.
  template <class F>
  void for_each_op(const state& s, F&& f) const {
    for_each_compute_op(s, f);
    for_each_transfer(s, f);
  }

  template <class F>
  void for_each_compute_op(const state& s, F& f) const {
    auto input_of = [&](std::int32_t k) -> std::ptrdiff_t {
      if (s.held[a(k)]) return static_cast<std::ptrdiff_t>(a(k));
      if (k > 0 && s.held[t(k)]) return static_cast<std::ptrdiff_t>(t(k));
      return -1;
    };
    // A compute op reading `reads`, producing movable `out` (or gradient `grad`), allocating
    // `output` + `overhead`, dropping `drops` (and `dropped_grad` bytes of g_{k+1}).
    auto compute = [&](op o, std::vector<std::size_t> reads, std::ptrdiff_t out, std::int32_t grad,
                       size_type output, size_type overhead, std::vector<std::size_t> drops,
                       std::int32_t dropped_grad, double duration) {
      double start = s.compute_end;
      for (std::size_t r : reads) start = std::max(start, s.ready[r]);
      state n = s;
      advance(n, start);
      // (Compared before adding: with copies in flight beside recomputed ones the sum can pass
      // what validation bounds, 2^63 - 1; output + overhead alone is within it.)
      if (output + overhead > budget_ - n.memory) return;
      n.memory += output + overhead;
      if (out >= 0) {
        n.held[static_cast<std::size_t>(out)] = 1;
        n.ready[static_cast<std::size_t>(out)] = duration;
        n.last_read[static_cast<std::size_t>(out)] = duration;
      } else {
        n.g[static_cast<std::size_t>(grad)] = 1;
      }
      for (std::size_t r : reads) n.last_read[r] = std::max(n.last_read[r], duration);
      n.compute_end = duration;
      add_free(n, duration, overhead);
      if (dropped_grad >= 0) {
        n.g[static_cast<std::size_t>(dropped_grad)] = 0;
        add_free(n, duration, x(dropped_grad));
      }
      for (std::size_t d : drops) {
        n.held[d] = 0;
        n.ready[d] = 0;
        n.last_read[d] = 0;
        add_free(n, duration, size_of(d));
      }
      f(o, start, std::move(n));
    };
    for (std::int32_t k = 0; k < L_; ++k) {
      const stage& st = c_.stages[static_cast<std::size_t>(k)];
      const std::ptrdiff_t in = input_of(k);
      if (in >= 0) {
        const auto r = static_cast<std::size_t>(in);
        if (!s.held[a(k + 1)]) {
          compute(f_ck(k), {r}, static_cast<std::ptrdiff_t>(a(k + 1)), 0, x(k + 1),
                  st.forward_overhead, {}, -1, st.forward_time);
          std::vector<std::size_t> drops;
          if (s.held[a(k)]) drops.push_back(a(k));
          // Not while t_{k+1} is held, on the device or the host (its recording holds a_k),
          // unless asked (solvers/exhaustive.hpp, "What the search leaves out").
          if (!drops.empty() && (drop_recorded_ || (!s.held[t(k + 1)] && !s.host[t(k + 1)])))
            compute(f_none(k), {r}, static_cast<std::ptrdiff_t>(a(k + 1)), 0, x(k + 1),
                    st.forward_overhead, drops, -1, st.forward_time);
        }
        if (!s.held[t(k + 1)])
          compute(f_all(k), {r}, static_cast<std::ptrdiff_t>(t(k + 1)), 0, st.tape_size,
                  st.recording_overhead.value_or(st.forward_overhead), {}, -1, st.forward_time);
        if (s.g[static_cast<std::size_t>(k + 1)] && s.held[t(k + 1)] &&
            !s.g[static_cast<std::size_t>(k)]) {
          std::vector<std::size_t> drops{t(k + 1)};
          if (s.held[a(k)]) drops.push_back(a(k));
          compute(backward(k), {r, t(k + 1)}, -1, k, x(k), st.backward_overhead, drops, k + 1,
                  st.backward_time);
        }
      }
    }
    if (const std::ptrdiff_t in = input_of(L_); in >= 0 && !s.g[static_cast<std::size_t>(L_)]) {
      std::vector<std::size_t> drops;
      if (s.held[a(L_)]) drops.push_back(a(L_));
      compute(loss_op(L_), {static_cast<std::size_t>(in)}, -1, L_, x(L_), c_.loss_overhead, drops,
              -1, c_.loss_time);
    }
  }

  // O, P and W on every movable tensor they apply to.
  template <class F>
  void for_each_transfer(const state& s, F& f) const {
    for (std::size_t v = 0; v < n_; ++v) {
      const bool tape = v > static_cast<std::size_t>(L_);
      const std::int32_t k =
          tape ? static_cast<std::int32_t>(v) - L_ : static_cast<std::int32_t>(v);
      const tensor_kind kind = tape ? tensor_kind::tape : tensor_kind::activation;
      const size_type size = size_of(v);
      if (c_.transfer.offload_bandwidth > 0 && s.held[v] && !s.host[v]) {  // O
        const double start = std::max(s.d2h_end, s.ready[v]);
        const double duration = static_cast<double>(size) / c_.transfer.offload_bandwidth;
        state n = s;
        advance(n, start);
        n.held[v] = 0;
        n.host[v] = 1;
        n.d2h_end = duration;
        n.offload_end[v] = duration;
        add_free(n, std::max(duration, n.last_read[v]), size);
        n.ready[v] = 0;
        n.last_read[v] = 0;
        f(offload(k, kind), start, std::move(n));
      }
      if (c_.transfer.prefetch_bandwidth > 0 && s.host[v] && !s.held[v]) {  // P
        const double start = std::max(s.h2d_end, s.offload_end[v]);
        const double duration = static_cast<double>(size) / c_.transfer.prefetch_bandwidth;
        state n = s;
        advance(n, start);
        if (size <= budget_ - n.memory) {
          n.memory += size;
          n.held[v] = 1;
          n.host[v] = 0;
          n.offload_end[v] = 0;
          n.ready[v] = duration;
          n.last_read[v] = duration;
          n.h2d_end = duration;
          f(prefetch(k, kind), start, std::move(n));
        }
      }
      if (s.host[v]) {  // W, where it holds anything back
        const double start = std::max(s.compute_end, s.offload_end[v]);
        if (start > 0) {
          state n = s;
          advance(n, start);
          f(wait_for(k, kind), start, std::move(n));
        }
      }
    }
  }

  const chain& c_;
  size_type budget_;
  std::int32_t L_;
  std::size_t n_;  // movable tensors: a_0..a_L at 0..L, t_1..t_L at L+1..2L
  std::size_t max_states_;
  bool drop_recorded_;
};

}  // namespace remat::detail
