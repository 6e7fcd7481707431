// The one walk over a schedule. A `walker` takes ops one at a time: each op's row of the op table
// (op_table.hpp) says what it reads, makes and frees; the walker checks the op against what is
// held and either walks it, returning it resolved as a `walked_op` (the values it reads, makes and
// frees, its time, transient and option), or says why it cannot run and stays as it was. `walk`
// steps a walker over a whole sequence and hands each op to a visitor: the simulator, memory
// plans, the executors' programs and the libtorch plans are such visitors, and the exhaustive
// searches peek each candidate op on a state's walker to find its successors, so none of them
// re-derives what an op does.
//
//   remat::walker w(chain);
//   if (const remat::walk_step s = w.step(remat::f_ck(0)); s.ok())
//     s.op.time;                       // fw[0]
//   w.step(remat::backward(3)).failure.error;  // replay_error::gradient_missing: no g_4 yet
//   w.device_bytes();                // what the walked ops hold on the device
#pragma once

#include <remat/chain.hpp>
#include <remat/op.hpp>
#include <remat/op_table.hpp>

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace remat {

/// A value: one materialization of a tensor, numbered in the order ops make it: a_k, t_k or g_k
/// on the device (a recomputation makes a new value), or a host copy of a_k or t_k. Value 0 is the
/// input a_0, held before the first op.
using value_id = std::uint32_t;
inline constexpr value_id no_value = std::numeric_limits<value_id>::max();

struct walked_value {
  char kind = 'a';  // 'a', 't' or 'g'
  std::int32_t index = 0;
  bool on_host = false;
  size_type bytes = 0;
  std::uint16_t option = 0;  // a tape's (or its host copy's): the option that recorded it
  std::size_t made_by = 0;   // the op that made it; `before_all` for a_0
  static constexpr std::size_t before_all = static_cast<std::size_t>(-1);
};

/// One valid op, resolved: `reads[j]`, `frees[j]` are the values of its row's `reads[j]`,
/// `frees[j]` (`no_value` where the row has none, or for `activation_input` where a_k is not
/// held).
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

/// Why a walk stopped: the op at `at` cannot run (`error`, naming `tensor`), or (`incomplete`,
/// `at` = the number of ops) the ops end before g_0 is made. `error` is `none` for a complete
/// schedule.
struct walk_failure {
  replay_error error = replay_error::none;
  std::size_t at = 0;
  tensor_ref tensor{};
};

/// What `walker::step` did: the op walked (`ok()`), or why it cannot run (the walker unchanged).
/// `made` is the value the op made (where `op.made` is not `no_value`).
struct walk_step {
  walked_op op;
  walk_failure failure;
  walked_value made;
  [[nodiscard]] constexpr bool ok() const noexcept { return failure.error == replay_error::none; }
};

namespace detail {

// What is held while walking: per index k, a_k and t_k on the device and on the host, and g_k.
class holdings {
 public:
  constexpr holdings(const chain& c, std::size_t ops) : n_(c.length() + 1), ids_(5 * n_, no_value) {
    values_.reserve(2 * ops + 1);
    values_.push_back({'a', 0, false, c.input_size, 0, walked_value::before_all});
    at('a', 0, false) = 0;
  }
  constexpr value_id& at(char kind, std::int32_t k, bool host) {
    return ids_[slot(kind, host) * n_ + static_cast<std::size_t>(k)];
  }
  [[nodiscard]] constexpr value_id at(char kind, std::int32_t k, bool host) const {
    return ids_[slot(kind, host) * n_ + static_cast<std::size_t>(k)];
  }
  static constexpr std::size_t slot(char kind, bool host) {
    return kind == 'g' ? 4u : (kind == 't' ? 1u : 0u) + (host ? 2u : 0u);
  }
  constexpr value_id make(char kind, std::int32_t k, bool host, size_type bytes,
                          std::uint16_t option, std::size_t by) {
    values_.push_back({kind, k, host, bytes, option, by});
    return at(kind, k, host) = static_cast<value_id>(values_.size() - 1);
  }
  [[nodiscard]] constexpr const std::vector<walked_value>& values() const noexcept {
    return values_;
  }
  // Holds nothing (a walker that starts from given tensors).
  constexpr void clear() {
    values_.clear();
    std::fill(ids_.begin(), ids_.end(), no_value);
  }

 private:
  std::size_t n_;
  std::vector<value_id> ids_;
  std::vector<walked_value> values_;
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
    default:
      return o.kind == op_kind::wait ? replay_error::no_host_copy : replay_error::input_missing;
  }
}
constexpr replay_error already_held(operand which) {
  return which == operand::host_copy ? replay_error::already_on_host
                                     : replay_error::output_already_held;
}

}  // namespace detail

/// A tensor a walk starts from holding: a_k, t_k (recorded with `option`) or g_k, on the device or
/// (a_k, t_k) as a host copy.
struct held_tensor {
  tensor_ref tensor{};
  bool on_host = false;
  std::uint16_t option = 0;
};

/// Walks a schedule on a validated chain one op at a time. Copyable: a copy goes on from the same
/// point (the search with transfers keeps one per state).
class walker {
 public:
  /// `expected_ops`: room reserved for the values of that many ops.
  constexpr explicit walker(const chain& c, std::size_t expected_ops = 0)
      : c_(&c),
        L_(static_cast<std::int32_t>(c.length())),
        h_(c, expected_ops),
        device_bytes_(c.input_size) {}

  /// A walker that starts from holding `held` instead of a_0 alone (a_0 too only where listed),
  /// as if ops had made them: values 0, 1, ... in the order listed. Throws
  /// `std::invalid_argument` for a tensor that is none of the chain's, listed twice, or a tape's
  /// option the stage does not have.
  walker(const chain& c, std::span<const held_tensor> held);
  /// Starts again from holding `held` (as that constructor), on the same chain, reusing the
  /// walker's memory. After a throw it holds what was listed before the tensor refused.
  void restart(std::span<const held_tensor> held);

  /// Walks `o` as the next op, or says why it cannot run (and then changes nothing).
  constexpr walk_step step(const op& o);
  /// What `step(o)` would return, without walking it (`made` and `op.made` are the value it
  /// would make, and its id).
  [[nodiscard]] constexpr walk_step peek(const op& o) const;

  /// g_0 is made: the ops walked so far are a complete schedule.
  [[nodiscard]] constexpr bool done() const noexcept { return done_; }
  /// The ops walked so far.
  [[nodiscard]] constexpr std::size_t walked() const noexcept { return walked_; }
  /// `walk_failure{}` when done, else `incomplete` at `walked()`.
  [[nodiscard]] constexpr walk_failure finish() const noexcept {
    if (done_) return {};
    return {replay_error::incomplete, walked_, {'g', 0}};
  }
  /// Every value made so far, in order (value 0 is a_0).
  [[nodiscard]] constexpr const std::vector<walked_value>& values() const noexcept {
    return h_.values();
  }
  /// The value held now as `t` (`a`, `t` or `g` with its index), on the device or as a host
  /// copy; `no_value` where none is (a gradient has no host copy).
  [[nodiscard]] constexpr value_id held(tensor_ref t, bool on_host = false) const {
    if (t.index < 0 || t.index > L_ || (t.kind != 'a' && t.kind != 't' && t.kind != 'g') ||
        (t.kind == 'g' && on_host))
      return no_value;
    return h_.at(t.kind, t.index, on_host);
  }
  /// The bytes of the values held on the device now (x[k] per a_k and g_k, the tape's per t_k).
  [[nodiscard]] constexpr size_type device_bytes() const noexcept { return device_bytes_; }
  [[nodiscard]] constexpr const chain& walked_chain() const noexcept { return *c_; }

 private:
  constexpr walk_failure check(const op& o, std::size_t i) const;

  const chain* c_;
  std::int32_t L_;
  detail::holdings h_;
  size_type device_bytes_;
  std::size_t walked_ = 0;
  bool done_ = false;
};

inline walker::walker(const chain& c, std::span<const held_tensor> held)
    : c_(&c), L_(static_cast<std::int32_t>(c.length())), h_(c, held.size()), device_bytes_(0) {
  restart(held);
}

inline void walker::restart(std::span<const held_tensor> held) {
  const chain& c = *c_;
  h_.clear();
  device_bytes_ = 0;
  walked_ = 0;
  for (const held_tensor& x : held) {
    const char kind = x.tensor.kind;
    const std::int32_t k = x.tensor.index;
    const bool host = x.on_host;
    const auto bad = [&](const char* why) {
      throw std::invalid_argument(std::string("remat::walker: ") + kind + "_" + std::to_string(k) +
                                  (host ? " on the host" : "") + ": " + why);
    };
    if ((kind != 'a' && kind != 't' && kind != 'g') || k < (kind == 't' ? 1 : 0) || k > L_)
      bad("is not a tensor of the chain");
    if (kind == 'g' && host) bad("a gradient has no host copy");
    if (h_.at(kind, k, host) != no_value) bad("is listed twice");
    if (x.option != 0 &&
        (kind != 't' || x.option >= option_count(c.stages[static_cast<std::size_t>(k - 1)])))
      bad("has an option its stage does not have");
    const size_type bytes = kind == 't' ? tape_bytes(c, k, x.option) : activation_bytes(c, k);
    h_.make(kind, k, host, bytes, x.option, walked_value::before_all);
    if (!host) device_bytes_ += bytes;
  }
  done_ = h_.at('g', 0, false) != no_value;
}

constexpr walk_failure walker::check(const op& o, std::size_t i) const {
  const chain& c = *c_;
  const std::int32_t k = o.stage;
  const tensor_ref here{o.tensor == tensor_kind::tape ? 't' : 'a', k};
  if (done_) return {replay_error::after_end, i, {'g', 0}};
  if (!is_op_kind(o.kind) || o.tensor > tensor_kind::tape)
    return {replay_error::bad_kind, i, {'a', k}};
  const op_rule& r = rule(o.kind);
  const auto [first, last] = index_bounds(o.kind, o.tensor, L_);
  if (k < first || k > last)
    return {replay_error::bad_stage, i, r.transfer ? here : tensor_ref{'a', k}};
  if (r.cost == cost_source::offload || r.cost == cost_source::prefetch) {
    const double bandwidth = r.cost == cost_source::offload ? c.transfer.offload_bandwidth
                                                            : c.transfer.prefetch_bandwidth;
    if (!(bandwidth > 0)) return {replay_error::no_bandwidth, i, here};
  }
  if (o.option != 0 &&
      (!r.takes_option || o.option >= option_count(c.stages[static_cast<std::size_t>(k)])))
    return {replay_error::bad_option, i, {'t', k + 1}};
  return {};
}

constexpr walk_step walker::peek(const op& o) const {
  const chain& c = *c_;
  const std::size_t i = walked_;
  walk_step out;
  if (out.failure = check(o, i); !out.ok()) return out;
  const std::int32_t k = o.stage;
  const tensor_ref here{o.tensor == tensor_kind::tape ? 't' : 'a', k};
  const op_rule& r = rule(o.kind);
  // The input is a_k where held, else t_k.
  const bool input_is_tape =
      h_.at('a', k, false) == no_value && k > 0 && h_.at('t', k, false) != no_value;
  walked_op& w = out.op;
  w.index = i;
  w.o = o;
  w.rule = &r;
  for (std::size_t j = 0; j < r.reads.size() && r.reads[j] != operand::none; ++j) {
    const detail::named_tensor t = detail::tensor_of(r.reads[j], o, input_is_tape);
    w.reads[j] = h_.at(t.kind, t.index, t.host);
    if (w.reads[j] == no_value) {
      out.failure = {detail::missing(r.reads[j], o), i,
                     r.transfer ? here : tensor_ref{t.kind, t.index}};
      return out;
    }
  }
  const detail::named_tensor made = detail::tensor_of(r.makes, o, input_is_tape);
  if (made.kind != 0 && h_.at(made.kind, made.index, made.host) != no_value) {
    out.failure = {detail::already_held(r.makes), i,
                   r.transfer ? here : tensor_ref{made.kind, made.index}};
    return out;
  }

  // The option: F_all's own; otherwise that of the tape the op reads (B(k): t_{k+1}; a transfer
  // of t_k: the device or host copy).
  w.option = o.option;
  for (std::size_t j = 0; j < r.reads.size() && r.reads[j] != operand::none; ++j)
    if (r.reads[j] == operand::tape_above ||
        ((r.reads[j] == operand::device_copy || r.reads[j] == operand::host_copy) &&
         o.tensor == tensor_kind::tape))
      w.option = h_.values()[w.reads[j]].option;
  w.time = op_time(c, o, w.option);
  w.transient = op_transient(c, o, w.option);
  if (r.transfer) {
    w.input_bytes = moved_bytes(c, o, w.option);
  } else {
    w.input_bytes = activation_bytes(c, k);
    for (const operand x : {r.makes, r.reads[0], r.reads[1], r.reads[2]})
      if (x == operand::activation_above || x == operand::tape_above)
        w.above_bytes = activation_bytes(c, k + 1);
  }
  for (std::size_t j = 0; j < r.frees.size() && r.frees[j] != operand::none; ++j) {
    const detail::named_tensor t = detail::tensor_of(r.frees[j], o, input_is_tape);
    w.frees[j] = h_.at(t.kind, t.index, t.host);
  }
  if (made.kind != 0) {
    const size_type bytes =
        made.kind == 't' ? tape_bytes(c, made.index, w.option) : activation_bytes(c, made.index);
    w.made = static_cast<value_id>(h_.values().size());
    out.made = {
        made.kind, made.index, made.host, bytes, made.kind == 't' ? w.option : std::uint16_t{0}, i};
  }
  return out;
}

constexpr walk_step walker::step(const op& o) {
  const walk_step out = peek(o);
  if (!out.ok()) return out;
  const walked_op& w = out.op;
  for (const value_id id : w.frees) {
    if (id == no_value) continue;
    const walked_value& v = h_.values()[id];
    if (!v.on_host) device_bytes_ -= v.bytes;
    h_.at(v.kind, v.index, v.on_host) = no_value;
  }
  if (w.made != no_value) {
    const walked_value& m = out.made;
    h_.make(m.kind, m.index, m.on_host, m.bytes, m.option, m.made_by);
    if (!m.on_host) device_bytes_ += m.bytes;
    done_ = m.kind == 'g' && m.index == 0;
  }
  ++walked_;
  return out;
}

/// A visitor of `walk`: called with each walked op and the values made so far.
template <class V>
concept walk_visitor = std::invocable < V&,
        const walked_op&, const std::vector<walked_value>
& > ;

/// Walks `ops` on a validated chain, calling `visit(walked_op, values)` for each valid op in order;
/// returns the first invalid op (error `none` when the sequence is a complete schedule: it ends
/// exactly when g_0 is made).
template <walk_visitor Visit>
constexpr walk_failure walk(const chain& c, std::span<const op> ops, Visit&& visit) {
  walker w(c, ops.size());
  for (const op& o : ops) {
    const walk_step s = w.step(o);
    if (!s.ok()) return s.failure;
    visit(s.op, w.values());
  }
  return w.finish();
}

}  // namespace remat
