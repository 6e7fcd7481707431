// The static memory plan of a schedule: every buffer it creates, when it lives, and where it
// sits in one arena; and the check that no two live buffers share a byte.
//
//   remat::memory_plan m = remat::make_memory_plan(chain, r.schedule, {.alignment = 256});
//   m.arena_bytes;   // allocate this once
//   m.lower_bound;   // the simulator's peak: no placement can use less
//   remat::check_memory_plan(m).ok();   // <remat/check_plan.hpp>
//
// A schedule is static, so lifetimes are known before anything runs: each materialization of an
// activation or a tape (a recomputation is a new buffer), each gradient, and each op's transient
// overhead (a workspace live during that op only). Without transfers time is the op index; a
// buffer lives from the op that creates it to the op after which the schedule drops it, both
// included, so that an op's inputs, its output and its workspace are live together, as in the
// simulator's peak.
//
// With transfers (docs/offload.md) ops overlap on three streams, and a buffer lives in time: from
// the start of the op that creates it to the end of the ops that free it (an offloaded tensor:
// its offload and the compute ops issued before it that read it). Host copies get their own pool.
// Buffers share bytes only when one is freed before the other is allocated at the predicted
// times, and the plan lists the waits that make this hold whatever the timing: the op that
// allocates a range starts only after the ops that free its previous occupants have ended, so a
// slow copy or kernel costs time, never memory (docs/executors.md).
#pragma once

#include <remat/chain.hpp>
#include <remat/concepts.hpp>
#include <remat/detail/planning/best_fit.hpp>
#include <remat/op_table.hpp>
#include <remat/schedule.hpp>
#include <remat/simulate.hpp>
#include <remat/walk.hpp>

#include <algorithm>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace remat {

/// What a buffer holds.
enum class buffer_kind : std::uint8_t {
  activation,  ///< a_k
  tape,        ///< t_k: the activation a_k in its first output_size bytes, then what backward needs
  gradient,    ///< g_k
  workspace,   ///< an op's transient overhead, live during that op only
};

constexpr std::string_view name(buffer_kind k) noexcept {
  switch (k) {
    case buffer_kind::activation: return "a";
    case buffer_kind::tape: return "t";
    case buffer_kind::gradient: return "g";
    case buffer_kind::workspace: return "workspace";
  }
  return "?";
}

/// Index of a buffer in `memory_plan::buffers`.
using buffer_id = std::uint32_t;
inline constexpr buffer_id no_buffer = std::numeric_limits<buffer_id>::max();

/// One buffer: a materialization of a_k or t_k, a gradient g_k, or an op's workspace.
struct buffer {
  buffer_kind kind = buffer_kind::activation;
  std::int32_t index = 0;    ///< k of a_k, t_k, g_k; for a workspace, the op's stage (L: loss)
  std::size_t first_op = 0;  ///< the op that creates it (0 for the input a_0, held from the start)
  std::size_t last_op = 0;   ///< the op after which it is dropped; the last op if it never is
  size_type size = 0;        ///< bytes
  size_type offset = 0;      ///< bytes from the start of its pool, a multiple of the alignment
  /// A host copy (made by O, consumed by P), in the host pool; otherwise in the device arena.
  bool on_host = false;
  /// Its bytes are free once `last_op` and this op have ended. They differ for a tensor
  /// offloaded (`last_op` is the O) while a compute op issued before the O still reads it.
  std::size_t last_read = 0;
};

/// Why an op waits for another to end before it starts.
enum class wait_reason : std::uint8_t {
  data,    ///< it reads what the other produced (a tensor, a prefetched copy, a host copy)
  memory,  ///< it writes bytes that the other frees (a previous occupant of its range)
};

/// Op `after` starts only once op `before` (issued earlier, on another stream) has ended. Ops on
/// one stream run in issue order, so waits list only what crosses streams.
struct wait {
  std::size_t before = 0;
  std::size_t after = 0;
  wait_reason why = wait_reason::data;

  friend constexpr bool operator==(const wait&, const wait&) = default;
};

/// The buffers one op reads and writes. Forwards read `input` and write `output` (a_{k+1}, or
/// the tape t_{k+1} for F_all); the loss reads `input` (a_L) and writes `output` (g_L); B(k)
/// reads `input` (a_k), `tape` (t_{k+1}) and `gradient` (g_{k+1}) and writes `output` (g_k).
/// An activation read from a tape is its first `input_size` bytes. O copies `input` (on the
/// device) to `output` (a new host copy), P copies `input` (the host copy) to `output` (a new
/// device buffer), both `input_size` bytes; W's `input` is the host copy whose offload it waits
/// for. Transfers have no workspace.
struct step {
  remat::op op;
  buffer_id input = no_buffer;      ///< a_k or t_k (a_L or t_L for the loss)
  buffer_id output = no_buffer;     ///< a_{k+1} or t_{k+1}; g_L; g_k
  buffer_id tape = no_buffer;       ///< B(k): t_{k+1}
  buffer_id gradient = no_buffer;   ///< B(k): g_{k+1}
  buffer_id workspace = no_buffer;  ///< the op's overhead (possibly 0 bytes)
  size_type input_size = 0;         ///< x[k]: the bytes of the activation read
  size_type output_size = 0;        ///< x[k+1]: the activation part of the tape written or read
  /// The option the op runs: F_all(k, o)'s o; for B(k) (and a tape's transfer) that of the F_all
  /// that recorded its tape; 0 otherwise (docs/model.md, "Several options per stage").
  std::uint16_t option = 0;
};

struct memory_plan {
  std::vector<buffer> buffers;  ///< in order of creation; buffer 0 is the input a_0
  std::vector<step> steps;      ///< one per op of the schedule, in order
  size_type alignment = 1;      ///< every offset is a multiple of it
  size_type arena_bytes = 0;    ///< bytes from the arena's start to the highest buffer end
  size_type lower_bound = 0;    ///< the simulator's peak: the most bytes live at once
  std::string_view method;      ///< the placement heuristic that gave this arena
  size_type host_bytes = 0;     ///< the host pool: bytes to its highest host copy's end
  /// Every wait between streams, by `after` then `before` (none without transfers).
  std::vector<wait> waits;
  /// What the simulator predicts: when each op starts and ends (the chain's time unit).
  std::vector<double> start, end;

  /// True when the schedule moves tensors between the device and the host.
  [[nodiscard]] constexpr bool has_transfers() const noexcept {
    for (const step& s : steps)
      if (is_transfer(s.op.kind)) return true;
    return false;
  }

  /// arena_bytes / lower_bound (1 when both are 0): what fragmentation and alignment cost.
  [[nodiscard]] constexpr double ratio() const noexcept {
    if (lower_bound == 0) return arena_bytes == 0 ? 1.0 : std::numeric_limits<double>::infinity();
    return static_cast<double>(arena_bytes) / static_cast<double>(lower_bound);
  }
  /// The input a_0: written by the user before a run, never moved or reused during it.
  [[nodiscard]] static constexpr buffer_id input() noexcept { return 0; }
  /// g_0, the gradient of the input: the output of the last op (B(0)).
  [[nodiscard]] constexpr buffer_id input_gradient() const noexcept {
    return steps.empty() ? no_buffer : steps.back().output;
  }
};

struct memory_plan_options {
  /// Every offset and every buffer's footprint is a multiple of this (a power of two). 64 is a
  /// cache line; CUDA kernels want 256 (what cudaMalloc guarantees).
  size_type alignment = 64;
};

/// `b_3`, `workspace of op 7` for messages.
inline std::string to_string(const buffer& b, std::size_t id) {
  std::string what = b.kind == buffer_kind::workspace
                         ? "workspace of op " + std::to_string(b.first_op)
                         : std::string(name(b.kind)) + "_" + std::to_string(b.index);
  if (b.on_host) what += " on the host";
  return "buffer " + std::to_string(id) + " (" + what + ", ops " + std::to_string(b.first_op) +
         ".." + std::to_string(b.last_op) + ", bytes [" + std::to_string(b.offset) + ", " +
         std::to_string(b.offset + b.size) + "))";
}

namespace detail {

constexpr bool is_power_of_two(size_type v) noexcept {
  return v > 0 && (v & (v - 1)) == 0;
}

constexpr size_type align_up(size_type v, size_type alignment) noexcept {
  return (v + alignment - 1) / alignment * alignment;
}

// The buffers and steps of a valid schedule on a validated chain, offsets all 0: one buffer per
// value of the walk (walk.hpp), and one workspace per compute op after its output. `kept`, when
// given, is set to 1 for the buffers the schedule never drops.
constexpr memory_plan buffer_lifetimes(const chain& c, std::span<const op> ops,
                                       std::vector<char>* kept = nullptr) {
  const std::size_t last = ops.empty() ? 0 : ops.size() - 1;
  memory_plan m;
  m.buffers.reserve(3 * ops.size() + 1);
  m.steps.reserve(ops.size());
  std::vector<buffer_id> buffer_of;      // per value of the walk
  std::vector<std::size_t> last_reader;  // per buffer: the last compute op that read it
  std::vector<char> dropped;
  auto create = [&](buffer_kind kind, std::int32_t index, std::size_t op_index, size_type size,
                    bool on_host) {
    m.buffers.push_back({kind, index, op_index, last, size, 0, on_host, last});
    last_reader.push_back(op_index);
    dropped.push_back(0);
    return static_cast<buffer_id>(m.buffers.size() - 1);
  };
  buffer_of.push_back(create(buffer_kind::activation, 0, 0, c.input_size, false));
  walk(c, ops, [&](const walked_op& w, const std::vector<walked_value>& values) {
    const std::size_t i = w.index;
    const bool compute = !is_transfer(w.o.kind);
    step s{w.o};
    s.input_size = w.input_bytes;
    s.output_size = w.above_bytes;
    s.option = w.option;
    if (w.made != no_value) {
      const walked_value& v = values[w.made];
      const buffer_kind kind = v.kind == 'g'   ? buffer_kind::gradient
                               : v.kind == 't' ? buffer_kind::tape
                                               : buffer_kind::activation;
      buffer_of.resize(values.size(), no_buffer);
      s.output = buffer_of[w.made] = create(kind, v.index, i, v.bytes, v.on_host);
    }
    if (compute) {
      s.workspace = create(buffer_kind::workspace, w.o.stage, i, w.transient, false);
      m.buffers[s.workspace].last_op = m.buffers[s.workspace].last_read = i;
      dropped[s.workspace] = 1;
    }
    for (std::size_t j = 0; j < w.reads.size(); ++j) {
      if (w.reads[j] == no_value) continue;
      const buffer_id id = buffer_of[w.reads[j]];
      const operand role = w.rule->reads[j];
      (role == operand::tape_above       ? s.tape
       : role == operand::gradient_above ? s.gradient
                                         : s.input) = id;
      if (compute) last_reader[id] = i;
    }
    for (const value_id v : w.frees) {
      if (v == no_value) continue;
      const buffer_id id = buffer_of[v];
      m.buffers[id].last_op = i;
      m.buffers[id].last_read = w.rule->frees_after_readers ? last_reader[id] : i;
      dropped[id] = 1;
    }
    m.steps.push_back(s);
  });
  if (kept != nullptr) {
    kept->assign(dropped.size(), 0);
    for (std::size_t id = 0; id < dropped.size(); ++id) (*kept)[id] = dropped[id] ? 0 : 1;
  }
  return m;
}

// Calls `visit(i, j)` for every pair of buffers of one pool that share a byte (buffer i starting
// no higher than j), until it returns true; returns whether one did. Sorting by pool and offset
// makes it O(n log n) plus the pairs that overlap.
template <class Visit>
constexpr bool any_sharing_pair(const memory_plan& m, Visit&& visit) {
  std::vector<std::size_t> by_offset;
  for (std::size_t id = 0; id < m.buffers.size(); ++id)
    if (m.buffers[id].size > 0) by_offset.push_back(id);
  std::sort(by_offset.begin(), by_offset.end(), [&](std::size_t i, std::size_t j) {
    const buffer& p = m.buffers[i];
    const buffer& q = m.buffers[j];
    if (p.on_host != q.on_host) return q.on_host;
    return p.offset != q.offset ? p.offset < q.offset : i < j;
  });
  for (std::size_t p = 0; p < by_offset.size(); ++p) {
    const buffer& b = m.buffers[by_offset[p]];
    for (std::size_t q = p + 1; q < by_offset.size(); ++q) {
      const buffer& c = m.buffers[by_offset[q]];
      if (c.on_host != b.on_host || c.offset >= b.offset + b.size) break;  // nor any later one
      if (visit(by_offset[p], by_offset[q])) return true;
    }
  }
  return false;
}

// A point in the predicted run where memory changes: (time, op, 0) for an allocation at an op's
// start, (time, op, 1) for a free at the end of the ops that free a buffer (op: the later one).
// Two buffers may share bytes when one's free comes before the other's allocation; at a tie of
// time the op index orders them, which never puts a free by an op issued later first, so every
// wait points back in issue order.
struct plan_event {
  double time = 0;
  std::size_t op = 0;
  int free = 0;
  friend constexpr auto operator<=>(const plan_event&, const plan_event&) = default;
};

// Places buffers (aligned) that live from rank `first` to rank `last` by the best of the fit
// orders; returns the placement and the order's name.
constexpr std::pair<placement, std::string_view> place(std::span<const lifetime> lifetimes) {
  placement best;
  std::string_view method;
  bool first = true;
  for (const fit_order o : all_fit_orders) {
    placement p = best_fit(lifetimes, o);
    if (first || p.arena < best.arena) {
      best = std::move(p);
      method = name(o);
      first = false;
    }
  }
  return {std::move(best), method};
}

// The plan of a schedule with transfers: buffers live in predicted time (replay `r`), device
// buffers and host copies go to two pools, and the waits are listed.
constexpr void place_with_transfers(memory_plan& m, const replay_result& r,
                                    const std::vector<char>& kept) {
  const std::size_t nb = m.buffers.size();
  constexpr double before_all = -std::numeric_limits<double>::infinity();
  constexpr double after_all = std::numeric_limits<double>::infinity();
  std::vector<plan_event> alloc(nb), freed(nb);
  for (std::size_t id = 0; id < nb; ++id) {
    const buffer& b = m.buffers[id];
    alloc[id] = id == memory_plan::input() ? plan_event{before_all, 0, 0}
                                           : plan_event{r.start[b.first_op], b.first_op, 0};
    freed[id] = kept[id] ? plan_event{after_all, m.steps.size(), 1}
                         : plan_event{std::max(r.end[b.last_op], r.end[b.last_read]),
                                      std::max(b.last_op, b.last_read), 1};
  }
  std::vector<plan_event> events(alloc);
  events.insert(events.end(), freed.begin(), freed.end());
  std::sort(events.begin(), events.end());
  events.erase(std::unique(events.begin(), events.end()), events.end());
  auto rank = [&](const plan_event& e) {
    return static_cast<std::size_t>(std::lower_bound(events.begin(), events.end(), e) -
                                    events.begin());
  };
  // Each pool on its own: lifetimes of its buffers (others zero-sized), placed.
  for (const bool host : {false, true}) {
    std::vector<lifetime> lifetimes;
    lifetimes.reserve(nb);
    for (std::size_t id = 0; id < nb; ++id) {
      const buffer& b = m.buffers[id];
      const size_type size = b.on_host == host ? align_up(b.size, m.alignment) : 0;
      lifetimes.push_back({rank(alloc[id]), rank(freed[id]) - 1, size});
    }
    auto [p, method] = place(lifetimes);
    for (std::size_t id = 0; id < nb; ++id)
      if (m.buffers[id].on_host == host) m.buffers[id].offset = p.offsets[id];
    (host ? m.host_bytes : m.arena_bytes) = p.arena;
    if (!host) m.method = method;
  }

  // Waits: reads across streams, then every earlier occupant of a buffer's bytes.
  std::vector<wait> waits;
  auto need = [&](std::size_t before, std::size_t after, wait_reason why) {
    if (before < after && stream_of(m.steps[before].op.kind) != stream_of(m.steps[after].op.kind))
      waits.push_back({before, after, why});
  };
  for (std::size_t i = 0; i < m.steps.size(); ++i) {
    const step& s = m.steps[i];
    for (const buffer_id id : {s.input, s.tape, s.gradient})
      if (id != no_buffer && id != memory_plan::input())
        need(m.buffers[id].first_op, i, wait_reason::data);
  }
  any_sharing_pair(m, [&](std::size_t bi, std::size_t ci) {
    // They share bytes, so one is freed before the other is allocated.
    const bool b_first = freed[bi] < alloc[ci];
    const buffer& earlier = m.buffers[b_first ? bi : ci];
    const std::size_t later_op = m.buffers[b_first ? ci : bi].first_op;
    need(earlier.last_op, later_op, wait_reason::memory);
    need(earlier.last_read, later_op, wait_reason::memory);
    return false;
  });
  std::sort(waits.begin(), waits.end(), [](const wait& p, const wait& q) {
    if (p.after != q.after) return p.after < q.after;
    if (p.before != q.before) return p.before < q.before;
    return p.why < q.why;  // data first: a memory wait on the same op adds nothing
  });
  for (const wait& w : waits)
    if (m.waits.empty() || m.waits.back().after != w.after || m.waits.back().before != w.before)
      m.waits.push_back(w);
}

struct make_memory_plan_fn {
  /// The buffers of `ops` (a valid schedule of `c`, sizes in bytes), each placed in one arena by
  /// the best of several best-fit orders. Throws `chain_error` for a malformed chain and
  /// `std::invalid_argument` for an invalid schedule or alignment.
  template <chain_like C>
  constexpr memory_plan operator()(const C& chain_in, std::span<const op> ops,
                                   const memory_plan_options& options = {}) const {
    const chain c = to_chain(chain_in);
    if (!is_power_of_two(options.alignment))
      throw std::invalid_argument("make_memory_plan: the alignment must be a power of two (" +
                                  std::to_string(options.alignment) + ")");
    const replay_result r = replay(c, ops);
    if (!r.valid())
      throw std::invalid_argument("make_memory_plan: the schedule is invalid: " + describe(r, ops));
    std::vector<char> kept;
    memory_plan m = buffer_lifetimes(c, ops, &kept);
    m.alignment = options.alignment;
    m.lower_bound = r.peak_memory;
    m.start = r.start;
    m.end = r.end;
    if (m.has_transfers()) {
      place_with_transfers(m, r, kept);
      return m;
    }
    std::vector<lifetime> lifetimes;
    lifetimes.reserve(m.buffers.size());
    for (const buffer& b : m.buffers)
      lifetimes.push_back({b.first_op, b.last_op, align_up(b.size, options.alignment)});
    auto [best, method] = place(lifetimes);
    m.method = method;
    for (std::size_t i = 0; i < m.buffers.size(); ++i) m.buffers[i].offset = best.offsets[i];
    m.arena_bytes = best.arena;
    return m;
  }

  template <chain_like C>
  constexpr memory_plan operator()(const C& chain_in, const schedule& s,
                                   const memory_plan_options& options = {}) const {
    return (*this)(chain_in, std::span<const op>(s.ops), options);
  }
};

}  // namespace detail

inline constexpr detail::make_memory_plan_fn make_memory_plan{};

}  // namespace remat
