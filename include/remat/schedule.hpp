// Schedules: sequences of the five operations of docs/model.md, as a value type.
#pragma once

#include <remat/concepts.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace remat {

/// The operations of docs/model.md.
enum class op_kind : std::uint8_t {
  forward_none,        ///< F_none(k): a_k or t_k -> a_{k+1}, drops a_k
  forward_checkpoint,  ///< F_ck(k):   a_k or t_k -> a_{k+1}, keeps its input
  forward_all,         ///< F_all(k):  a_k or t_k -> t_{k+1} (records the tape)
  loss,                ///< loss:      a_L or t_L -> g_L, drops a_L
  backward,            ///< B(k):      g_{k+1}, t_{k+1}, a_k or t_k -> g_k
};

/// The name docs/model.md and the chain-format contract use: `F_none`, `F_ck`, `F_all`, `loss`,
/// `B`.
constexpr std::string_view name(op_kind k) noexcept {
  switch (k) {
    case op_kind::forward_none: return "F_none";
    case op_kind::forward_checkpoint: return "F_ck";
    case op_kind::forward_all: return "F_all";
    case op_kind::loss: return "loss";
    case op_kind::backward: return "B";
  }
  return "?";
}

/// One operation. `stage` is the stage index k; for `loss` it is the chain length L.
struct op {
  op_kind kind = op_kind::loss;
  std::int32_t stage = 0;

  friend constexpr bool operator==(const op&, const op&) = default;
};

constexpr op f_none(std::int32_t k) noexcept {
  return {op_kind::forward_none, k};
}
constexpr op f_ck(std::int32_t k) noexcept {
  return {op_kind::forward_checkpoint, k};
}
constexpr op f_all(std::int32_t k) noexcept {
  return {op_kind::forward_all, k};
}
constexpr op loss_op(std::int32_t length) noexcept {
  return {op_kind::loss, length};
}
constexpr op backward(std::int32_t k) noexcept {
  return {op_kind::backward, k};
}

/// `F_ck(3)`, `loss`, `B(0)`.
inline std::string to_string(const op& o) {
  if (o.kind == op_kind::loss) return "loss";
  return std::string(name(o.kind)) + "(" + std::to_string(o.stage) + ")";
}

/// A schedule with what its solver predicts for it. `makespan` and `peak_memory` are in the
/// chain's own units (time, and memory as given, not discretized slots).
struct schedule {
  std::vector<op> ops;
  double makespan = 0;
  size_type peak_memory = 0;

  friend constexpr bool operator==(const schedule&, const schedule&) = default;
};

/// The ops, space-separated: `F_ck(0) F_none(1) F_all(2) loss B(2) ...`.
inline std::string to_string(const schedule& s) {
  std::string out;
  for (const op& o : s.ops) {
    if (!out.empty()) out += ' ';
    out += to_string(o);
  }
  return out;
}

}  // namespace remat
