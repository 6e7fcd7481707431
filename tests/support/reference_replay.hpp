// A replay of compute-only sequences written independently of the library's op table and walk.
#pragma once

#include <remat/chain.hpp>
#include <remat/schedule.hpp>
#include <remat/simulate.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace remat::testing {

// docs/model.md's replay of a sequence without transfer ops, written out op by op: the oracle
// that remat::simulate (one walk over the op table, timed by docs/offload.md's rules) is compared
// with on such sequences.
inline replay_result reference_replay(const chain& c, std::span<const op> ops) {
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

}  // namespace remat::testing
