// How the zoo turns the layers of one stage into the model's costs (docs/model.md).
//
// A `stage_recorder` is told, op by op, what each layer of a stage reads, which new buffers it
// allocates, and what it saves for its backward (as PyTorch's autograd does). From that record it
// derives the stage's numbers, so that every model is costed by one set of rules:
//
//   output_size        the bytes of the stage's output buffer;
//   tape_size          every buffer saved for backward, plus the output (the model's tape holds
//                      it), but never the stage's input: the model holds a_k beside the tape;
//   forward_overhead   what a forward holds at its worst moment beyond what the model already
//                      counts (the output for a forward without recording, the whole tape for a
//                      recording one), found by replaying the ops and freeing each buffer after
//                      its last reader;
//   backward_overhead  the zoo's rule: the input's gradient (the two gradient paths of a residual
//                      or concatenation meet there; elsewhere it stands for the framework's
//                      accumulation buffer) plus the largest intermediate's gradient;
//   times              a roofline per op, t = max(flops / peak, bytes / bandwidth), summed over
//                      the stage's ops, in milliseconds. Each op states its forward and backward
//                      work: convolutions and matrix products do twice the forward's work
//                      backward (the gradients of both operands); memory-bound ops move about
//                      1.5 times their forward bytes (read the incoming gradient and a saved
//                      tensor, write the outgoing gradient);
//   flops              the forward FLOPs of the convolutions and matrix products, 2 per
//                      multiply-add: the convention of published model counts. Normalization,
//                      activations, pooling and softmax are costed by their bytes only.
#pragma once

#include <remat/chain.hpp>
#include <remat/concepts.hpp>

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace remat::zoo {

/// A zoo request that cannot be built: an unknown model, an option out of range, or sizes beyond
/// what a chain may hold (2^62 bytes). Part of <remat/zoo.hpp>'s interface.
class zoo_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

namespace detail {

[[noreturn]] inline void throw_zoo_error(const std::string& what) {
  throw zoo_error(what);
}

[[noreturn]] inline void throw_too_large() {
  throw_zoo_error("the network's sizes exceed 2^62 bytes; use a smaller batch, image or sequence");
}

// Size arithmetic that refuses results above remat::max_size instead of wrapping.
inline size_type mul(size_type a, size_type b) {
  if (a != 0 && b > max_size / a) throw_too_large();
  return a * b;
}
inline size_type mul(std::initializer_list<size_type> factors) {
  size_type product = 1;
  for (const size_type f : factors) product = mul(product, f);
  return product;
}
inline size_type add(size_type a, size_type b) {
  if (a > max_size - b) throw_too_large();
  return a + b;
}

inline double to_double(size_type v) {
  return static_cast<double>(v);
}

/// The machine the times are estimated for.
struct roofline {
  double peak_flops = 0;  ///< FLOP/s
  double bandwidth = 0;   ///< bytes/s

  /// Milliseconds for an op doing `flops` and moving `bytes`: bound by compute or by memory.
  [[nodiscard]] double ms(double flops, double bytes) const {
    return 1e3 * std::max(flops / peak_flops, bytes / bandwidth);
  }
};

/// A buffer of the stage being recorded (an index into the recorder's buffers).
struct tensor {
  std::size_t id = 0;
};

/// The work of one op in one direction.
struct op_cost {
  double flops = 0;
  double bytes = 0;
};

/// One stage's costs and its forward FLOPs.
struct recorded_stage {
  remat::stage costs;
  double flops = 0;
};

class stage_recorder {
 public:
  /// `p`: bytes per element of floating-point tensors. The stage's input has `input_elements` of
  /// `input_element_bytes` each; `input_differentiable` is false for integer inputs (token ids).
  stage_recorder(const roofline& machine, size_type p, size_type input_elements,
                 size_type input_element_bytes, bool input_differentiable)
      : machine_(machine), p_(p), input_differentiable_(input_differentiable) {
    buffers_.push_back({input_elements, input_element_bytes, true, false, no_op, no_op, no_op});
  }

  [[nodiscard]] tensor input() const { return {0}; }
  [[nodiscard]] size_type elements(tensor t) const { return buffers_[t.id].elements; }
  [[nodiscard]] size_type element_bytes() const { return p_; }

  // ---- layers -----------------------------------------------------------------------------

  /// A convolution or matrix product of `macs` multiply-adds over `operands`, with
  /// `weight_elements` parameters. Saves every operand: each one's gradient needs the others.
  tensor product(std::initializer_list<tensor> operands, size_type out_elements, double macs,
                 size_type weight_elements) {
    size_type moved = add(mul(out_elements, p_), mul(weight_elements, p_));
    for (const tensor t : operands) moved = add(moved, bytes(t));
    begin("product", operands, {2 * macs, to_double(moved)}, {4 * macs, 2 * to_double(moved)});
    for (const tensor t : operands) save(t);
    return allocate(out_elements, p_, true);
  }

  /// Batch or layer normalization: statistics, then normalize (reads its input twice). Saves its
  /// input; the backward reads input and gradient twice and writes one gradient.
  tensor normalize(tensor x) {
    const double e = to_double(mul(elements(x), p_));
    begin("norm", {x}, {0, 3 * e}, {0, 5 * e});
    save(x);
    return allocate(elements(x), p_, true);
  }

  /// ReLU in place (torchvision's `inplace=True`): no new buffer; saves its output.
  void relu_in_place(tensor x) {
    unary_cost("relu", x);
    save(x);
  }

  /// ReLU into a new buffer, differentiated from its input (which it saves), as the zoo's VGG
  /// accounting has it: conv output and ReLU output both kept.
  tensor relu(tensor x) {
    unary_cost("relu", x);
    save(x);
    return allocate(elements(x), p_, true);
  }

  /// GELU: new buffer, saves its input.
  tensor gelu(tensor x) {
    unary_cost("gelu", x);
    save(x);
    return allocate(elements(x), p_, true);
  }

  /// Softmax (reads its input twice: max and sum, then normalize). Saves its output.
  tensor softmax(tensor x) {
    const double e = to_double(mul(elements(x), p_));
    begin("softmax", {x}, {0, 3 * e}, {0, 3 * e});
    const tensor out = allocate(elements(x), p_, true);
    save(out);
    return out;
  }

  /// Dropout: a new buffer and a one-byte mask per element, which it saves.
  tensor dropout(tensor x) {
    const double e = to_double(elements(x));
    const double moved = e * (2 * to_double(p_) + 1);
    begin("dropout", {x}, {0, moved}, {0, moved});
    const tensor out = allocate(elements(x), p_, true);
    save(allocate(elements(x), 1, false));
    return out;
  }

  /// An elementwise op that saves nothing (a copy, a scale, a mask), into a new buffer.
  tensor pointwise(tensor x) {
    const double e = to_double(mul(elements(x), p_));
    begin("pointwise", {x}, {0, 2 * e}, {0, 2 * e});
    return allocate(elements(x), p_, true);
  }

  /// `a + b` into a new buffer; saves nothing. Its backward cost stands for summing the two
  /// gradient paths where they meet.
  tensor sum(tensor a, tensor b) {
    const double e = to_double(mul(elements(a), p_));
    begin("add", {a, b}, {0, 3 * e}, {0, 3 * e});
    return allocate(elements(a), p_, true);
  }

  /// `into += other`, in place.
  void add_in_place(tensor into, tensor other) {
    const double e = to_double(mul(elements(into), p_));
    begin("add", {into, other}, {0, 3 * e}, {0, 3 * e});
  }

  /// Max pooling to `out_elements`: saves its input and the int64 index of each maximum, as
  /// PyTorch's max_pool2d_with_indices does.
  tensor max_pool(tensor x, size_type out_elements) {
    const double in = to_double(bytes(x));
    const double out = to_double(mul(out_elements, add(p_, 8)));
    begin("maxpool", {x}, {0, in + out}, {0, 2 * in + out});
    save(x);
    const tensor result = allocate(out_elements, p_, true);
    save(allocate(out_elements, 8, false));
    return result;
  }

  /// Average pooling to `out_elements`: its backward needs only shapes, so it saves nothing.
  tensor average_pool(tensor x, size_type out_elements) {
    const double moved = to_double(add(bytes(x), mul(out_elements, p_)));
    begin("avgpool", {x}, {0, moved}, {0, moved});
    return allocate(out_elements, p_, true);
  }

  /// Concatenation into a new buffer. Its backward hands out slices of the gradient (views).
  tensor concat(tensor a, tensor b) {
    const size_type out = add(elements(a), elements(b));
    begin("concat", {a, b}, {0, 2 * to_double(mul(out, p_))}, {0, 0});
    return allocate(out, p_, true);
  }

  /// An embedding lookup of `out_elements` from integer `ids`, plus what else the lookup reads
  /// (`extra_forward_bytes`) and what its backward writes into the table's gradient
  /// (`extra_backward_bytes`). Saves the ids.
  tensor gather(tensor ids, size_type out_elements, double extra_forward_bytes,
                double extra_backward_bytes) {
    const double out = to_double(mul(out_elements, p_));
    begin("embedding", {ids}, {0, to_double(bytes(ids)) + 2 * out + extra_forward_bytes},
          {0, to_double(bytes(ids)) + out + extra_backward_bytes});
    save(ids);
    return allocate(out_elements, p_, true);
  }

  // ---- the stage's costs ------------------------------------------------------------------

  /// One stage per op, in order, the last one's output being `output` (the operator granularity
  /// of a profiler). A chain passes one tensor between stages, so the activation after op j is
  /// every buffer made so far that a later op reads (a residual input, Q, K and V cross the ops
  /// between their maker and their reader; the chain counts them in each activation, and in each
  /// tape, they cross: more memory than the block's own stage); its tape adds what op j saves
  /// of its own results (a dropout mask); what it saves of its inputs is in its input
  /// activation, which the model's backward holds. Its forward overhead is what it allocates that
  /// does not outlive it; its backward needs nothing beyond its input gradient (the model's).
  [[nodiscard]] std::vector<std::pair<const char*, recorded_stage>> finish_operators(
      tensor output) const {
    auto lives_after = [&](std::size_t b, std::size_t op) {
      const buffer& buf = buffers_[b];
      if (b != 0 && buf.made_by > op) return false;
      return b == output.id || (buf.last_read != no_op && buf.last_read > op);
    };
    std::vector<std::pair<const char*, recorded_stage>> out;
    for (std::size_t op = 0; op < ops_.size(); ++op) {
      recorded_stage r;
      size_type transient = 0;
      for (std::size_t b = 0; b < buffers_.size(); ++b) {
        const bool made_here = b != 0 && buffers_[b].made_by == op;
        if (lives_after(b, op)) {
          r.costs.output_size = add(r.costs.output_size, bytes({b}));
        } else if (made_here && buffers_[b].saved_by == op) {
          r.costs.tape_size = add(r.costs.tape_size, bytes({b}));
        } else if (made_here) {
          transient = add(transient, bytes({b}));
        }
      }
      r.costs.tape_size = add(r.costs.tape_size, r.costs.output_size);
      r.costs.forward_overhead = add(transient, r.costs.tape_size - r.costs.output_size);
      r.costs.forward_time = machine_.ms(ops_[op].forward.flops, ops_[op].forward.bytes);
      r.costs.backward_time = machine_.ms(ops_[op].backward.flops, ops_[op].backward.bytes);
      r.flops = ops_[op].forward.flops;
      out.emplace_back(ops_[op].name, r);
    }
    return out;
  }

  /// The stage whose output is `output` (see the file comment for the rules).
  [[nodiscard]] recorded_stage finish(tensor output) const {
    const size_type out_bytes = bytes(output);
    size_type tape = buffers_[output.id].saved ? 0 : out_bytes;
    for (std::size_t b = 1; b < buffers_.size(); ++b)
      if (buffers_[b].saved) tape = add(tape, bytes({b}));

    const size_type plain_excess = peak_held(output, false) - out_bytes;
    const size_type recording_excess = peak_held(output, true) - tape;

    size_type largest_intermediate = 0;
    for (std::size_t b = 1; b < buffers_.size(); ++b)
      if (b != output.id && buffers_[b].differentiable)
        largest_intermediate = std::max(largest_intermediate, bytes({b}));

    recorded_stage r;
    r.costs.output_size = out_bytes;
    r.costs.tape_size = tape;
    // One overhead for both forwards, the larger: the zoo's chains give no recording overhead
    // (docs/recording-overhead.md), so they, and every result computed on them, stay as
    // the zoo defines them. `recording_excess` alone would be F_all's.
    r.costs.forward_overhead = std::max({size_type{0}, plain_excess, recording_excess});
    r.costs.backward_overhead =
        add(input_differentiable_ ? bytes(input()) : 0, largest_intermediate);
    for (const op_record& o : ops_) {
      r.costs.forward_time += machine_.ms(o.forward.flops, o.forward.bytes);
      r.costs.backward_time += machine_.ms(o.backward.flops, o.backward.bytes);
      r.flops += o.forward.flops;
    }
    return r;
  }

 private:
  static constexpr std::size_t no_op = static_cast<std::size_t>(-1);

  struct buffer {
    size_type elements = 0;
    size_type element_bytes = 0;
    bool differentiable = true;
    bool saved = false;
    std::size_t made_by = no_op;    // the op that allocates it (no_op: the stage's input)
    std::size_t last_read = no_op;  // the last op that reads it (no_op: none)
    std::size_t saved_by = no_op;   // the op that saves it for its backward
  };
  struct op_record {
    const char* name;
    op_cost forward;
    op_cost backward;
  };

  [[nodiscard]] size_type bytes(tensor t) const {
    return mul(buffers_[t.id].elements, buffers_[t.id].element_bytes);
  }

  void begin(const char* op_name, std::initializer_list<tensor> reads, op_cost forward,
             op_cost backward) {
    ops_.push_back({op_name, forward, backward});
    for (const tensor t : reads) buffers_[t.id].last_read = ops_.size() - 1;
  }
  tensor allocate(size_type elements, size_type element_bytes, bool differentiable) {
    buffers_.push_back(
        {elements, element_bytes, differentiable, false, ops_.size() - 1, no_op, no_op});
    return {buffers_.size() - 1};
  }
  void save(tensor t) {
    buffers_[t.id].saved = true;
    buffers_[t.id].saved_by = ops_.size() - 1;
  }
  void unary_cost(const char* op_name, tensor x) {
    const double e = to_double(mul(elements(x), p_));
    begin(op_name, {x}, {0, 2 * e}, {0, 3 * e});
  }

  // The most the stage's own buffers occupy at once during a forward (its input excluded: the
  // model holds it). Each buffer lives from the op that makes it to its last reader (or, unread,
  // to the end of the op that makes it); the output lives on, and so does the tape when
  // `recording`.
  [[nodiscard]] size_type peak_held(tensor output, bool recording) const {
    size_type held = 0;
    size_type peak = 0;
    for (std::size_t op = 0; op < ops_.size(); ++op) {
      for (std::size_t b = 1; b < buffers_.size(); ++b)
        if (buffers_[b].made_by == op) held = add(held, bytes({b}));
      peak = std::max(peak, held);
      for (std::size_t b = 1; b < buffers_.size(); ++b) {
        const buffer& buf = buffers_[b];
        if (b == output.id || (recording && buf.saved)) continue;
        const std::size_t dies = buf.last_read == no_op ? buf.made_by : buf.last_read;
        if (dies == op) held -= bytes({b});
      }
    }
    return peak;
  }

  roofline machine_;
  size_type p_;
  bool input_differentiable_;
  std::vector<buffer> buffers_;
  std::vector<op_record> ops_;
};

}  // namespace detail
}  // namespace remat::zoo
