// The merged costs of a block of consecutive stages, built one stage at a time from the block's
// end towards its start, so that the boundary search (boundaries.hpp) prices every block ending
// at a stage in O(1) per start, with the same arithmetic `remat::coarsen` uses.
//
// Block [s, e) of the fine chain (stages s .. e-1) becomes one coarse stage. With x, xb, ft, bt
// the fine chain's sizes as in docs/model.md, fa its recording-forward overheads
// (docs/recording-overhead.md; fa = ft where a stage gives none), T = xb[s+1] + ... + xb[e] and,
// for s <= k < e, tail(k) = xb[k+2] + ... + xb[e] (the block's tapes past t_{k+1}), its costs are:
//
//   output  x[e]                         the last stage's output
//   tape    T                            what F_all(s), ..., F_all(e-1) leave: every fine tape
//   fw, bw  sums of the stages' times
//   ft      max(0, x[s+1] + ft[s] - x[e],
//                  max_{s<k<e} x[k] + x[k+1] + ft[k] - x[e])
//   fa      max(0, x[s+1] + fa[s] - x[e],
//                  max_{s<k<e} x[k] + x[k+1] + fa[k] - x[e])   (ft's formula with fa: equal to
//                  ft when fa = ft, so coarsening a chain without recording overheads makes
//                  none; max_k fa[k] - tail(k) would be tighter)
//   bt      max(0, x[s+1] + bt[s] - tail(s) - x[e],
//                  max_{s<k<e} x[k] + x[k+1] + bt[k] - tail(k) - x[s] - x[e])
//
// Why these are safe (docs/model.md's op table). A coarse op expands to fine ops: F_none and F_all
// of the block to F_none (resp. F_all) of each of its stages in order, F_ck of the block to F_ck(s)
// then F_none(s+1 .. e-1) (a checkpoint keeps the block's input only), B of the block to
// B(e-1), ..., B(s), loss to loss. Between coarse ops the fine chain holds exactly the image of
// what the coarse one holds (a_b -> a_s, g_b -> g_s, t_b -> every tape of the block before it),
// so every input a fine op needs is there and no output it makes is already held; the memory
// held between ops is the same. Let R be what the coarse chain holds before the op.
//
// * F_none / F_ck: the coarse peak is R + x[e] + ft. F(s) peaks at R + x[s+1] + ft[s]; F(k),
//   k > s, at most at R + x[k] + x[k+1] + ft[k] (a_k is dropped after it, and a_s may already be
//   gone). Both are <= R + x[e] + ft by the first two terms of ft.
// * F_all: the coarse peak is R + T + fa. F_all(k) peaks at R + (xb[s+1] + ... + xb[k+1]) +
//   fa[k] = R + T - tail(k) + fa[k]. For k < e-1, tail(k) >= xb[e] >= x[e], and fa >= fa[k] -
//   x[e] by its first two terms (x[k+1] >= 0, x[k] >= 0); for k = e-1, tail(k) = 0 and
//   fa >= fa[e-1] by the same terms (x[e] cancels).
// * B: the coarse peak is R + x[s] + bt (R holds g_e, the whole tape and the block's input).
//   Before B(k) the fine chain holds R - x[e] + x[k+1] - tail(k) (g_{k+1} instead of g_e, the
//   tapes past t_{k+1} gone), so B(k) peaks at R - x[e] + x[k+1] - tail(k) + x[k] + bt[k]:
//   <= R + x[s] + bt by bt's terms (for k = s the x[s] cancels).
// * loss: the same op on both chains.
//
// Hence a coarse schedule within budget M expands to a valid fine schedule within M, and its
// time is the coarse one (the same sums, up to the rounding of their order; exact when the times
// are dyadic). A one-stage block keeps its stage's costs exactly: coarsening to L blocks is the
// identity.
#pragma once

#include <remat/chain.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace remat::detail {

// The sizes of one block, grown towards the chain's start by `prepend`. Every figure stays below
// the chain's total memory (validated to fit in 63 bits), so no sum here overflows.
class block_builder {
 public:
  // An empty block ending at fine stage `end` (exclusive) of `c`, a validated chain.
  constexpr block_builder(const chain& c, std::int32_t end) : c_(&c), end_(end), start_(end) {}

  // Makes stage start() - 1 the block's first stage.
  constexpr void prepend() {
    const std::int32_t k = --start_;
    const stage& s = c_->stages[idx(k)];
    const size_type xk = x(k);
    const size_type xk1 = s.output_size;
    const size_type tail = tape_;  // the tapes of stages k+1 .. e-1: xb[k+2] + ... + xb[e]
    tape_ += s.tape_size;
    // k as the first stage: its own terms; the stages after it are now inner stages.
    forward_first_ = xk1 + s.forward_overhead;
    const size_type fa = s.recording_overhead.value_or(s.forward_overhead);
    recording_first_ = xk1 + fa;
    recording_inner_now_ = has_inner_ ? recording_inner_ : lowest;
    backward_first_ = xk1 + s.backward_overhead - tail;
    backward_inner_now_ = has_inner_ ? backward_inner_ - xk : lowest;
    forward_inner_now_ = has_inner_ ? forward_inner_ : lowest;
    // For blocks starting before k, k is an inner stage.
    forward_inner_ = std::max(forward_inner_, xk + xk1 + s.forward_overhead);
    recording_inner_ = std::max(recording_inner_, xk + xk1 + fa);
    backward_inner_ = std::max(backward_inner_, xk + xk1 + s.backward_overhead - tail);
    has_inner_ = true;
  }

  [[nodiscard]] constexpr std::int32_t start() const noexcept { return start_; }
  [[nodiscard]] constexpr std::int32_t end() const noexcept { return end_; }
  [[nodiscard]] constexpr size_type output_size() const { return x(end_); }
  [[nodiscard]] constexpr size_type input_size() const { return x(start_); }
  [[nodiscard]] constexpr size_type tape_size() const noexcept { return tape_; }
  [[nodiscard]] constexpr size_type forward_overhead() const {
    const size_type out = output_size();
    return std::max({size_type{0}, forward_first_ - out, forward_inner_now_ - out});
  }
  [[nodiscard]] constexpr size_type recording_overhead() const {
    const size_type out = output_size();
    return std::max({size_type{0}, recording_first_ - out, recording_inner_now_ - out});
  }
  [[nodiscard]] constexpr size_type backward_overhead() const {
    const size_type out = output_size();
    return std::max({size_type{0}, backward_first_ - out, backward_inner_now_ - out});
  }
  // The least total memory in which the block alone runs as one coarse stage: holding its input,
  // F_all then B with its output's gradient held (docs/model.md's base case, input included). No
  // coarse chain holding this block fits a smaller budget.
  [[nodiscard]] constexpr size_type need() const {
    const size_type in = input_size();
    const size_type out = output_size();
    return in +
           std::max(out + tape_ + recording_overhead(), in + out + tape_ + backward_overhead());
  }

 private:
  static constexpr size_type lowest = std::numeric_limits<size_type>::min() / 4;
  static constexpr std::size_t idx(std::int32_t k) noexcept { return static_cast<std::size_t>(k); }
  [[nodiscard]] constexpr size_type x(std::int32_t k) const {
    return k == 0 ? c_->input_size : c_->stages[idx(k - 1)].output_size;
  }

  const chain* c_;
  std::int32_t end_;
  std::int32_t start_;
  size_type tape_ = 0;
  size_type forward_first_ = lowest;        // x[s+1] + ft[s]
  size_type backward_first_ = lowest;       // x[s+1] + bt[s] - tail(s)
  size_type forward_inner_ = lowest;        // max x[k] + x[k+1] + ft[k] over stages k >= s
  size_type backward_inner_ = lowest;       // max x[k] + x[k+1] + bt[k] - tail(k) over k >= s
  size_type forward_inner_now_ = lowest;    // the same over k > s
  size_type recording_first_ = lowest;      // x[s+1] + fa[s]
  size_type recording_inner_ = lowest;      // max x[k] + x[k+1] + fa[k] over stages k >= s
  size_type recording_inner_now_ = lowest;  // the same over k > s
  size_type backward_inner_now_ = lowest;   // max over k > s, minus x[s]
  bool has_inner_ = false;
};

}  // namespace remat::detail
