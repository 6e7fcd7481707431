// The static memory plan of a schedule: every buffer it creates, when it lives, and where it
// sits in one arena; and the check that no two live buffers share a byte.
//
//   remat::memory_plan m = remat::make_memory_plan(chain, r.plan, {.alignment = 256});
//   m.arena_bytes;   // allocate this once
//   m.lower_bound;   // the simulator's peak: no placement can use less
//   remat::check_memory_plan(m).ok();
//
// A schedule is static, so lifetimes are known before anything runs: each materialization of an
// activation or a tape (a recomputation is a new buffer), each gradient, and each op's transient
// overhead (a workspace live during that op only). Time is the op index; a buffer lives from the
// op that creates it to the op after which the schedule drops it, both included, so that an op's
// inputs, its output and its workspace are live together, as in the simulator's peak.
#pragma once

#include <remat/chain.hpp>
#include <remat/concepts.hpp>
#include <remat/detail/planning/best_fit.hpp>
#include <remat/schedule.hpp>
#include <remat/simulate.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
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
  size_type offset = 0;      ///< bytes from the start of the arena, a multiple of the alignment
};

/// The buffers one op reads and writes. Forwards read `input` and write `output` (a_{k+1}, or
/// the tape t_{k+1} for F_all); the loss reads `input` (a_L) and writes `output` (g_L); B(k)
/// reads `input` (a_k), `tape` (t_{k+1}) and `gradient` (g_{k+1}) and writes `output` (g_k).
/// An activation read from a tape is its first `input_size` bytes.
struct step {
  remat::op op;
  buffer_id input = no_buffer;      ///< a_k or t_k (a_L or t_L for the loss)
  buffer_id output = no_buffer;     ///< a_{k+1} or t_{k+1}; g_L; g_k
  buffer_id tape = no_buffer;       ///< B(k): t_{k+1}
  buffer_id gradient = no_buffer;   ///< B(k): g_{k+1}
  buffer_id workspace = no_buffer;  ///< the op's overhead (possibly 0 bytes)
  size_type input_size = 0;         ///< x[k]: the bytes of the activation read
  size_type output_size = 0;        ///< x[k+1]: the activation part of the tape written or read
};

struct memory_plan {
  std::vector<buffer> buffers;  ///< in order of creation; buffer 0 is the input a_0
  std::vector<step> steps;      ///< one per op of the schedule, in order
  size_type alignment = 1;      ///< every offset is a multiple of it
  size_type arena_bytes = 0;    ///< bytes from the arena's start to the highest buffer end
  size_type lower_bound = 0;    ///< the simulator's peak: the most bytes live at once
  std::string_view method;      ///< the placement heuristic that gave this arena

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

// The buffers and steps of a valid schedule on a validated chain, offsets all 0.
constexpr memory_plan buffer_lifetimes(const chain& c, std::span<const op> ops) {
  const auto L = static_cast<std::int32_t>(c.length());
  const auto n = static_cast<std::size_t>(L) + 1;
  auto at = [](std::int32_t k) { return static_cast<std::size_t>(k); };
  auto x = [&](std::int32_t k) { return k == 0 ? c.input_size : c.stages[at(k - 1)].output_size; };
  auto xb = [&](std::int32_t k) { return c.stages[at(k - 1)].tape_size; };
  const std::size_t last = ops.empty() ? 0 : ops.size() - 1;

  memory_plan m;
  m.buffers.reserve(3 * ops.size() + 1);
  m.steps.reserve(ops.size());
  std::vector<buffer_id> a(n, no_buffer), t(n, no_buffer), g(n, no_buffer);
  auto create = [&](buffer_kind kind, std::int32_t index, std::size_t op_index, size_type size) {
    m.buffers.push_back({kind, index, op_index, last, size, 0});
    return static_cast<buffer_id>(m.buffers.size() - 1);
  };
  auto workspace = [&](std::int32_t stage_index, std::size_t op_index, size_type size) {
    m.buffers.push_back({buffer_kind::workspace, stage_index, op_index, op_index, size, 0});
    return static_cast<buffer_id>(m.buffers.size() - 1);
  };
  auto drop = [&](buffer_id& id, std::size_t op_index) {
    m.buffers[id].last_op = op_index;
    id = no_buffer;
  };
  a[0] = create(buffer_kind::activation, 0, 0, c.input_size);

  for (std::size_t i = 0; i < ops.size(); ++i) {
    const op o = ops[i];
    const std::int32_t k = o.stage;
    step s{o};
    s.input_size = x(k);
    s.input = a[at(k)] != no_buffer ? a[at(k)] : t[at(k)];
    if (o.kind == op_kind::loss) {
      s.output = g[at(L)] = create(buffer_kind::gradient, L, i, x(L));
      s.workspace = workspace(L, i, c.loss_overhead);
      if (a[at(L)] != no_buffer) drop(a[at(L)], i);
    } else if (o.kind == op_kind::backward) {
      s.output_size = x(k + 1);
      s.tape = t[at(k + 1)];
      s.gradient = g[at(k + 1)];
      s.output = g[at(k)] = create(buffer_kind::gradient, k, i, x(k));
      s.workspace = workspace(k, i, c.stages[at(k)].backward_overhead);
      drop(g[at(k + 1)], i);
      drop(t[at(k + 1)], i);
      if (a[at(k)] != no_buffer) drop(a[at(k)], i);
    } else {
      s.output_size = x(k + 1);
      if (o.kind == op_kind::forward_all)
        s.output = t[at(k + 1)] = create(buffer_kind::tape, k + 1, i, xb(k + 1));
      else
        s.output = a[at(k + 1)] = create(buffer_kind::activation, k + 1, i, x(k + 1));
      const stage& st = c.stages[at(k)];
      s.workspace = workspace(k, i,
                              o.kind == op_kind::forward_all
                                  ? st.recording_overhead.value_or(st.forward_overhead)
                                  : st.forward_overhead);
      if (o.kind == op_kind::forward_none && a[at(k)] != no_buffer) drop(a[at(k)], i);
    }
    m.steps.push_back(s);
  }
  return m;
}

// Checks that every step refers to buffers that exist and are live at that step, with the
// kinds and sizes its op needs. "" when it does.
constexpr std::string check_steps(const memory_plan& m) {
  const std::size_t nb = m.buffers.size();
  auto live = [&](buffer_id id, std::size_t i) {
    return id < nb && m.buffers[id].first_op <= i && i <= m.buffers[id].last_op;
  };
  for (std::size_t i = 0; i < m.steps.size(); ++i) {
    const step& s = m.steps[i];
    auto where = [&] { return "step " + std::to_string(i) + " (" + to_string(s.op) + ")"; };
    if (!live(s.input, i) || m.buffers[s.input].size < s.input_size)
      return where() + ": its input is not a live buffer of at least input_size bytes";
    if (!live(s.output, i) || m.buffers[s.output].first_op != i)
      return where() + ": its output is not a buffer it creates";
    if (!live(s.workspace, i) || m.buffers[s.workspace].kind != buffer_kind::workspace)
      return where() + ": its workspace is not a live workspace buffer";
    if (s.op.kind == op_kind::backward) {
      if (!live(s.tape, i) || m.buffers[s.tape].kind != buffer_kind::tape ||
          m.buffers[s.tape].size < s.output_size)
        return where() + ": its tape is not a live tape of at least output_size bytes";
      if (!live(s.gradient, i) || m.buffers[s.gradient].kind != buffer_kind::gradient)
        return where() + ": its incoming gradient is not a live gradient buffer";
    } else if (s.op.kind != op_kind::loss) {
      if (m.buffers[s.output].size < s.output_size)
        return where() + ": its output is smaller than output_size";
    }
  }
  return {};
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
    for (std::size_t i = 0; i < ops.size(); ++i)
      if (is_transfer(ops[i].kind))
        throw std::invalid_argument(
            "make_memory_plan: op " + std::to_string(i) + " (" + to_string(ops[i]) +
            ") is a transfer: memory plans (and the host and CUDA executors) run schedules "
            "without offloading only");
    memory_plan m = buffer_lifetimes(c, ops);
    m.alignment = options.alignment;
    m.lower_bound = r.peak_memory;

    std::vector<lifetime> lifetimes;
    lifetimes.reserve(m.buffers.size());
    for (const buffer& b : m.buffers)
      lifetimes.push_back({b.first_op, b.last_op, align_up(b.size, options.alignment)});
    placement best;
    bool first = true;
    for (const fit_order o : all_fit_orders) {
      placement p = best_fit(lifetimes, o);
      if (first || p.arena < best.arena) {
        best = std::move(p);
        m.method = name(o);
        first = false;
      }
    }
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

/// What `check_memory_plan` found: `ok()`, or the first problem in words.
struct memory_plan_check {
  std::string problem;  ///< empty when the plan is sound
  [[nodiscard]] constexpr bool ok() const noexcept { return problem.empty(); }
};

namespace detail {
struct check_memory_plan_fn {
  /// Proves a plan sound, independently of how it was built: the alignment is a power of two,
  /// every buffer is aligned and inside the arena, every step uses live buffers of the right
  /// kind and size, and no two buffers that are live at the same op share a byte. Sorting by
  /// offset makes the overlap check O(n log n) plus the pairs that overlap in space.
  constexpr memory_plan_check operator()(const memory_plan& m) const {
    if (!is_power_of_two(m.alignment))
      return {"the alignment " + std::to_string(m.alignment) + " is not a power of two"};
    const std::size_t n_ops = m.steps.size();
    for (std::size_t i = 0; i < m.buffers.size(); ++i) {
      const buffer& b = m.buffers[i];
      if (b.size < 0 || b.offset < 0 || b.offset % m.alignment != 0 ||
          b.offset > m.arena_bytes - b.size)
        return {to_string(b, i) + " is misaligned or outside the arena of " +
                std::to_string(m.arena_bytes) + " bytes"};
      if (b.first_op > b.last_op || (n_ops > 0 && b.last_op >= n_ops))
        return {to_string(b, i) + " has no valid lifetime in a schedule of " +
                std::to_string(n_ops) + " ops"};
    }
    if (std::string why = check_steps(m); !why.empty()) return {why};
    if (m.arena_bytes < m.lower_bound)
      return {"the arena (" + std::to_string(m.arena_bytes) +
              " bytes) is smaller than the lower bound (" + std::to_string(m.lower_bound) + ")"};

    std::vector<std::size_t> by_offset;
    for (std::size_t i = 0; i < m.buffers.size(); ++i)
      if (m.buffers[i].size > 0) by_offset.push_back(i);
    std::sort(by_offset.begin(), by_offset.end(), [&](std::size_t i, std::size_t j) {
      return m.buffers[i].offset != m.buffers[j].offset ? m.buffers[i].offset < m.buffers[j].offset
                                                        : i < j;
    });
    for (std::size_t p = 0; p < by_offset.size(); ++p) {
      const buffer& b = m.buffers[by_offset[p]];
      for (std::size_t q = p + 1; q < by_offset.size(); ++q) {
        const buffer& other = m.buffers[by_offset[q]];
        if (other.offset >= b.offset + b.size) break;  // no later one starts inside b either
        if (b.first_op <= other.last_op && other.first_op <= b.last_op)
          return {to_string(b, by_offset[p]) + " and " + to_string(other, by_offset[q]) +
                  " overlap while both are live"};
      }
    }
    return {};
  }
};
}  // namespace detail

inline constexpr detail::check_memory_plan_fn check_memory_plan{};

}  // namespace remat
