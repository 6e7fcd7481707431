// What each op does, as data: docs/model.md's table of the five compute ops and docs/offload.md's
// table of the three transfer ops, in code. Every part of remat that needs an op's meaning (the
// simulator, memory plans, the executors) reads it from here through one walk over a schedule
// (detail/walk.hpp), so an op's reads, outputs, frees, time, transient and stream are written
// once.
//
//   const remat::op_rule& r = remat::rule(remat::op_kind::backward);
//   r.reads;      // {input, tape_above, gradient_above}: a_k (or t_k), t_{k+1}, g_{k+1}
//   r.makes;      // gradient_here: g_k
//   r.frees;      // {activation_input, tape_above, gradient_above}: a_k (if held), t_{k+1}, g_{k+1}
//   remat::op_time(c, remat::backward(2));       // bw[2]
//   remat::op_transient(c, remat::backward(2));  // bt[2]
#pragma once

#include <remat/chain.hpp>
#include <remat/op.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

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
  bad_option,           ///< F_all(k, o) with o not an option of stage k, or an option on another op
};

/// A tensor of the model: `a_k` (activation), `t_k` (tape) or `g_k` (gradient).
struct tensor_ref {
  char kind = 'a';
  std::int32_t index = 0;
  friend constexpr bool operator==(const tensor_ref&, const tensor_ref&) = default;
};

/// A tensor an op names, relative to its stage `k` (the loss: `k = L`) and, for a transfer, its
/// `tensor` (a_k or t_k).
enum class operand : std::uint8_t {
  none,
  input,             ///< a_k, or the tape t_k when a_k is not held (k >= 1): a forward's input
  activation_input,  ///< a_k itself, where held (what F_none, the loss and B drop)
  activation_above,  ///< a_{k+1}
  tape_above,        ///< t_{k+1}
  gradient_above,    ///< g_{k+1}
  gradient_here,     ///< g_k (the loss: g_L)
  device_copy,       ///< a transfer's tensor on the device
  host_copy,         ///< a transfer's tensor's host copy
};

/// Which of the chain's figures an op's time and transient come from (docs/model.md's arrays).
/// The recording forward and the backward read the option `o` they run (`option_at`).
enum class cost_source : std::uint8_t {
  none,       ///< 0
  forward,    ///< time fw[k], transient ft[k]
  recording,  ///< time fw_o[k], transient ft_o[k] (with one option: fw[k], and fa[k] or ft[k])
  loss,       ///< time bw[L], transient bt[L]
  backward,   ///< time bw_o[k], transient bt_o[k]
  offload,    ///< time: the tensor's bytes / offload bandwidth; no transient
  prefetch,   ///< time: the tensor's bytes / prefetch bandwidth; no transient
};

/// Which indices k an op takes on a chain of L stages: a stage (0..L-1), the length (the loss:
/// exactly L), or a tensor's (a transfer: a_k for 0..L, t_k for 1..L).
enum class index_range : std::uint8_t { stage, length, tensor };

/// One row of the op table. `reads` must be held (on the device, or for `host_copy` on the host)
/// when the op starts; `makes` must not be, and is held from the op's start; `frees` are no longer
/// held once it is issued, and their bytes are released at its end, or with
/// `frees_after_readers` (an offload) once the compute ops issued before it that read them have
/// ended too. Unused entries are `operand::none`.
/// `name` is docs/model.md's and docs/offload.md's (`F_ck`, `O`); `json_name` the chain-format
/// contract's `"op"` (the transfers are `offload`, `prefetch`, `wait` there). A transfer moves a
/// tensor (`op::tensor`); only `takes_option` kinds name an option (`op::option`).
struct op_rule {
  op_kind kind;
  std::string_view name;
  std::string_view json_name;
  remat::stream stream;
  bool transfer;
  index_range indices;
  bool takes_option;
  std::array<operand, 3> reads;
  operand makes;
  std::array<operand, 3> frees;
  cost_source cost;
  bool frees_after_readers;

  /// It makes a tensor on the device (a compute op, a prefetch): the ops that must wait for
  /// memory another op frees.
  [[nodiscard]] constexpr bool allocates() const noexcept {
    return makes != operand::none && makes != operand::host_copy;
  }
};

namespace detail {
struct row_names {
  std::string_view name, json_name;
};
constexpr op_rule compute_row(op_kind kind, row_names n, std::array<operand, 3> reads,
                              operand makes, std::array<operand, 3> frees, cost_source cost) {
  return {kind,
          n.name,
          n.json_name,
          stream::compute,
          false,
          kind == op_kind::loss ? index_range::length : index_range::stage,
          kind == op_kind::forward_all,
          reads,
          makes,
          frees,
          cost,
          false};
}
constexpr op_rule transfer_row(op_kind kind, row_names n, remat::stream on, operand reads,
                               operand makes, operand frees, cost_source cost,
                               bool frees_after_readers = false) {
  return {kind,  n.name,  n.json_name, on,      true, index_range::tensor,
          false, {reads}, makes,       {frees}, cost, frees_after_readers};
}
}  // namespace detail

/// The table, indexed by `op_kind`.
inline constexpr std::array<op_rule, 8> op_table{{
    detail::compute_row(op_kind::forward_none, {"F_none", "F_none"}, {operand::input},
                        operand::activation_above, {operand::activation_input},
                        cost_source::forward),
    detail::compute_row(op_kind::forward_checkpoint, {"F_ck", "F_ck"}, {operand::input},
                        operand::activation_above, {}, cost_source::forward),
    detail::compute_row(op_kind::forward_all, {"F_all", "F_all"}, {operand::input},
                        operand::tape_above, {}, cost_source::recording),
    detail::compute_row(op_kind::loss, {"loss", "loss"}, {operand::input}, operand::gradient_here,
                        {operand::activation_input}, cost_source::loss),
    detail::compute_row(op_kind::backward, {"B", "B"},
                        {operand::gradient_above, operand::tape_above, operand::input},
                        operand::gradient_here,
                        {operand::gradient_above, operand::tape_above, operand::activation_input},
                        cost_source::backward),
    detail::transfer_row(op_kind::offload, {"O", "offload"}, stream::d2h, operand::device_copy,
                         operand::host_copy, operand::device_copy, cost_source::offload, true),
    detail::transfer_row(op_kind::prefetch, {"P", "prefetch"}, stream::h2d, operand::host_copy,
                         operand::device_copy, operand::host_copy, cost_source::prefetch),
    detail::transfer_row(op_kind::wait, {"W", "wait"}, stream::compute, operand::host_copy,
                         operand::none, operand::none, cost_source::none),
}};

static_assert([] {
  for (std::size_t i = 0; i < op_table.size(); ++i)
    if (static_cast<std::size_t>(op_table[i].kind) != i) return false;
  return true;
}());

/// True for the op kinds of the table (a byte read from a file may be none of them).
constexpr bool is_op_kind(op_kind k) noexcept {
  return static_cast<std::size_t>(k) < op_table.size();
}

/// The row of `k` (`is_op_kind(k)`).
constexpr const op_rule& rule(op_kind k) noexcept {
  return op_table[static_cast<std::size_t>(k)];
}

/// True for the three transfer ops of docs/offload.md (`offload`, `prefetch`, `wait`).
constexpr bool is_transfer(op_kind k) noexcept {
  return is_op_kind(k) && rule(k).transfer;
}

/// Where an op runs (docs/offload.md): compute ops and `W` on the compute stream, `O` on the
/// device-to-host copy stream, `P` on the host-to-device one.
constexpr stream stream_of(op_kind k) noexcept {
  return is_op_kind(k) ? rule(k).stream : stream::compute;
}

constexpr std::string_view name(stream s) noexcept {
  switch (s) {
    case stream::compute: return "compute";
    case stream::d2h: return "d2h";
    case stream::h2d: return "h2d";
  }
  return "?";
}

/// The name docs/model.md, docs/offload.md and the chain-format contract use: `F_none`, `F_ck`,
/// `F_all`, `loss`, `B`, `O`, `P`, `W` ("?" for a value that is none of the kinds).
constexpr std::string_view name(op_kind k) noexcept {
  return is_op_kind(k) ? rule(k).name : "?";
}

/// The kind named `text`: its name or its JSON name (`O` or `offload`); none for another text.
constexpr std::optional<op_kind> op_kind_named(std::string_view text) noexcept {
  for (const op_rule& r : op_table)
    if (text == r.name || text == r.json_name) return r.kind;
  return std::nullopt;
}

/// The kinds' names for a message: `F_none, F_ck, F_all, loss, B, O|offload, P|prefetch, W|wait`.
inline std::string op_kind_names() {
  std::string out;
  for (const op_rule& r : op_table) {
    if (!out.empty()) out += ", ";
    out += r.name;
    if (r.json_name != r.name) {
      out += '|';
      out += r.json_name;
    }
  }
  return out;
}

/// The indices `[first, last]` an op of kind `k` on tensor `t` takes on a chain of `L` stages
/// (`index_range`); `first > last` where there is none (a stage of an empty chain).
constexpr std::array<std::int32_t, 2> index_bounds(op_kind k, tensor_kind t,
                                                   std::int32_t L) noexcept {
  switch (rule(k).indices) {
    case index_range::stage: return {0, L - 1};
    case index_range::length: return {L, L};
    case index_range::tensor: return {t == tensor_kind::tape ? 1 : 0, L};
  }
  return {0, -1};
}

/// The bytes of a_k (x[k], k in 0..L) and of t_k (xb_o[k], k in 1..L, recorded with option o
/// of stage k-1) on a chain.
constexpr size_type activation_bytes(const chain& c, std::int32_t k) noexcept {
  return k == 0 ? c.input_size : c.stages[static_cast<std::size_t>(k - 1)].output_size;
}
constexpr size_type tape_bytes(const chain& c, std::int32_t k, std::size_t option = 0) noexcept {
  return option_at(c.stages[static_cast<std::size_t>(k - 1)], option).tape_size;
}
/// The bytes of the tensor a transfer op moves; `option`: that of the tape, where it moves one.
constexpr size_type moved_bytes(const chain& c, const op& o, std::size_t option = 0) noexcept {
  return o.tensor == tensor_kind::tape ? tape_bytes(c, o.stage, option)
                                       : activation_bytes(c, o.stage);
}

/// How long `o` takes on `c` (a valid op of a validated chain), running option `option`: that
/// of F_all(k, o) is `o.option`; B(k) and a transfer of t_k run the option of the F_all that
/// recorded their tape, which a walk over the schedule knows (`walked_op::option`).
constexpr double op_time(const chain& c, const op& o, std::size_t option) noexcept {
  const auto k = static_cast<std::size_t>(o.stage);
  switch (rule(o.kind).cost) {
    case cost_source::forward: return c.stages[k].forward_time;
    case cost_source::recording: return option_at(c.stages[k], option).forward_time;
    case cost_source::loss: return c.loss_time;
    case cost_source::backward: return option_at(c.stages[k], option).backward_time;
    case cost_source::offload:
      return static_cast<double>(moved_bytes(c, o, option)) / c.transfer.offload_bandwidth;
    case cost_source::prefetch:
      return static_cast<double>(moved_bytes(c, o, option)) / c.transfer.prefetch_bandwidth;
    case cost_source::none: return 0;
  }
  return 0;
}
/// `op_time(c, o, o.option)`: exact for every op on a chain without options, and for F_all.
constexpr double op_time(const chain& c, const op& o) noexcept { return op_time(c, o, o.option); }

/// The transient memory `o` holds while it runs on `c` (its overhead), running `option` (as for
/// `op_time`).
constexpr size_type op_transient(const chain& c, const op& o, std::size_t option) noexcept {
  const auto k = static_cast<std::size_t>(o.stage);
  switch (rule(o.kind).cost) {
    case cost_source::forward: return c.stages[k].forward_overhead;
    case cost_source::recording: return option_at(c.stages[k], option).forward_overhead;
    case cost_source::loss: return c.loss_overhead;
    case cost_source::backward: return option_at(c.stages[k], option).backward_overhead;
    default: return 0;
  }
}
/// `op_transient(c, o, o.option)`.
constexpr size_type op_transient(const chain& c, const op& o) noexcept {
  return op_transient(c, o, o.option);
}

}  // namespace remat
