// What an executor hands to the user's code for each op: the buffers of that op, by role.
//
// The same three calls serve every executor; only the byte-range type differs (`std::span` on the
// host, device pointers under CUDA). Roles follow docs/model.md for stage k of a chain of L stages:
//
//   forward(k)  reads a_k, writes a_{k+1}; when `recording` (F_all) it also writes `saved`, the
//               rest of the tape t_{k+1} (what backward will need beyond a_{k+1}), the way its
//               `option` says (docs/model.md, "Several options per stage").
//   loss        reads a_L, writes g_L.
//   backward(k) reads a_k, the tape t_{k+1} (`output` = a_{k+1} and `saved`) and g_{k+1};
//               writes g_k. The tape and g_{k+1} are dropped after it, so it may scribble on them.
//               Its `option` is that of the F_all(k, o) that recorded the tape.
//
// Every op also gets a `workspace` of its overhead's size, valid during the call only. A
// recomputed forward must write the same bits as the first one (randomness keyed by stage and
// step), or the gradients change with the schedule.
//
// Both executors hand a program's compute steps to the user through one adapter
// (`detail::call_handler`), which picks the handler from the op table's row, and check the
// callbacks' type with one concept per handler: a type that lacks two handlers gets two messages.
#pragma once

#include <remat/op_table.hpp>

#include <concepts>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace remat {

template <class Bytes, class ConstBytes>
struct basic_forward_call {
  std::int32_t stage = 0;
  bool recording = false;  ///< F_all: write `saved` too
  ConstBytes input;        ///< a_k (x[k] bytes)
  Bytes output;            ///< a_{k+1} (x[k+1] bytes), at the start of the tape when recording
  Bytes saved;             ///< the tape beyond a_{k+1} (xb[k+1] - x[k+1] bytes); empty otherwise
  Bytes workspace;         ///< forward_overhead bytes (the option's when recording)
  /// F_all(k, o)'s option o: its `saved` and `workspace` have that option's sizes. 0 for the
  /// forwards that do not record, which have the stage's own.
  std::uint16_t option = 0;
};

template <class Bytes, class ConstBytes>
struct basic_backward_call {
  std::int32_t stage = 0;
  ConstBytes input;       ///< a_k
  Bytes output;           ///< a_{k+1}, as recorded at the start of the tape t_{k+1}
  Bytes saved;            ///< the rest of the tape t_{k+1}
  Bytes output_gradient;  ///< g_{k+1}
  Bytes input_gradient;   ///< g_k, to write
  Bytes workspace;        ///< backward_overhead bytes (the option's)
  /// The option o of the F_all(k, o) that recorded the tape t_{k+1}: the backward of that option.
  std::uint16_t option = 0;
};

template <class Bytes, class ConstBytes>
struct basic_loss_call {
  ConstBytes input;      ///< a_L
  Bytes input_gradient;  ///< g_L, to write
  Bytes workspace;       ///< loss_overhead bytes
};

/// `c.forward(call, extra...)`: runs F_none, F_ck and F_all.
template <class C, class ForwardCall, class... Extra>
concept forward_handler = requires(C& c, const ForwardCall& f, Extra... extra) {
  c.forward(f, extra...);
};
/// `c.backward(call, extra...)`: runs B.
template <class C, class BackwardCall, class... Extra>
concept backward_handler = requires(C& c, const BackwardCall& b, Extra... extra) {
  c.backward(b, extra...);
};
/// `c.loss(call, extra...)`: runs the loss.
template <class C, class LossCall, class... Extra>
concept loss_handler = requires(C& c, const LossCall& l, Extra... extra) {
  c.loss(l, extra...);
};

namespace detail {

// One static_assert per handler, so that each missing one is named; true when none is missing.
template <class C, class F, class B, class L, class... Extra>
constexpr bool check_handlers() {
  static_assert(forward_handler<C, F, Extra...>,
                "the executor's callbacks need forward(const forward_call&[, stream]): it runs "
                "F_none, F_ck and F_all (remat/op_calls.hpp)");
  static_assert(backward_handler<C, B, Extra...>,
                "the executor's callbacks need backward(const backward_call&[, stream]): it runs "
                "B (remat/op_calls.hpp)");
  static_assert(loss_handler<C, L, Extra...>,
                "the executor's callbacks need loss(const loss_call&[, stream]): it runs the loss "
                "(remat/op_calls.hpp)");
  return forward_handler<C, F, Extra...> && backward_handler<C, B, Extra...> &&
         loss_handler<C, L, Extra...>;
}

// Hands a program step `s` to the handler its op runs, by its row's cost (a forward, a recording
// forward, the loss, a backward), its buffers made byte ranges by `bytes` (writable) and
// `read_only`; returns false, calling nothing, for a transfer, which the executor runs itself.
template <class F, class B, class L, class C, class Step, class Bytes, class ReadOnly,
          class... Extra>
bool call_handler(C& c, const Step& s, const Bytes& bytes, const ReadOnly& read_only,
                  Extra&&... extra) {
  switch (rule(s.kind).cost) {
    case cost_source::forward:
    case cost_source::recording:
      c.forward(F{s.stage, rule(s.kind).cost == cost_source::recording, read_only(s.input),
                  bytes(s.output), bytes(s.saved), bytes(s.workspace), s.option},
                std::forward<Extra>(extra)...);
      return true;
    case cost_source::backward:
      c.backward(B{s.stage, read_only(s.input), bytes(s.output), bytes(s.saved),
                   bytes(s.output_gradient), bytes(s.input_gradient), bytes(s.workspace), s.option},
                 std::forward<Extra>(extra)...);
      return true;
    case cost_source::loss:
      c.loss(L{read_only(s.input), bytes(s.input_gradient), bytes(s.workspace)},
             std::forward<Extra>(extra)...);
      return true;
    case cost_source::offload:
    case cost_source::prefetch:
    case cost_source::none: break;
  }
  return false;
}

}  // namespace detail

}  // namespace remat
