// The simulator: replays any op sequence on a chain exactly by docs/model.md's op table, with
// F_all's peak held + recording_overhead (docs/recording-overhead.md; forward_overhead where none
// is given), and the transfer ops by docs/offload.md: three streams with one issue order, memory
// as a sum of intervals [allocation, free) in time, bytes in flight counted.
//
// It is the judge of every solver: a schedule is valid when every op finds its inputs held and
// its output not yet held, the sequence ends exactly when g_0 is produced, and it fits a budget
// when memory never exceeds it. A schedule without transfer ops replays as docs/model.md says
// (every op starts when the one before it ends, peaks per op), which is what the timed rules
// give for it too.
#pragma once

#include <remat/chain.hpp>
#include <remat/schedule.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace remat {

/// Why an op cannot run.
enum class replay_error : std::uint8_t {
  none,                 ///< the schedule is valid
  bad_kind,             ///< the op's kind (or a transfer's tensor) is none of the model's
  bad_stage,            ///< the op's stage index is outside 0..L-1 (or, for loss, is not L)
  input_missing,        ///< a forward or the loss finds neither a_k nor t_k held
  output_already_held,  ///< the op's output is already held
  gradient_missing,     ///< B(k) finds no g_{k+1}
  tape_missing,         ///< B(k) finds no t_{k+1}
  after_end,            ///< an op after g_0 was produced
  incomplete,           ///< the sequence ends before g_0 is produced
  no_bandwidth,         ///< a transfer in a direction the chain's `transfer` does not offer
  not_on_device,        ///< O(k) on a tensor not held on the device
  already_on_host,      ///< O(k) on a tensor that already has a host copy
  no_host_copy,         ///< P(k) or W(k) on a tensor without a host copy
};

/// A tensor of the model: `a_k` (activation), `t_k` (tape) or `g_k` (gradient).
struct tensor_ref {
  char kind = 'a';
  std::int32_t index = 0;
  friend constexpr bool operator==(const tensor_ref&, const tensor_ref&) = default;
};

/// What replaying a sequence found. For an invalid sequence, the figures cover the ops before the
/// first invalid one.
struct replay_result {
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

  replay_error error = replay_error::none;
  std::size_t first_invalid = npos;  ///< index of the first invalid op (ops.size() if incomplete)
  tensor_ref tensor{};               ///< the tensor missing or already held, where one is
  double makespan = 0;               ///< the end of the last op (without transfers: the sum of
                                     ///< the ops' times)
  size_type peak_memory = 0;         ///< largest memory at any moment, the input a_0 included
  /// Bytes of the tensors held on the device after each op, in issue order (a tensor being
  /// offloaded is not held; its bytes still count in `op_peak` and `peak_memory` until freed).
  std::vector<size_type> memory_after;
  /// Memory right after each op's allocations at its start (with its overhead): the op's peak.
  std::vector<size_type> op_peak;
  std::vector<double> start;  ///< when each op starts (docs/offload.md's timing)
  std::vector<double> end;    ///< when each op ends

  [[nodiscard]] constexpr bool valid() const noexcept { return error == replay_error::none; }
  [[nodiscard]] constexpr bool fits(size_type budget) const noexcept {
    return valid() && peak_memory <= budget;
  }
};

namespace detail {

// Replays a sequence without transfer ops on a validated chain (docs/model.md). Sizes are used as
// given.
constexpr replay_result replay_compute(const chain& c, std::span<const op> ops) {
  const auto L = static_cast<std::int32_t>(c.length());
  const auto n = static_cast<std::size_t>(L) + 1;
  auto x = [&](std::int32_t k) {
    return k == 0 ? c.input_size : c.stages[static_cast<std::size_t>(k - 1)].output_size;
  };
  auto xb = [&](std::int32_t k) { return c.stages[static_cast<std::size_t>(k - 1)].tape_size; };
  std::vector<char> a(n, 0), t(n, 0), g(n, 0);  // held? a_k, t_k (k >= 1), g_k
  a[0] = 1;
  size_type held = c.input_size;

  replay_result r;
  r.peak_memory = held;
  r.memory_after.reserve(ops.size());
  r.op_peak.reserve(ops.size());
  r.start.reserve(ops.size());
  r.end.reserve(ops.size());
  auto fail = [&](std::size_t i, replay_error e, tensor_ref tr) {
    r.error = e;
    r.first_invalid = i;
    r.tensor = tr;
    return r;
  };
  auto idx = [](std::int32_t k) { return static_cast<std::size_t>(k); };

  for (std::size_t i = 0; i < ops.size(); ++i) {
    const op o = ops[i];
    if (g[0]) return fail(i, replay_error::after_end, {'g', 0});
    double time = 0;
    size_type peak = 0;
    if (o.kind > op_kind::backward) return fail(i, replay_error::bad_kind, {'a', o.stage});
    if (o.kind == op_kind::loss) {
      if (o.stage != L) return fail(i, replay_error::bad_stage, {'a', o.stage});
      if (!a[idx(L)] && !t[idx(L)]) return fail(i, replay_error::input_missing, {'a', L});
      if (g[idx(L)]) return fail(i, replay_error::output_already_held, {'g', L});
      g[idx(L)] = 1;
      held += x(L);
      peak = held + c.loss_overhead;
      if (a[idx(L)]) {
        a[idx(L)] = 0;
        held -= x(L);
      }
      time = c.loss_time;
    } else {
      const std::int32_t k = o.stage;
      if (k < 0 || k >= L) return fail(i, replay_error::bad_stage, {'a', k});
      const stage& s = c.stages[idx(k)];
      if (o.kind == op_kind::backward) {
        if (!g[idx(k + 1)]) return fail(i, replay_error::gradient_missing, {'g', k + 1});
        if (!t[idx(k + 1)]) return fail(i, replay_error::tape_missing, {'t', k + 1});
        if (!a[idx(k)] && !(k > 0 && t[idx(k)]))
          return fail(i, replay_error::input_missing, {'a', k});
        if (g[idx(k)]) return fail(i, replay_error::output_already_held, {'g', k});
        g[idx(k)] = 1;
        held += x(k);
        peak = held + s.backward_overhead;
        g[idx(k + 1)] = 0;
        t[idx(k + 1)] = 0;
        held -= x(k + 1) + xb(k + 1);
        if (a[idx(k)]) {
          a[idx(k)] = 0;
          held -= x(k);
        }
        time = s.backward_time;
      } else {
        if (!a[idx(k)] && !(k > 0 && t[idx(k)]))
          return fail(i, replay_error::input_missing, {'a', k});
        if (o.kind == op_kind::forward_all) {
          if (t[idx(k + 1)]) return fail(i, replay_error::output_already_held, {'t', k + 1});
          t[idx(k + 1)] = 1;
          held += xb(k + 1);
        } else {
          if (a[idx(k + 1)]) return fail(i, replay_error::output_already_held, {'a', k + 1});
          a[idx(k + 1)] = 1;
          held += x(k + 1);
        }
        peak = held + (o.kind == op_kind::forward_all
                           ? s.recording_overhead.value_or(s.forward_overhead)
                           : s.forward_overhead);
        if (o.kind == op_kind::forward_none && a[idx(k)]) {
          a[idx(k)] = 0;
          held -= x(k);
        }
        time = s.forward_time;
      }
    }
    r.start.push_back(r.makespan);
    r.makespan += time;
    r.end.push_back(r.makespan);
    r.peak_memory = std::max(r.peak_memory, peak);
    r.op_peak.push_back(peak);
    r.memory_after.push_back(held);
  }
  if (!g[0]) return fail(ops.size(), replay_error::incomplete, {'g', 0});
  return r;
}

// A change of memory in a timed replay: its time, then its phase (0: a free of something
// allocated earlier; 1: in issue order, an op's allocations then the frees of an op of duration
// 0), the op, and allocation before free.
struct timed_event {
  double time;
  int phase;
  std::size_t order;
  int sub;
  size_type delta;
  friend constexpr bool operator<(const timed_event& a, const timed_event& b) {
    if (a.time != b.time) return a.time < b.time;
    if (a.phase != b.phase) return a.phase < b.phase;
    if (a.order != b.order) return a.order < b.order;
    return a.sub < b.sub;
  }
};

// Replays any sequence, transfers included, by docs/offload.md: ops start in issue order on three
// streams (compute, d2h for O, h2d for P), and memory is a sum of intervals [allocation, free) in
// time. At one instant, frees of what was allocated before it come first, then the ops starting
// there in issue order with their allocations; an op of duration 0 frees right after its own
// allocations.
constexpr replay_result replay_timed(const chain& c, std::span<const op> ops) {
  const auto L = static_cast<std::int32_t>(c.length());
  const auto n = static_cast<std::size_t>(L) + 1;
  auto idx = [](std::int32_t k) { return static_cast<std::size_t>(k); };
  auto x = [&](std::int32_t k) {
    return k == 0 ? c.input_size : c.stages[idx(k - 1)].output_size;
  };
  auto xb = [&](std::int32_t k) { return c.stages[idx(k - 1)].tape_size; };

  // A movable tensor (a_k at [k], t_k at [n + k]): on the device (held), with a host copy.
  struct copy {
    bool held = false;
    bool host = false;
    double ready = 0;          // its device copy can be read from then
    double offload_end = 0;    // its host copy exists from then
    double last_read = 0;      // the end of the last compute op that read its device copy
    std::size_t interval = 0;  // its device copy's memory interval
  };
  // A memory interval; `order` is the allocating op (-1 for a_0).
  struct interval {
    double at;
    std::size_t order;
    size_type bytes;
  };
  constexpr std::size_t before_all = static_cast<std::size_t>(-1);

  std::vector<copy> tensors(2 * n);
  std::vector<char> g(n, 0);
  std::vector<interval> intervals;
  std::vector<timed_event> events;
  std::vector<std::size_t> allocation_event(ops.size(), 0);  // per op: its allocation's event
  auto a_of = [&](std::int32_t k) -> copy& { return tensors[idx(k)]; };
  auto t_of = [&](std::int32_t k) -> copy& { return tensors[n + idx(k)]; };

  replay_result r;
  r.memory_after.reserve(ops.size());
  r.start.reserve(ops.size());
  r.end.reserve(ops.size());
  size_type held = c.input_size;  // bytes held on the device, in issue order
  intervals.push_back({-1, before_all, c.input_size});
  a_of(0).held = true;
  a_of(0).interval = 0;

  double previous_start = 0, compute_end = 0, d2h_end = 0, h2d_end = 0;
  auto open = [&](double at, std::size_t i, size_type bytes) {
    intervals.push_back({at, i, bytes});
    return intervals.size() - 1;
  };
  // Frees interval `v` at `at`, by op `i` (zero: an op of duration 0 freeing its own).
  auto close = [&](std::size_t v, double at, std::size_t i, bool zero) {
    const interval& iv = intervals[v];
    if (zero || !(iv.at < at))
      events.push_back({at, 1, i, 1, -iv.bytes});
    else
      events.push_back({at, 0, 0, 0, -iv.bytes});
  };
  auto fail = [&](std::size_t i, replay_error e, tensor_ref tr) {
    r.error = e;
    r.first_invalid = i;
    r.tensor = tr;
  };

  std::size_t i = 0;
  for (; i < ops.size(); ++i) {
    const op o = ops[i];
    if (g[0]) {
      fail(i, replay_error::after_end, {'g', 0});
      break;
    }
    if (o.kind > op_kind::wait || o.tensor > tensor_kind::tape) {
      fail(i, replay_error::bad_kind, {'a', o.stage});
      break;
    }
    double start = 0, duration = 0;
    size_type allocated = 0;
    if (is_transfer(o.kind)) {
      const bool tape = o.tensor == tensor_kind::tape;
      const std::int32_t k = o.stage;
      const tensor_ref tr{tape ? 't' : 'a', k};
      if (k < (tape ? 1 : 0) || k > L) {
        fail(i, replay_error::bad_stage, tr);
        break;
      }
      copy& cp = tape ? t_of(k) : a_of(k);
      const size_type size = tape ? xb(k) : x(k);
      // What the op needs (docs/offload.md's table), in the order the errors are reported.
      const replay_error why =
          o.kind == op_kind::offload
              ? (!(c.transfer.offload_bandwidth > 0) ? replay_error::no_bandwidth
                 : !cp.held                          ? replay_error::not_on_device
                 : cp.host                           ? replay_error::already_on_host
                                                     : replay_error::none)
          : o.kind == op_kind::prefetch
              ? (!(c.transfer.prefetch_bandwidth > 0) ? replay_error::no_bandwidth
                 : !cp.host                            ? replay_error::no_host_copy
                 : cp.held                             ? replay_error::output_already_held
                                                       : replay_error::none)
              : (!cp.host ? replay_error::no_host_copy : replay_error::none);
      if (why != replay_error::none) {
        fail(i, why, tr);
        break;
      }
      if (o.kind == op_kind::offload) {
        start = std::max({previous_start, d2h_end, cp.ready});
        duration = static_cast<double>(size) / c.transfer.offload_bandwidth;
        d2h_end = start + duration;
        cp.held = false;
        cp.host = true;
        cp.offload_end = d2h_end;
        held -= size;
        close(cp.interval, std::max(d2h_end, cp.last_read), i, false);
      } else if (o.kind == op_kind::prefetch) {
        start = std::max({previous_start, h2d_end, cp.offload_end});
        duration = static_cast<double>(size) / c.transfer.prefetch_bandwidth;
        h2d_end = start + duration;
        cp.held = true;
        cp.host = false;
        cp.ready = h2d_end;
        cp.last_read = h2d_end;
        cp.interval = open(start, i, size);
        allocated = size;
        held += size;
      } else {  // wait
        start = std::max({previous_start, compute_end, cp.offload_end});
        compute_end = start;
      }
    } else {
      // A compute op: its inputs (the device copies it reads), outputs and drops.
      std::vector<copy*> reads;
      std::vector<copy*> drops;  // device copies freed at its end
      size_type overhead = 0, output = 0, dropped = 0;
      copy* produced = nullptr;
      auto input_of = [&](std::int32_t k) -> copy* {
        if (a_of(k).held) return &a_of(k);
        if (k > 0 && t_of(k).held) return &t_of(k);
        return nullptr;
      };
      replay_error error = replay_error::none;
      tensor_ref tr{};
      if (o.kind == op_kind::loss) {
        if (o.stage != L) {
          error = replay_error::bad_stage;
          tr = {'a', o.stage};
        } else if (copy* in = input_of(L); in == nullptr) {
          error = replay_error::input_missing;
          tr = {'a', L};
        } else if (g[idx(L)]) {
          error = replay_error::output_already_held;
          tr = {'g', L};
        } else {
          reads.push_back(in);
          if (a_of(L).held) drops.push_back(&a_of(L));
          output = x(L);
          overhead = c.loss_overhead;
          duration = c.loss_time;
        }
      } else if (const std::int32_t k = o.stage; k < 0 || k >= L) {
        error = replay_error::bad_stage;
        tr = {'a', k};
      } else {
        const stage& s = c.stages[idx(k)];
        copy* in = input_of(k);
        if (o.kind == op_kind::backward) {
          if (!g[idx(k + 1)]) {
            error = replay_error::gradient_missing;
            tr = {'g', k + 1};
          } else if (!t_of(k + 1).held) {
            error = replay_error::tape_missing;
            tr = {'t', k + 1};
          } else if (in == nullptr) {
            error = replay_error::input_missing;
            tr = {'a', k};
          } else if (g[idx(k)]) {
            error = replay_error::output_already_held;
            tr = {'g', k};
          } else {
            reads = {in, &t_of(k + 1)};
            drops.push_back(&t_of(k + 1));
            if (a_of(k).held) drops.push_back(&a_of(k));
            output = x(k);
            dropped = x(k + 1);  // g_{k+1}
            overhead = s.backward_overhead;
            duration = s.backward_time;
          }
        } else if (in == nullptr) {
          error = replay_error::input_missing;
          tr = {'a', k};
        } else {
          const bool all = o.kind == op_kind::forward_all;
          copy& out = all ? t_of(k + 1) : a_of(k + 1);
          if (out.held) {
            error = replay_error::output_already_held;
            tr = {all ? 't' : 'a', k + 1};
          } else {
            reads.push_back(in);
            produced = &out;
            output = all ? xb(k + 1) : x(k + 1);
            overhead = all ? s.recording_overhead.value_or(s.forward_overhead) : s.forward_overhead;
            if (o.kind == op_kind::forward_none && a_of(k).held) drops.push_back(&a_of(k));
            duration = s.forward_time;
          }
        }
      }
      if (error != replay_error::none) {
        fail(i, error, tr);
        break;
      }
      start = std::max(previous_start, compute_end);
      for (const copy* in : reads) start = std::max(start, in->ready);
      const double finish = start + duration;
      compute_end = finish;
      const bool zero = !(start < finish);
      // Allocations at the start: the output (and, for B, g_k) and the transient.
      allocated = output + overhead;
      held += output;
      if (produced != nullptr) {
        produced->held = true;
        produced->ready = finish;
        produced->last_read = finish;
        produced->interval = open(start, i, output);
      } else if (o.kind == op_kind::loss) {
        g[idx(L)] = 1;
      } else {
        g[idx(o.stage)] = 1;
      }
      for (copy* in : reads) in->last_read = std::max(in->last_read, finish);
      // Frees at the end: the transient, the drops (and, for B, g_{k+1}).
      if (zero)
        events.push_back({finish, 1, i, 1, -overhead});
      else
        events.push_back({finish, 0, 0, 0, -overhead});
      if (o.kind == op_kind::backward) {
        g[idx(o.stage + 1)] = 0;
        // g_{k+1} was allocated before this op started: an earlier op made it.
        events.push_back(zero ? timed_event{finish, 1, i, 1, -dropped}
                                : timed_event{finish, 0, 0, 0, -dropped});
        held -= dropped;
      }
      for (copy* d : drops) {
        d->held = false;
        held -= intervals[d->interval].bytes;
        close(d->interval, finish, i, zero);
      }
    }
    previous_start = start;
    allocation_event[i] = events.size();
    events.push_back({start, 1, i, 0, allocated});
    r.start.push_back(start);
    r.end.push_back(start + duration);
    r.makespan = std::max(r.makespan, start + duration);
    r.memory_after.push_back(held);
  }
  if (r.valid() && !g[0]) fail(ops.size(), replay_error::incomplete, {'g', 0});

  // The memory over time: sort the events, and read each op's allocation off.
  std::vector<std::size_t> order(events.size());
  for (std::size_t e = 0; e < order.size(); ++e) order[e] = e;
  std::sort(order.begin(), order.end(),
            [&](std::size_t p, std::size_t q) { return events[p] < events[q]; });
  std::vector<size_type> at_event(events.size(), 0);
  size_type memory = c.input_size;
  r.peak_memory = memory;
  // Copies in flight beside recomputed ones can pass what validation bounds (2^63 - 1): the
  // running sum saturates there (such a peak fits no budget).
  constexpr size_type most = std::numeric_limits<size_type>::max();
  for (const std::size_t e : order) {
    const size_type d = events[e].delta;
    memory = d > 0 && memory > most - d ? most : memory + d;
    at_event[e] = memory;
    r.peak_memory = std::max(r.peak_memory, memory);
  }
  r.op_peak.reserve(i);
  for (std::size_t k = 0; k < i; ++k) r.op_peak.push_back(at_event[allocation_event[k]]);
  return r;
}

// Replays `ops` on a validated chain: by docs/model.md where no op is a transfer, else by
// docs/offload.md's timed rules (which agree with docs/model.md's on such sequences).
constexpr replay_result replay(const chain& c, std::span<const op> ops) {
  for (const op& o : ops)
    if (o.kind > op_kind::backward) return replay_timed(c, ops);
  return replay_compute(c, ops);
}

}  // namespace detail

/// Replays `ops` on `c` (any `chain_like`; its values are validated first, see `to_chain`).
template <chain_like C>
constexpr replay_result simulate(const C& c, std::span<const op> ops) {
  if constexpr (std::same_as<C, chain>) {
    validate(c);
    return detail::replay(c, ops);
  } else {
    return detail::replay(to_chain(c), ops);
  }
}

template <chain_like C>
constexpr replay_result simulate(const C& c, const schedule& s) {
  return simulate(c, std::span<const op>(s.ops));
}

/// One line saying why a replay failed, e.g. `op 5 (B(2)): needs t_3, which is not held`;
/// `valid` for a valid one.
inline std::string describe(const replay_result& r, std::span<const op> ops) {
  const auto tensor = std::string(1, r.tensor.kind) + "_" + std::to_string(r.tensor.index);
  std::string where = "op " + std::to_string(r.first_invalid);
  if (r.first_invalid < ops.size()) where += " (" + to_string(ops[r.first_invalid]) + ")";
  switch (r.error) {
    case replay_error::none: return "valid";
    case replay_error::bad_kind:
      return "op " + std::to_string(r.first_invalid) + ": its kind (" +
             std::to_string(static_cast<int>(ops[r.first_invalid].kind)) + ") is not an operation";
    case replay_error::bad_stage:
      if (ops[r.first_invalid].kind == op_kind::loss)
        return where + ": the loss carries stage " + std::to_string(r.tensor.index) +
               ", not the chain length";
      return where + ": stage " + std::to_string(r.tensor.index) + " is outside the chain";
    case replay_error::input_missing:
      return where + ": needs " + tensor + (r.tensor.index > 0 ? " (or its tape)" : "") +
             ", which is not held";
    case replay_error::output_already_held:
      return where + ": its output " + tensor + " is already held";
    case replay_error::gradient_missing:
    case replay_error::tape_missing: return where + ": needs " + tensor + ", which is not held";
    case replay_error::after_end: return where + ": g_0 was already produced";
    case replay_error::incomplete:
      return "the schedule ends after " + std::to_string(ops.size()) + " ops without producing g_0";
    case replay_error::no_bandwidth:
      return where + ": the chain's transfer has no " +
             (ops[r.first_invalid].kind == op_kind::prefetch ? "prefetch" : "offload") +
             "_bandwidth (0 or absent)";
    case replay_error::not_on_device:
      return where + ": " + tensor + " is not held on the device";
    case replay_error::already_on_host:
      return where + ": " + tensor + " already has a host copy";
    case replay_error::no_host_copy: return where + ": " + tensor + " has no host copy";
  }
  return where;
}

}  // namespace remat
