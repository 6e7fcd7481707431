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
#include <remat/op_table.hpp>
#include <remat/schedule.hpp>
#include <remat/walk.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace remat {

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
  /// Memory held right before the loss op, its transient excluded: what one micro-batch keeps
  /// from the end of its forward part to the start of its backward part (docs/pipelines.md).
  size_type retained = 0;
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

// When memory changes in a replay: its time, then its phase (0: a free of something allocated
// earlier; 1: in issue order, an op's allocations then the frees of an op of duration 0), the op,
// and allocation before free. Executors that keep the model's memory order use the same keys.
struct event_key {
  double time = 0;
  int phase = 0;
  std::size_t order = 0;
  int sub = 0;
  friend constexpr bool operator<(const event_key& a, const event_key& b) {
    if (a.time != b.time) return a.time < b.time;
    if (a.phase != b.phase) return a.phase < b.phase;
    if (a.order != b.order) return a.order < b.order;
    return a.sub < b.sub;
  }
  // An op's allocation at its start.
  static constexpr event_key allocation(double start, std::size_t op) { return {start, 1, op, 0}; }
  // A free at `at`, by op `op`, of what was allocated at `allocated_at` (`zero`: by an op of
  // duration 0, which frees right after its own allocation).
  static constexpr event_key release(double at, double allocated_at, std::size_t op, bool zero) {
    return zero || !(allocated_at < at) ? event_key{at, 1, op, 1} : event_key{at, 0, 0, 0};
  }
};

// The timing of the values of a replay (value ids of walk.hpp).
struct value_timing {
  double allocated_at = -1;  // its device copy's allocation (a_0: before every op)
  double ready = 0;          // its device copy can be read from then
  double offload_end = 0;    // a host copy: it exists from then
  double last_read = 0;      // the end of the last op that read its device copy
};

// The timeline of a replay by docs/offload.md: ops start in issue order on three streams
// (compute, d2h for O, h2d for P); memory is a sum of intervals [allocation, free) in time. At
// one instant, frees of what was allocated before it come first, then the ops starting there in
// issue order with their allocations; an op of duration 0 frees right after its own allocations.
// Without transfers every op starts when the one before it ends, which is docs/model.md's replay.
class timeline {
 public:
  struct event {
    event_key key;
    size_type delta;
  };

  constexpr timeline(const chain& c, std::size_t ops) : input_(c.input_size), held_(c.input_size) {
    values_.push_back({});
    events_.reserve(4 * ops);
    allocation_.reserve(ops);
  }

  // Times op `w` and records its memory events; returns its start and end.
  constexpr std::pair<double, double> add(const walked_op& w,
                                          const std::vector<walked_value>& values) {
    values_.resize(values.size());
    const op_rule& r = *w.rule;
    double& stream_end = r.stream == stream::d2h ? d2h_end_
                         : r.stream == stream::h2d ? h2d_end_ : compute_end_;
    double start = std::max(previous_start_, stream_end);
    for (const value_id v : w.reads)
      if (v != no_value)
        start = std::max(start, values[v].on_host ? values_[v].offload_end : values_[v].ready);
    const double end = start + w.time;
    stream_end = end;
    previous_start_ = start;
    const bool compute = r.stream == stream::compute && !is_transfer(w.o.kind);
    const bool zero = compute && !(start < end);

    size_type allocated = w.transient;
    if (w.made != no_value) {
      value_timing& m = values_[w.made];
      if (values[w.made].on_host) {
        m.offload_end = end;
      } else {
        m = {start, end, 0, end};
        allocated += values[w.made].bytes;
        held_ += values[w.made].bytes;
      }
    }
    allocation_.push_back(events_.size());
    events_.push_back({event_key::allocation(start, w.index), allocated});
    if (compute) events_.push_back({event_key::release(end, start, w.index, zero), -w.transient});
    for (const value_id v : w.reads)
      if (v != no_value && !values[v].on_host)
        values_[v].last_read = std::max(values_[v].last_read, end);
    for (const value_id v : w.frees) {
      if (v == no_value || values[v].on_host) continue;
      held_ -= values[v].bytes;
      const double at = r.frees_after_readers ? std::max(end, values_[v].last_read) : end;
      events_.push_back(
          {event_key::release(at, values_[v].allocated_at, w.index, zero), -values[v].bytes});
    }
    return {start, end};
  }

  [[nodiscard]] constexpr size_type held() const noexcept { return held_; }
  [[nodiscard]] constexpr const value_timing& timing(value_id v) const { return values_[v]; }

  // The memory over time: the peak, and each op's memory right after its allocations.
  constexpr size_type memory(std::vector<size_type>& op_peak) {
    auto before = [](const event& p, const event& q) { return p.key < q.key; };
    // Without transfers the events come in order already. Events with equal keys are frees
    // (allocations have keys of their own), so their order changes no figure.
    if (!std::is_sorted(events_.begin(), events_.end(), before))
      std::sort(events_.begin(), events_.end(), before);
    // Copies in flight beside recomputed ones can pass what validation bounds (2^63 - 1): the
    // running sum saturates there (such a peak fits no budget).
    constexpr size_type most = std::numeric_limits<size_type>::max();
    size_type memory = input_, peak = input_;
    std::vector<size_type> at_allocation(allocation_.size(), 0);
    for (const event& e : events_) {
      const size_type d = e.delta;
      memory = d > 0 && memory > most - d ? most : memory + d;
      peak = std::max(peak, memory);
      if (e.key.phase == 1 && e.key.sub == 0) at_allocation[e.key.order] = memory;
    }
    op_peak = std::move(at_allocation);
    return peak;
  }

 private:
  size_type input_;
  size_type held_;  // bytes held on the device, in issue order
  std::vector<value_timing> values_;
  std::vector<event> events_;
  std::vector<std::size_t> allocation_;  // per op: its allocation's event
  double previous_start_ = 0, compute_end_ = 0, d2h_end_ = 0, h2d_end_ = 0;
};

// Replays `ops` on a validated chain: the walk (walk.hpp) for what each op reads, makes and
// frees, and the timeline for when.
constexpr replay_result replay(const chain& c, std::span<const op> ops) {
  replay_result r;
  r.memory_after.reserve(ops.size());
  r.start.reserve(ops.size());
  r.end.reserve(ops.size());
  timeline t(c, ops.size());
  const walk_failure f =
      walk(c, ops, [&](const walked_op& w, const std::vector<walked_value>& values) {
        if (w.o.kind == op_kind::loss) r.retained = t.held();
        const auto [start, end] = t.add(w, values);
        r.start.push_back(start);
        r.end.push_back(end);
        r.makespan = std::max(r.makespan, end);
        r.memory_after.push_back(t.held());
      });
  r.error = f.error;
  r.tensor = f.tensor;
  if (f.error != replay_error::none) r.first_invalid = f.at;
  r.peak_memory = t.memory(r.op_peak);
  return r;
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
    case replay_error::bad_option:
      if (ops[r.first_invalid].kind != op_kind::forward_all)
        return where + ": only F_all names an option (it carries " +
               std::to_string(ops[r.first_invalid].option) + ")";
      return where + ": stage " + std::to_string(ops[r.first_invalid].stage) +
             " has no option " + std::to_string(ops[r.first_invalid].option);
  }
  return where;
}

}  // namespace remat
