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
#pragma once

#include <cstdint>

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

}  // namespace remat
