// Proofs about memory plans (memory_plan.hpp): that a plan is sound whatever the timing
// (`check_memory_plan`), and what a run of it did to memory on the times it measured
// (`check_run`).
//
//   remat::memory_plan m = remat::make_memory_plan(chain, schedule);
//   remat::check_memory_plan(m).ok();           // no two live buffers can share a byte
//   remat::check_run(m, start, end).live_peak;  // the most device bytes live in a run
#pragma once

#include <remat/memory_plan.hpp>
#include <remat/op_table.hpp>
#include <remat/schedule.hpp>

#include <algorithm>
#include <cstddef>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace remat {

namespace detail {

// Whether op `j` starts after op `i` has ended, by stream order or a listed wait (`waits` sorted
// by `after` then `before`).
constexpr bool ends_before(const memory_plan& m, std::size_t i, std::size_t j) {
  if (i >= j) return false;
  if (stream_of(m.steps[i].op.kind) == stream_of(m.steps[j].op.kind)) return true;
  const wait w{i, j, wait_reason::data};
  const auto it = std::lower_bound(
      m.waits.begin(), m.waits.end(), w, [](const wait& p, const wait& q) {
        return p.after != q.after ? p.after < q.after : p.before < q.before;
      });
  return it != m.waits.end() && it->after == j && it->before == i;
}

// Whether buffer `b` is freed before buffer `c` is allocated, whatever the timing.
constexpr bool freed_before(const memory_plan& m, const buffer& b, const buffer& c,
                            bool c_is_input) {
  if (c_is_input) return false;  // a_0 exists before every op
  return ends_before(m, b.last_op, c.first_op) &&
         (b.last_read == b.last_op || ends_before(m, b.last_read, c.first_op));
}

// Checks that every step refers to buffers that exist and are live at that step, in the right
// pool, with the kinds and sizes its op needs, and that every read of what another stream made
// waits for it. "" when it does.
constexpr std::string check_steps(const memory_plan& m) {
  const std::size_t nb = m.buffers.size();
  auto live = [&](buffer_id id, std::size_t i) {
    return id < nb && m.buffers[id].first_op <= i && i <= m.buffers[id].last_op;
  };
  auto on_device = [&](buffer_id id, std::size_t i) { return live(id, i) && !m.buffers[id].on_host; };
  auto on_host = [&](buffer_id id, std::size_t i) { return live(id, i) && m.buffers[id].on_host; };
  for (std::size_t i = 0; i < m.steps.size(); ++i) {
    const step& s = m.steps[i];
    auto where = [&] { return "step " + std::to_string(i) + " (" + to_string(s.op) + ")"; };
    // What it reads must be ready: made before it on its stream, or waited for.
    for (const buffer_id id : {s.input, s.tape, s.gradient})
      if (id != no_buffer && id < nb && id != memory_plan::input() &&
          !ends_before(m, m.buffers[id].first_op, i))
        return where() + ": it reads " + to_string(m.buffers[id], id) +
               " without waiting for the op that makes it";
    if (is_transfer(s.op.kind)) {
      // What the op's row reads, and makes, as a device buffer or a host copy.
      const op_rule& r = rule(s.op.kind);
      const auto in_pool = [&](operand which, buffer_id id) {
        return which == operand::host_copy ? on_host(id, i) : on_device(id, i);
      };
      const auto pool = [](operand which) {
        return std::string(which == operand::host_copy ? "host copy" : "device buffer");
      };
      if (!in_pool(r.reads[0], s.input) ||
          (r.makes != operand::none && m.buffers[s.input].size < s.input_size))
        return where() + ": what it reads is not a live " + pool(r.reads[0]) +
               (r.makes != operand::none ? " of input_size bytes" : "");
      if (r.makes != operand::none &&
          (!in_pool(r.makes, s.output) || m.buffers[s.output].first_op != i ||
           m.buffers[s.output].size < s.input_size))
        return where() + ": its output is not a " + pool(r.makes) +
               " of input_size bytes it creates";
      continue;
    }
    if (!on_device(s.input, i) || m.buffers[s.input].size < s.input_size)
      return where() + ": its input is not a live device buffer of at least input_size bytes";
    if (!on_device(s.output, i) || m.buffers[s.output].first_op != i)
      return where() + ": its output is not a device buffer it creates";
    if (!on_device(s.workspace, i) || m.buffers[s.workspace].kind != buffer_kind::workspace)
      return where() + ": its workspace is not a live workspace buffer";
    const op_rule& r = rule(s.op.kind);
    const auto reads = [&r](operand which) {
      return std::find(r.reads.begin(), r.reads.end(), which) != r.reads.end();
    };
    if (reads(operand::tape_above) &&
        (!on_device(s.tape, i) || m.buffers[s.tape].kind != buffer_kind::tape ||
         m.buffers[s.tape].size < s.output_size))
      return where() + ": its tape is not a live tape of at least output_size bytes";
    if (reads(operand::gradient_above) &&
        (!on_device(s.gradient, i) || m.buffers[s.gradient].kind != buffer_kind::gradient))
      return where() + ": its incoming gradient is not a live gradient buffer";
    if ((r.makes == operand::activation_above || r.makes == operand::tape_above) &&
        m.buffers[s.output].size < s.output_size)
      return where() + ": its output is smaller than output_size";
  }
  return {};
}

}  // namespace detail

/// What `check_memory_plan` found: `ok()`, or the first problem in words.
struct memory_plan_check {
  std::string problem;  ///< empty when the plan is sound
  [[nodiscard]] constexpr bool ok() const noexcept { return problem.empty(); }
};

namespace detail {
struct check_memory_plan_fn {
  /// Proves a plan sound, independently of how it was built: the alignment is a power of two,
  /// every buffer is aligned and inside its pool, every step uses live buffers of the right kind,
  /// pool and size and waits for what it reads, and any two buffers that share a byte are one
  /// freed before the other is allocated: the ops that free the first end before the op that
  /// creates the second starts, by stream order or a listed wait, whatever the timing. Sorting by
  /// offset makes the check O(n log n) plus the pairs that overlap in space.
  constexpr memory_plan_check operator()(const memory_plan& m) const {
    if (!is_power_of_two(m.alignment))
      return {"the alignment " + std::to_string(m.alignment) + " is not a power of two"};
    const std::size_t n_ops = m.steps.size();
    for (std::size_t i = 0; i < m.buffers.size(); ++i) {
      const buffer& b = m.buffers[i];
      const size_type pool = b.on_host ? m.host_bytes : m.arena_bytes;
      if (b.size < 0 || b.offset < 0 || b.offset % m.alignment != 0 || b.offset > pool - b.size)
        return {to_string(b, i) + " is misaligned or outside the " +
                (b.on_host ? "host pool" : "arena") + " of " + std::to_string(pool) + " bytes"};
      if (b.first_op > b.last_op || b.last_read > b.last_op ||
          (n_ops > 0 && b.last_op >= n_ops))
        return {to_string(b, i) + " has no valid lifetime in a schedule of " +
                std::to_string(n_ops) + " ops"};
    }
    for (std::size_t w = 0; w < m.waits.size(); ++w) {
      const wait& x = m.waits[w];
      if (x.before >= x.after || x.after >= n_ops)
        return {"wait " + std::to_string(w) + " (op " + std::to_string(x.after) + " after op " +
                std::to_string(x.before) + ") does not point back to an earlier op"};
      if (w > 0 && (m.waits[w - 1].after > x.after ||
                    (m.waits[w - 1].after == x.after && m.waits[w - 1].before >= x.before)))
        return {"the waits are not sorted by the op that waits, then the op waited for"};
    }
    if (std::string why = check_steps(m); !why.empty()) return {why};
    if (m.arena_bytes < m.lower_bound)
      return {"the arena (" + std::to_string(m.arena_bytes) +
              " bytes) is smaller than the lower bound (" + std::to_string(m.lower_bound) + ")"};

    std::string overlap;
    any_sharing_pair(m, [&](std::size_t bi, std::size_t ci) {
      const buffer& b = m.buffers[bi];
      const buffer& c = m.buffers[ci];
      if (freed_before(m, b, c, ci == memory_plan::input()) ||
          freed_before(m, c, b, bi == memory_plan::input()))
        return false;
      overlap = to_string(b, bi) + " and " + to_string(c, ci) + " overlap while both may be live";
      return true;
    });
    return {overlap};
  }
};
}  // namespace detail

inline constexpr detail::check_memory_plan_fn check_memory_plan{};

/// What a run of a plan did to memory, as its ops' start and end times show.
struct run_memory {
  size_type live_peak = 0;  ///< the most bytes of device buffers live at once
  std::string problem;      ///< the first two buffers sharing a byte while both were live
  [[nodiscard]] constexpr bool ok() const noexcept { return problem.empty(); }
};

namespace detail {
struct check_run_fn {
  /// Replays `m`'s buffers on the times a run measured (`start[i]`, `end[i]` of op i, any unit,
  /// e.g. host_executor's `last_run()`): each buffer lives from its first op's start to the end
  /// of the ops that free it. Finds the most device bytes live at once and any two buffers of one
  /// pool that shared a byte while both were live; the plan's waits make that impossible,
  /// whatever the durations, and this is how a test or a user sees it.
  constexpr run_memory operator()(const memory_plan& m, std::span<const double> start,
                                  std::span<const double> end) const {
    run_memory out;
    const std::size_t n = m.steps.size();
    if (start.size() != n || end.size() != n) {
      out.problem = "the run's times cover " + std::to_string(start.size()) + " and " +
                    std::to_string(end.size()) + " ops, the plan has " + std::to_string(n);
      return out;
    }
    constexpr double inf = std::numeric_limits<double>::infinity();
    const std::size_t nb = m.buffers.size();
    std::vector<double> from(nb), to(nb);
    for (std::size_t id = 0; id < nb; ++id) {
      const buffer& b = m.buffers[id];
      from[id] = id == memory_plan::input() ? -inf : start[b.first_op];
      to[id] = n == 0 || b.last_op + 1 >= n ? inf : std::max(end[b.last_op], end[b.last_read]);
    }
    // Live bytes: at one instant, frees of what lived before it, then allocations, then frees of
    // what lived only at that instant (an op of duration 0).
    struct change {
      double at;
      int phase;
      size_type bytes;
    };
    std::vector<change> changes;
    for (std::size_t id = 0; id < nb; ++id) {
      if (m.buffers[id].on_host || m.buffers[id].size == 0) continue;
      changes.push_back({from[id], 1, m.buffers[id].size});
      if (to[id] < inf) changes.push_back({to[id], to[id] > from[id] ? 0 : 2, -m.buffers[id].size});
    }
    std::sort(changes.begin(), changes.end(), [](const change& p, const change& q) {
      return p.at != q.at ? p.at < q.at : p.phase < q.phase;
    });
    size_type live = 0;
    for (const change& c : changes) {
      live += c.bytes;
      out.live_peak = std::max(out.live_peak, live);
    }
    any_sharing_pair(m, [&](std::size_t bi, std::size_t ci) {
      if (to[bi] <= from[ci] || to[ci] <= from[bi]) return false;
      out.problem = to_string(m.buffers[bi], bi) + " and " + to_string(m.buffers[ci], ci) +
                    " shared bytes while both were live";
      return true;
    });
    return out;
  }
};
}  // namespace detail

inline constexpr detail::check_run_fn check_run{};

}  // namespace remat
