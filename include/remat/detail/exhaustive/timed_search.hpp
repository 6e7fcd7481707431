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
//
// What each op does is the walk's (walk.hpp): every candidate op is stepped on a copy of the
// state's walker, so the search has every op of the table, options included, and adds only the
// timing.
#pragma once

#include <remat/chain.hpp>
#include <remat/op_table.hpp>
#include <remat/schedule.hpp>
#include <remat/solver_options.hpp>
#include <remat/walk.hpp>

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
        drop_recorded_(drop_recorded_inputs) {
    for (const stage& st : c.stages) {
      double fastest = std::numeric_limits<double>::infinity();
      for (std::size_t o = 0; o < option_count(st); ++o)
        fastest = std::min(fastest, option_at(st, o).backward_time);
      fastest_backward_.push_back(fastest);
      has_options_ = has_options_ || option_count(st) > 1;
    }
  }

  // The fastest sequence within the budget and its makespan; empty where none fits.
  std::pair<std::vector<op>, double> run() {
    state start{walker(c_),
                std::vector<double>(n_, 0),
                std::vector<double>(n_, 0),
                std::vector<double>(n_, 0),
                0,
                0,
                0,
                c_.input_size,
                {}};
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
    states.insert_or_assign(k0, start);
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
      const state s = states.at(k);
      if (s.w.done()) {
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
        const double bound = remaining(next);
        states.insert_or_assign(nk, std::move(next));
        queue.push({c + bound, false, nk, c});
      });
    }
    return {{}, 0};
  }

 private:
  // What is held (on the device, as host copies, as gradients; each tape's option) is the
  // walker's; the rest is the timing.
  struct state {
    walker w;
    std::vector<double> ready, offload_end, last_read;  // per movable tensor: offsets from T, >= 0
    double compute_end = 0, d2h_end = 0, h2d_end = 0;
    size_type memory = 0;
    std::vector<std::pair<double, size_type>> frees;  // (offset > 0, bytes), sorted
  };

  // A lower bound of the time from T to the end (A*'s heuristic): the compute stream is busy
  // until compute_end, then runs every backward (and the loss) not yet run, each at its fastest
  // option. It never overestimates, and it falls by at most the time T advances along an op, so
  // A* on T + remaining is exact.
  double remaining(const state& s) const {
    // The backward runs from L down: with g_j the lowest gradient held, the loss and B(j .. L-1)
    // have run, B(0 .. j-1) have not.
    std::int32_t lowest = L_ + 1;
    for (std::int32_t j = L_; j >= 0; --j)
      if (s.w.held({'g', j}) != no_value) lowest = j;
    double r = s.compute_end;
    if (lowest == L_ + 1) r += c_.loss_time;
    for (std::int32_t k = 0; k < std::min(lowest, L_); ++k)
      r += fastest_backward_[static_cast<std::size_t>(k)];
    return r;
  }

  // The movable tensor a value is (a_0..a_L at 0..L, t_1..t_L at L+1..2L); n_ for a gradient.
  std::size_t slot(const walked_value& v) const {
    if (v.kind == 'g') return n_;
    return static_cast<std::size_t>(v.kind == 't' ? L_ + v.index : v.index);
  }
  tensor_ref tensor(std::size_t v) const {
    const auto k = static_cast<std::int32_t>(v);
    return k > L_ ? tensor_ref{'t', k - L_} : tensor_ref{'a', k};
  }

  std::string key(const state& s) const {
    std::string k;
    auto put = [&](const void* p, std::size_t n) { k.append(static_cast<const char*>(p), n); };
    for (const bool host : {false, true})
      for (std::size_t v = 0; v < n_; ++v) k.push_back(s.w.held(tensor(v), host) != no_value);
    for (std::int32_t j = 0; j <= L_; ++j) k.push_back(s.w.held({'g', j}) != no_value);
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
    // Each held tape's option, where the chain has options.
    if (has_options_)
      for (const bool host : {false, true})
        for (std::size_t v = static_cast<std::size_t>(L_) + 1; v < n_; ++v)
          if (const value_id id = s.w.held(tensor(v), host); id != no_value)
            put(&s.w.values()[id].option, sizeof(std::uint16_t));
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

  // Calls f(op, advance of T, next state) for every op valid in `s` whose allocations fit: each
  // op is stepped on a copy of the state's walker, which says whether it runs and what it reads,
  // makes and frees (the op table's rows); this search adds when.
  template <class F>
  void for_each_op(const state& s, F&& f) const {
    for (std::int32_t k = 0; k < L_; ++k) {
      try_op(s, f_ck(k), f);
      // F_none where it drops a_k (else it is F_ck), and not while t_{k+1} is held, on the device
      // or the host (its recording holds a_k), unless asked (solvers/exhaustive.hpp, "What the
      // search leaves out").
      if (s.w.held({'a', k}) != no_value &&
          (drop_recorded_ ||
           (s.w.held({'t', k + 1}) == no_value && s.w.held({'t', k + 1}, true) == no_value)))
        try_op(s, f_none(k), f);
      const std::size_t options = option_count(c_.stages[static_cast<std::size_t>(k)]);
      for (std::size_t o = 0; o < options; ++o)
        try_op(s, f_all(k, static_cast<std::uint16_t>(o)), f);
      try_op(s, backward(k), f);
    }
    try_op(s, loss_op(L_), f);
    for (std::size_t v = 0; v < n_; ++v) {
      const tensor_ref t = tensor(v);
      const tensor_kind kind = t.kind == 't' ? tensor_kind::tape : tensor_kind::activation;
      if (c_.transfer.offload_bandwidth > 0) try_op(s, offload(t.index, kind), f);
      if (c_.transfer.prefetch_bandwidth > 0) try_op(s, prefetch(t.index, kind), f);
      try_op(s, wait_for(t.index, kind), f);
    }
  }

  // Steps `o` on a copy of `s` and times it: it starts once its stream is free and what it reads
  // is ready (a device copy made, a host copy's offload ended); it allocates what it makes on the
  // device and its transient at its start; it frees its transient and what it frees at its end, an
  // offload's device copy once the compute ops that read it have ended too.
  template <class F>
  void try_op(const state& s, const op& o, F& f) const {
    if (!s.w.peek(o).ok()) return;  // (refused without copying the walker)
    walker stepped = s.w;
    const walk_step step = stepped.step(o);
    state n{std::move(stepped), s.ready,   s.offload_end, s.last_read, s.compute_end,
            s.d2h_end,          s.h2d_end, s.memory,      s.frees};
    const walked_op& w = step.op;
    const op_rule& r = *w.rule;
    const auto& values = n.w.values();
    double& stream_end = r.stream == stream::d2h   ? n.d2h_end
                         : r.stream == stream::h2d ? n.h2d_end
                                                   : n.compute_end;
    double start = stream_end;
    for (const value_id id : w.reads) {
      if (id == no_value || slot(values[id]) == n_) continue;
      const std::size_t v = slot(values[id]);
      start = std::max(start, values[id].on_host ? s.offload_end[v] : s.ready[v]);
    }
    // An op that makes and frees nothing (a wait) is tried only where it holds the stream back.
    if (w.made == no_value && w.frees[0] == no_value && !(start > 0)) return;
    advance(n, start);
    const double duration = w.time;
    const bool made_on_device = w.made != no_value && !values[w.made].on_host;
    const size_type output = made_on_device ? values[w.made].bytes : 0;
    // (Compared before adding: with copies in flight beside recomputed ones the sum can pass
    // what validation bounds, 2^63 - 1; output + transient alone is within it.)
    if (output + w.transient > budget_ - n.memory) return;
    n.memory += output + w.transient;
    if (!r.transfer)
      for (const value_id id : w.reads)
        if (id != no_value && slot(values[id]) < n_ && !values[id].on_host)
          n.last_read[slot(values[id])] = std::max(n.last_read[slot(values[id])], duration);
    stream_end = duration;
    add_free(n, duration, w.transient);
    for (const value_id id : w.frees) {
      if (id == no_value) continue;
      const walked_value& v = values[id];
      const std::size_t at = slot(v);
      if (v.on_host) {
        n.offload_end[at] = 0;
        continue;
      }
      add_free(n, at < n_ && r.frees_after_readers ? std::max(duration, n.last_read[at]) : duration,
               v.bytes);
      if (at == n_) continue;
      n.ready[at] = 0;
      n.last_read[at] = 0;
    }
    if (w.made != no_value && slot(values[w.made]) < n_) {
      const std::size_t at = slot(values[w.made]);
      if (values[w.made].on_host) {
        n.offload_end[at] = duration;
      } else {
        n.ready[at] = duration;
        n.last_read[at] = duration;
      }
    }
    f(o, start, std::move(n));
  }

  const chain& c_;
  size_type budget_;
  std::int32_t L_;
  std::size_t n_;  // movable tensors: a_0..a_L at 0..L, t_1..t_L at L+1..2L
  std::size_t max_states_;
  bool drop_recorded_;
  bool has_options_ = false;
  std::vector<double> fastest_backward_;  // per stage: its fastest option's backward time
};

}  // namespace remat::detail
