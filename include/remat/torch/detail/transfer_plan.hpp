// The libtorch executor's plan of a schedule with transfers (docs/offload.md): the three-stream
// runner's program (every op's stream and waits), what each transfer moves, and the model's
// memory events at the predicted times, all read from the one walk over the schedule and its
// timeline (remat/simulate.hpp), so that the waits follow the simulator's order exactly.
//
// The rule (docs/libtorch.md, "Offloading", for the proof): an op that allocates (a compute op or
// a prefetch) waits for every op whose frees come, in the model's order at the predicted times,
// before its allocation; for an offload's free, that is the release of its device copy, once the
// offload and the compute ops before it that read the copy have ended.
#pragma once

#include <remat/chain.hpp>
#include <remat/detail/planning/streams.hpp>
#include <remat/op_table.hpp>
#include <remat/schedule.hpp>
#include <remat/simulate.hpp>
#include <remat/walk.hpp>

#include <algorithm>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace remat::torch::detail {

using remat::walked_op;
using remat::detail::event_key;
using remat::detail::stream_program;
using remat::detail::stream_wait;

struct transfer_plan {
  static constexpr std::size_t none = stream_program::none;
  stream_program program;                // what the runner runs: streams, waits, releases
  std::vector<walked_op> walked;         // per op: the values it reads, makes and frees
  std::size_t values = 0;                // how many values the walk numbered
  std::vector<size_type> moved_bytes;    // per O and P: the model's size of the tensor
  std::vector<std::size_t> moved_from;   // per O: the op that made its device copy (none: a_0)
  std::vector<char> records_moved_tape;  // per F_all: its tape is offloaded later
  bool offloads_input = false;           // an O moves a_0
  // The model's times and memory events: when each op allocates, when a compute op frees (its
  // end), when an offload's device copy is released.
  std::vector<double> start, end;
  std::vector<event_key> allocation, release;  // per op
  std::vector<char> has_event;                 // per O and P: allocates or frees bytes
};

// Memory waits: every allocating op waits for the frees the model puts before its allocation.
inline void add_memory_waits(const transfer_plan& p, std::span<const op> ops,
                             std::vector<std::vector<stream_wait>>& waits) {
  using until = stream_wait::until;
  constexpr std::size_t none = transfer_plan::none;
  const std::size_t n = ops.size();
  for (std::size_t j = 0; j < n; ++j) {
    const op_rule& r = rule(ops[j].kind);
    if (!r.allocates()) continue;  // an offload, a wait
    std::size_t last_compute = none;
    for (std::size_t i = 0; i < n; ++i) {
      if (i == j || !(p.release[i] < p.allocation[j])) continue;
      if (rule(ops[i].kind).frees_after_readers) {
        if (!p.has_event[i]) continue;
        if (i > j)
          throw std::logic_error("remat::torch::executor: op " + std::to_string(j) +
                                 " would wait for the free of op " + std::to_string(i));
        waits[j].push_back({i, until::released});
      } else if (!is_transfer(ops[i].kind)) {
        if (i > j)
          throw std::logic_error("remat::torch::executor: op " + std::to_string(j) +
                                 " would wait for the end of op " + std::to_string(i));
        last_compute = last_compute == none ? i : std::max(last_compute, i);
      }
    }
    // Compute ops run one at a time in order: a compute op has waited for those before it.
    if (r.stream != stream::compute && last_compute != none)
      waits[j].push_back({last_compute, until::memory});
  }
}

// The plan of a schedule as the walk goes: each op's stream, times and events, and by its kind
// the waits it needs and what it moves (`make_transfer_plan`).
class transfer_plan_builder {
 public:
  using value = remat::walked_value;
  using value_id = remat::value_id;
  using until = stream_wait::until;
  static constexpr std::size_t none = transfer_plan::none;
  static constexpr std::size_t before_all = value::before_all;

  transfer_plan_builder(const chain& c, std::span<const op> ops)
      : ops_(ops), waits_(ops.size()), t_(c, ops.size()) {
    const std::size_t n = ops.size();
    p_.moved_bytes.assign(n, 0);
    p_.moved_from.assign(n, none);
    p_.records_moved_tape.assign(n, 0);
    p_.has_event.assign(n, 0);
    p_.program.release_after.assign(n, none);
  }

  // The walk's visitor: one valid op, in order.
  void add(const walked_op& w, const std::vector<value>& values) {
    const std::size_t i = w.index;
    const auto [s, e] = t_.add(w, values);
    last_reader_.resize(values.size(), none);
    p_.walked.push_back(w);
    p_.values = values.size();
    p_.program.streams.push_back(w.rule->stream);
    p_.start.push_back(s);
    p_.end.push_back(e);
    p_.allocation.push_back(event_key::allocation(s, i));
    p_.release.push_back(event_key::release(e, s, i, !(s < e)));
    switch (w.o.kind) {
      case op_kind::offload: return add_offload(w, values, e);
      case op_kind::prefetch:
      case op_kind::wait: return add_host_read(w, values);
      default: return add_compute(w, values);
    }
  }

  // The plan, once every op is added: the memory waits, then every op's waits in one array.
  transfer_plan finish() && {
    const std::size_t n = ops_.size();
    add_memory_waits(p_, ops_, waits_);
    p_.program.waits_begin.assign(n + 1, 0);
    for (std::size_t i = 0; i < n; ++i) {
      p_.program.waits_begin[i + 1] = p_.program.waits_begin[i] + waits_[i].size();
      p_.program.waits.insert(p_.program.waits.end(), waits_[i].begin(), waits_[i].end());
    }
    return std::move(p_);
  }

 private:
  // An offload waits for the op that made its device copy, moves it, and releases it once the
  // last compute op reading it has ended (`e`: the offload's own end).
  void add_offload(const walked_op& w, const std::vector<value>& values, double e) {
    const std::size_t i = w.index;
    const value_id device = w.read(operand::device_copy);
    const std::size_t producer = values[device].made_by;
    if (producer != before_all) {
      p_.moved_from[i] = producer;
      waits_[i].push_back({producer, until::data});
      if (values[device].kind == 't' && ops_[producer].kind == op_kind::forward_all)
        p_.records_moved_tape[producer] = 1;
    }
    p_.offloads_input = p_.offloads_input || device == 0;
    p_.program.release_after[i] = last_reader_[device];
    p_.moved_bytes[i] = w.input_bytes;
    p_.has_event[i] = w.input_bytes > 0;
    const remat::detail::value_timing& d = t_.timing(device);
    p_.release[i] = event_key::release(std::max(e, d.last_read), d.allocated_at, i, false);
  }

  // A prefetch or a wait reads the host copy: it waits for the offload that made it to be
  // released; a prefetch moves it back.
  void add_host_read(const walked_op& w, const std::vector<value>& values) {
    const std::size_t i = w.index;
    waits_[i].push_back({values[w.read(operand::host_copy)].made_by, until::released});
    if (w.o.kind == op_kind::prefetch) {
      p_.moved_bytes[i] = w.input_bytes;
      p_.has_event[i] = w.input_bytes > 0;
    }
  }

  // A compute op: what a prefetch brought back, it reads once there.
  void add_compute(const walked_op& w, const std::vector<value>& values) {
    const std::size_t i = w.index;
    for (const value_id v : w.reads) {
      if (v == remat::no_value) continue;
      const std::size_t producer = values[v].made_by;
      if (producer != before_all && ops_[producer].kind == op_kind::prefetch)
        waits_[i].push_back({producer, until::data});
      last_reader_[v] = i;
    }
    if (w.made != remat::no_value) last_reader_[w.made] = i;
  }

  std::span<const op> ops_;
  transfer_plan p_;
  std::vector<std::vector<stream_wait>> waits_;
  std::vector<std::size_t> last_reader_;  // per value: the last compute op reading it
  remat::detail::timeline t_;
};

// The plan of `ops` on `c` (which has a link if `ops` has transfers); `std::invalid_argument`
// for an invalid schedule.
inline transfer_plan make_transfer_plan(const chain& c, std::span<const op> ops) {
  transfer_plan_builder b(c, ops);
  const remat::walk_failure f =
      remat::walk(c, ops, [&](const walked_op& w, const std::vector<remat::walked_value>& values) {
        b.add(w, values);
      });
  if (f.error != replay_error::none) {
    replay_result bad;
    bad.error = f.error;
    bad.first_invalid = f.at;
    bad.tensor = f.tensor;
    throw std::invalid_argument("remat::torch::executor: the schedule is invalid: " +
                                describe(bad, ops));
  }
  return std::move(b).finish();
}

}  // namespace remat::torch::detail
