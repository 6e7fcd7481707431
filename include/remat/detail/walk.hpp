// The one walk over a schedule: it reads each op's row of the op table (op_table.hpp), checks
// the op against what is held, and hands each valid op to a visitor as a `walked_op`: which
// materializations (values) it reads, the value it makes, the values it frees, its time and its
// transient, with the value table so far. The simulator, memory plans and the libtorch executor
// are visitors of this walk; none of them re-derives what an op does.
//
// A value is one materialization: a_k, t_k or g_k on the device (a recomputation is a new value),
// or a host copy of a_k or t_k. Values are numbered in the order ops make them; value 0 is the
// input a_0, held before the first op.
#pragma once

#include <remat/chain.hpp>
#include <remat/op_table.hpp>
#include <remat/schedule.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace remat::detail {

using value_id = std::uint32_t;
inline constexpr value_id no_value = std::numeric_limits<value_id>::max();

struct value {
  char kind = 'a';  // 'a', 't' or 'g'
  std::int32_t index = 0;
  bool on_host = false;
  size_type bytes = 0;
  std::uint16_t option = 0;  // a tape's (or its host copy's): the option that recorded it
  std::size_t made_by = 0;  // the op that made it; `before_all` for a_0
  static constexpr std::size_t before_all = static_cast<std::size_t>(-1);
};

// One valid op, resolved: `reads[j]`, `frees[j]` are the values of the row's `reads[j]`,
// `frees[j]` (`no_value` where the row has none, or for `activation_input` where a_k is not
// held).
struct walked_op {
  std::size_t index = 0;
  op o{};
  const op_rule* rule = nullptr;
  std::array<value_id, 3> reads{no_value, no_value, no_value};
  value_id made = no_value;
  std::array<value_id, 3> frees{no_value, no_value, no_value};
  double time = 0;
  size_type transient = 0;
  // The option the op runs: F_all's own; for B(k) that of the tape t_{k+1} it consumes, for a
  // transfer of a tape that of the tape; 0 otherwise.
  std::uint16_t option = 0;
  // x[k] for a compute op (the activation it reads, as a_k or in t_k); a transfer's bytes.
  size_type input_bytes = 0;
  // x[k+1] for an op that makes or reads a_{k+1} or t_{k+1}: the activation in the tape.
  size_type above_bytes = 0;

  // The value read as `which` (input, device_copy, host_copy, tape_above, gradient_above).
  [[nodiscard]] constexpr value_id read(operand which) const noexcept {
    for (std::size_t j = 0; j < reads.size(); ++j)
      if (rule->reads[j] == which) return reads[j];
    return no_value;
  }
};

struct walk_failure {
  replay_error error = replay_error::none;
  std::size_t at = 0;  // the op (ops.size() when incomplete)
  tensor_ref tensor{};
};

// What is held while walking: per index k, a_k and t_k on the device and on the host, and g_k.
class holdings {
 public:
  constexpr holdings(const chain& c, std::size_t ops)
      : n_(c.length() + 1), ids_(5 * n_, no_value) {
    values_.reserve(2 * ops + 1);
    values_.push_back({'a', 0, false, c.input_size, 0, value::before_all});
    at('a', 0, false) = 0;
  }
  constexpr value_id& at(char kind, std::int32_t k, bool host) {
    const std::size_t slot = kind == 'g' ? 4u : (kind == 't' ? 1u : 0u) + (host ? 2u : 0u);
    return ids_[slot * n_ + static_cast<std::size_t>(k)];
  }
  constexpr value_id make(char kind, std::int32_t k, bool host, size_type bytes,
                          std::uint16_t option, std::size_t by) {
    values_.push_back({kind, k, host, bytes, option, by});
    return at(kind, k, host) = static_cast<value_id>(values_.size() - 1);
  }
  [[nodiscard]] constexpr const std::vector<value>& values() const noexcept { return values_; }

 private:
  std::size_t n_;
  std::vector<value_id> ids_;
  std::vector<value> values_;
};

// The tensor an operand names for op `o` (kind, index, host); kind 0 for `operand::none`.
struct named_tensor {
  char kind = 0;
  std::int32_t index = 0;
  bool host = false;
};
constexpr named_tensor tensor_of(operand which, const op& o, bool input_is_tape) {
  const std::int32_t k = o.stage;
  const char moved = o.tensor == tensor_kind::tape ? 't' : 'a';
  switch (which) {
    case operand::input: return {input_is_tape ? 't' : 'a', k, false};
    case operand::activation_input: return {'a', k, false};
    case operand::activation_above: return {'a', k + 1, false};
    case operand::tape_above: return {'t', k + 1, false};
    case operand::gradient_above: return {'g', k + 1, false};
    case operand::gradient_here: return {'g', k, false};
    case operand::device_copy: return {moved, k, false};
    case operand::host_copy: return {moved, k, true};
    case operand::none: break;
  }
  return {};
}

// Why `o` cannot read `which` (not held), and why it cannot make it (already held).
constexpr replay_error missing(operand which, const op& o) {
  switch (which) {
    case operand::tape_above: return replay_error::tape_missing;
    case operand::gradient_above: return replay_error::gradient_missing;
    case operand::device_copy: return replay_error::not_on_device;
    case operand::host_copy: return replay_error::no_host_copy;
    default: return o.kind == op_kind::wait ? replay_error::no_host_copy
                                            : replay_error::input_missing;
  }
}
constexpr replay_error already_held(operand which) {
  return which == operand::host_copy ? replay_error::already_on_host
                                     : replay_error::output_already_held;
}

// Walks `ops` on a validated chain, calling `visit(const walked_op&, const std::vector<value>&)`
// for each valid op in order; returns the first invalid op (error `none` when the sequence is a
// complete schedule: it ends exactly when g_0 is made).
template <class Visit>
constexpr walk_failure walk(const chain& c, std::span<const op> ops, Visit&& visit) {
  const auto L = static_cast<std::int32_t>(c.length());
  holdings h(c, ops.size());
  bool done = false;  // g_0 made
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const op o = ops[i];
    const std::int32_t k = o.stage;
    const tensor_ref here{o.tensor == tensor_kind::tape ? 't' : 'a', k};
    if (done) return {replay_error::after_end, i, {'g', 0}};
    if (!is_op_kind(o.kind) || o.tensor > tensor_kind::tape)
      return {replay_error::bad_kind, i, {'a', k}};
    const op_rule& r = rule(o.kind);
    if (is_transfer(o.kind)) {
      if (k < (o.tensor == tensor_kind::tape ? 1 : 0) || k > L)
        return {replay_error::bad_stage, i, here};
      const double bandwidth = r.cost == cost_source::offload    ? c.transfer.offload_bandwidth
                               : r.cost == cost_source::prefetch ? c.transfer.prefetch_bandwidth
                                                                 : 1;
      if (!(bandwidth > 0)) return {replay_error::no_bandwidth, i, here};
    } else if (o.kind == op_kind::loss ? k != L : (k < 0 || k >= L)) {
      return {replay_error::bad_stage, i, {'a', k}};
    }
    if (o.option != 0 &&
        (o.kind != op_kind::forward_all ||
         o.option >= option_count(c.stages[static_cast<std::size_t>(k)])))
      return {replay_error::bad_option, i, {'t', k + 1}};
    // The input is a_k where held, else t_k.
    const bool input_is_tape =
        h.at('a', k, false) == no_value && k > 0 && h.at('t', k, false) != no_value;
    walked_op w;
    w.index = i;
    w.o = o;
    w.rule = &r;
    for (std::size_t j = 0; j < r.reads.size() && r.reads[j] != operand::none; ++j) {
      const named_tensor t = tensor_of(r.reads[j], o, input_is_tape);
      w.reads[j] = h.at(t.kind, t.index, t.host);
      if (w.reads[j] == no_value)
        return {missing(r.reads[j], o), i, is_transfer(o.kind) ? here : tensor_ref{t.kind, t.index}};
    }
    const named_tensor out = tensor_of(r.makes, o, input_is_tape);
    if (out.kind != 0 && h.at(out.kind, out.index, out.host) != no_value)
      return {already_held(r.makes), i, is_transfer(o.kind) ? here : tensor_ref{out.kind, out.index}};

    // The option: F_all's own; otherwise that of the tape the op reads (B(k): t_{k+1}; a
    // transfer of t_k: the device or host copy).
    w.option = o.option;
    for (std::size_t j = 0; j < r.reads.size() && r.reads[j] != operand::none; ++j)
      if (r.reads[j] == operand::tape_above ||
          ((r.reads[j] == operand::device_copy || r.reads[j] == operand::host_copy) &&
           o.tensor == tensor_kind::tape))
        w.option = h.values()[w.reads[j]].option;
    w.time = op_time(c, o, w.option);
    w.transient = op_transient(c, o, w.option);
    if (is_transfer(o.kind)) {
      w.input_bytes = moved_bytes(c, o, w.option);
    } else {
      w.input_bytes = activation_bytes(c, k);
      for (const operand x : {r.makes, r.reads[0], r.reads[1], r.reads[2]})
        if (x == operand::activation_above || x == operand::tape_above)
          w.above_bytes = activation_bytes(c, k + 1);
    }
    for (std::size_t j = 0; j < r.frees.size() && r.frees[j] != operand::none; ++j) {
      const named_tensor t = tensor_of(r.frees[j], o, input_is_tape);
      value_id& held = h.at(t.kind, t.index, t.host);
      w.frees[j] = held;
      held = no_value;
    }
    if (out.kind != 0) {
      const size_type bytes = out.kind == 'g'   ? activation_bytes(c, out.index)
                              : out.kind == 't' ? tape_bytes(c, out.index, w.option)
                                                : activation_bytes(c, out.index);
      w.made = h.make(out.kind, out.index, out.host, bytes, out.kind == 't' ? w.option : 0, i);
      done = out.kind == 'g' && out.index == 0;
    }
    visit(static_cast<const walked_op&>(w), h.values());
  }
  if (!done) return {replay_error::incomplete, ops.size(), {'g', 0}};
  return {};
}

}  // namespace remat::detail
