// One operation of a schedule as a value: the five compute operations of docs/model.md and the
// three transfer operations of docs/offload.md. What each kind does (what it reads, makes and
// frees, its name, stream and cost) is the op table's (op_table.hpp).
#pragma once

#include <cstdint>

namespace remat {

/// The operations of docs/model.md (compute) and docs/offload.md (transfers).
enum class op_kind : std::uint8_t {
  forward_none,        ///< F_none(k): a_k or t_k -> a_{k+1}, drops a_k
  forward_checkpoint,  ///< F_ck(k):   a_k or t_k -> a_{k+1}, keeps its input
  forward_all,         ///< F_all(k):  a_k or t_k -> t_{k+1} (records the tape)
  loss,                ///< loss:      a_L or t_L -> g_L, drops a_L
  backward,            ///< B(k):      g_{k+1}, t_{k+1}, a_k or t_k -> g_k
  offload,             ///< O(k, a|t): copies a_k or t_k to the host and frees its device copy
  prefetch,            ///< P(k, a|t): brings the host copy of a_k or t_k back to the device
  wait,                ///< W(k, a|t): the compute stream waits for the offload of a_k or t_k
};

/// Where an op runs (docs/offload.md): compute ops and `W` on the compute stream, `O` on the
/// device-to-host copy stream, `P` on the host-to-device one. Each stream runs its ops one at a
/// time, in issue order.
enum class stream : std::uint8_t { compute, d2h, h2d };

/// Which tensor of index k a transfer op moves: the activation a_k or the tape t_k (k >= 1).
enum class tensor_kind : std::uint8_t { activation, tape };

/// One operation. `stage` is the stage index k (for `loss`, the chain length L; for a transfer,
/// the index k of a_k or t_k); `tensor` says which of a_k and t_k a transfer moves (compute ops
/// leave it `activation`); `option` is the option o of F_all(k, o) (docs/model.md, "Several
/// options per stage"), 0 for every other op: B(k) runs the option of the tape it consumes.
struct op {
  op_kind kind = op_kind::loss;
  std::int32_t stage = 0;
  tensor_kind tensor = tensor_kind::activation;
  std::uint16_t option = 0;

  friend constexpr bool operator==(const op&, const op&) = default;
};

constexpr op f_none(std::int32_t k) noexcept {
  return {op_kind::forward_none, k};
}
constexpr op f_ck(std::int32_t k) noexcept {
  return {op_kind::forward_checkpoint, k};
}
/// F_all(k, o): records the tape t_{k+1} with option o.
constexpr op f_all(std::int32_t k, std::uint16_t option = 0) noexcept {
  return {op_kind::forward_all, k, tensor_kind::activation, option};
}
constexpr op loss_op(std::int32_t length) noexcept {
  return {op_kind::loss, length};
}
constexpr op backward(std::int32_t k) noexcept {
  return {op_kind::backward, k};
}
/// O(k, a) or O(k, t): offload a_k or t_k.
constexpr op offload(std::int32_t k, tensor_kind t = tensor_kind::activation) noexcept {
  return {op_kind::offload, k, t};
}
/// P(k, a) or P(k, t): prefetch a_k or t_k.
constexpr op prefetch(std::int32_t k, tensor_kind t = tensor_kind::activation) noexcept {
  return {op_kind::prefetch, k, t};
}
/// W(k, a) or W(k, t): wait for the offload of a_k or t_k to end.
constexpr op wait_for(std::int32_t k, tensor_kind t = tensor_kind::activation) noexcept {
  return {op_kind::wait, k, t};
}

}  // namespace remat
