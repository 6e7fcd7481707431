// Measuring a libtorch model cut into stages: a `remat::chain` of real times and exact sizes.
//
//   torch::nn::Sequential net(...);                 // or anything stages_of takes (stage.hpp)
//   auto loss = [&](const at::Tensor& y) { return torch::mse_loss(y, target); };
//   remat::torch::profiled_chain p = remat::torch::profile(net, sample, loss);
//   remat::solve_result r = remat::solve(p.chain, budget);
//
// What is measured, per stage k, with the stage's input a_k from the previous stage:
//
//   forward_time, backward_time   milliseconds; `warmup` runs, then the median of `runs`
//   output_size                   bytes a no-grad forward leaves allocated (a_{k+1})
//   tape_size                     bytes a recording forward leaves allocated: the output and
//                                 every tensor autograd saved for backward (t_{k+1})
//   forward_overhead              the most allocated during a no-grad forward (F_none, F_ck)
//                                 above what it leaves allocated
//   recording_overhead            the same for a recording forward (F_all), above the tape it
//                                 leaves; set where it differs from forward_overhead
//                                 (docs/recording-overhead.md). A no-grad forward frees each
//                                 intermediate after its last reader and may hold as a
//                                 transient what a recording forward keeps in its tape (a
//                                 transformer block's MLP hidden), so the two differ.
//   backward_overhead             the most allocated during the backward above what is held
//                                 once g_k exists; 0 where the backward peaks below that, the
//                                 difference kept in `backward_slack` (the model's sizes are
//                                 non-negative; over-predicting one op's peak is safe)
//   loss_time, loss_overhead      the same, for the loss's forward and backward together
//
// Sizes come from the meter of the sample's device (`default_memory`: `cpu_memory()`, exact and
// identical from run to run, or the CUDA caching allocator's statistics), or the meter in the
// options; sizes the profile computes rather than measures (the input's, a gradient's) are in
// that allocator's units (`allocated_size`: 512-byte blocks on CUDA). Parameters, their
// gradients and the optimizer's state are outside the budget: every size is relative to what is
// allocated when the measure starts, after the parameters' gradients exist (profiling gives
// undefined gradients a zero tensor while it runs). The profile changes nothing: first it
// records each stage once to find what the model owns (stage.hpp: every parameter the stages'
// and the loss's graphs reach, the buffers they declare), and when it ends it puts back their
// gradients, the buffers and the generators' state (CPU, and CUDA's where libtorch has it).
#pragma once

#include <remat/chain.hpp>
#include <remat/schedule.hpp>
#include <remat/simulate.hpp>
#include <remat/torch/memory.hpp>

#include <remat/torch/detail/state.hpp>
#include <remat/torch/stage.hpp>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <ranges>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace remat::torch {

/// A measured chain (times in milliseconds, sizes in bytes) with the shapes it was measured at.
struct profiled_chain {
  remat::chain chain;
  tensor_shape input;
  c10::Device device = c10::kCPU;  ///< where it was measured: the sample's device
  std::vector<tensor_shape> outputs;  ///< a_{k+1} of every stage k
  /// Every stage's transient while it records (F_all): `remat::recording_overhead` of its stage
  /// (the chain's stage carries it where it differs from the no-grad forward's).
  std::vector<size_type> recording_overheads;
  /// Per stage k, and the loss at index L: how far below the model's op peak the backward B(k)
  /// (the loss) really peaks. The model's overheads cannot be negative, so a backward that frees
  /// part of its tape before its input gradient exists (a classifier head whose tape is larger
  /// than that gradient) is counted with overhead 0: the model over-predicts that op's peak by
  /// this much, which is safe. `expected_op_peaks` subtracts it.
  std::vector<size_type> backward_slack;
};

struct profile_options {
  int warmup = 1;  ///< runs of each measure before timing
  int runs = 5;    ///< timed runs of each measure; the median is kept
  /// Where sizes are measured; `default_memory(sample.device())` when null (`cpu_memory()` for
  /// the CPU, `cuda_memory` for a GPU).
  memory_meter* memory = nullptr;
};

namespace detail {

// What `t`'s data counts on its device's meter (allocated_size: CUDA rounds to 512 bytes).
inline size_type bytes_of(const at::Tensor& t) {
  return t.defined() ? allocated_size(t.device(), t.nbytes()) : 0;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

inline void check_options(const profile_options& options) {
  if (options.runs < 1 || options.warmup < 0)
    throw std::invalid_argument("profile_options: runs must be >= 1 and warmup >= 0");
}

// The largest of `op_peaks`, or the input a_0 alone.
inline size_type peak_of(const profiled_chain& p, const std::vector<size_type>& op_peaks) {
  size_type peak = p.chain.input_size;
  for (size_type v : op_peaks) peak = std::max(peak, v);
  return peak;
}

inline double elapsed_ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since)
      .count();
}

// Profiles `stages` on `sample` with `loss`, their state found beforehand (`discover`).
inline profiled_chain profile_stages(const std::vector<stage>& list, const model_state& state,
                                     const at::Tensor& sample, const loss_function& loss,
                                     const profile_options& options) {
  memory_meter& m = options.memory ? *options.memory : default_memory(sample.device());
  saved_state saved(state);
  const int total = options.warmup + options.runs;

  profiled_chain out;
  out.input = tensor_shape::of(sample);
  out.device = sample.device();
  out.chain.input_size = bytes_of(sample);
  try {
    define_gradients(state.parameters);
    at::Tensor a = sample;  // a_k
    for (std::size_t k = 0; k < list.size(); ++k) {
      remat::stage st;
      size_type recording_overhead = 0;
      size_type backward_rise = 0;  // the most the backward allocates above its start
      std::vector<double> fw, bw;
      at::Tensor next;
      for (int r = 0; r < total; ++r) {
        // No-grad forward: the output's size and the transient memory.
        next = at::Tensor();
        const at::NoGradGuard no_grad;
        m.reset_peak();
        const size_type c0 = m.current();
        const auto t0 = std::chrono::steady_clock::now();
        at::Tensor y = in_stage(k, "forward (no grad)", [&] { return list[k].forward(a); });
        const double ms = elapsed_ms(t0);
        const size_type c1 = m.current();
        check_output(k, a, y);
        if (r == 0) out.outputs.push_back(tensor_shape::of(y));
        if (tensor_shape::of(y) != out.outputs[k])
          throw model_error(k, "its output's shape changes from run to run (" +
                                   to_string(out.outputs[k]) + ", then " +
                                   to_string(tensor_shape::of(y)) + ")");
        if (r >= options.warmup) {  // warm-up runs may fill caches: not measured
          st.output_size = std::max(st.output_size, c1 - c0);
          st.forward_overhead = std::max(st.forward_overhead, m.peak() - c1);
          fw.push_back(ms);
        }
        next = std::move(y);
      }
      for (int r = 0; r < total; ++r) {
        // Recording forward, then backward with an incoming gradient of ones.
        at::Tensor x = recording_input(a);
        m.reset_peak();
        const size_type c0 = m.current();
        at::Tensor y = in_stage(k, "forward (recording)", [&] { return list[k].forward(x); });
        const size_type c1 = m.current();
        check_output(k, x, y);
        check_differentiable(k, y);
        if (tensor_shape::of(y) != out.outputs[k])
          throw model_error(k, "its output's shape differs when recorded (" +
                                   to_string(out.outputs[k]) + ", then " +
                                   to_string(tensor_shape::of(y)) + ")");
        const size_type recording_peak = m.peak();
        at::Tensor g = at::ones_like(y);
        m.reset_peak();
        const size_type c2 = m.current();
        const auto t0 = std::chrono::steady_clock::now();
        in_stage(k, "backward", [&] { ::torch::autograd::backward({y}, {g}); });
        const double ms = elapsed_ms(t0);
        if (r >= options.warmup) {
          st.tape_size = std::max(st.tape_size, c1 - c0);
          recording_overhead = std::max(recording_overhead, recording_peak - c1);
          backward_rise = std::max(backward_rise, m.peak() - c2);
          bw.push_back(ms);
        }
      }
      // The model holds g_k (the size of a_k) with the tape while B(k) runs: the overhead is
      // the rise above that, clamped at 0 (backward_slack).
      st.backward_overhead = std::max<size_type>(0, backward_rise - bytes_of(a));
      out.backward_slack.push_back(std::max<size_type>(0, bytes_of(a) - backward_rise));
      st.forward_time = median(fw);
      st.backward_time = median(bw);
      st.tape_size = std::max(st.tape_size, st.output_size);
      if (recording_overhead != st.forward_overhead) st.recording_overhead = recording_overhead;
      out.chain.stages.push_back(st);
      out.recording_overheads.push_back(recording_overhead);
      a = std::move(next);
    }
    std::vector<double> lt;
    size_type loss_rise = 0;
    for (int r = 0; r < total; ++r) {
      at::Tensor leaf = a.detach().requires_grad_(true);
      m.reset_peak();
      const size_type c0 = m.current();
      const auto t0 = std::chrono::steady_clock::now();
      in_stage(model_error::no_stage, "loss", [&] {
        at::Tensor l = loss(leaf);
        check_loss(l);
        l.backward();
      });
      const double ms = elapsed_ms(t0);
      if (r >= options.warmup) {
        loss_rise = std::max(loss_rise, m.peak() - c0);
        lt.push_back(ms);
      }
    }
    out.chain.loss_overhead = std::max<size_type>(0, loss_rise - bytes_of(a));
    out.backward_slack.push_back(std::max<size_type>(0, bytes_of(a) - loss_rise));
    out.chain.loss_time = median(lt);
  } catch (...) {
    saved.restore();
    throw;
  }
  saved.restore();
  remat::validate(out.chain);
  return out;
}

}  // namespace detail

/// Profiles `stages` (anything `stages_of` takes: a `torch::nn::Sequential`, a scripted
/// `torch.nn.Sequential`, a range of stages, TorchScript modules, module holders or callables)
/// on `sample`, with `loss` after the last stage. Throws `model_error` for a stage that fails in
/// libtorch (with libtorch's message), returns its input or a view of it, is not
/// differentiable, records batch norm whose statistics cannot be protected, or changes its
/// output's shape from run to run, and for a loss that is not a differentiable scalar. The
/// model is left as it was: gradients (the loss's parameters' included), buffers, generator.
template <class Stages>
profiled_chain profile(Stages&& stages, const at::Tensor& sample, const loss_function& loss,
                       const profile_options& options = {}) {
  const std::vector<stage> list = stages_of(std::forward<Stages>(stages));
  if (list.empty()) throw model_error(model_error::no_stage, "no stages to profile");
  detail::check_options(options);
  return detail::profile_stages(list, detail::discover(list, sample, loss), sample, loss,
                                options);
}

/// What running `ops` through autograd allocates at each op, as the profile measured the stages:
/// the simulator's op peaks on the profiled chain (an F_all with its stage's recording overhead,
/// the others with the no-grad forward's), less `backward_slack` on each B and the loss. Throws
/// `std::invalid_argument` for an invalid schedule.
inline std::vector<size_type> expected_op_peaks(const profiled_chain& p, std::span<const op> ops) {
  const replay_result r = simulate(p.chain, ops);
  if (!r.valid()) throw std::invalid_argument("expected_op_peaks: " + describe(r, ops));
  std::vector<size_type> peaks = r.op_peak;
  if (p.backward_slack.size() == p.chain.length() + 1)
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].kind == op_kind::backward)
        peaks[i] -= p.backward_slack[static_cast<std::size_t>(ops[i].stage)];
      else if (ops[i].kind == op_kind::loss)
        peaks[i] -= p.backward_slack.back();
    }
  return peaks;
}

/// The largest of `expected_op_peaks` (the input a_0 alone if there are no ops): at most the
/// model's peak (`simulate`, the solver's `peak_memory`), below it by at most the largest
/// `backward_slack`.
inline size_type expected_peak(const profiled_chain& p, std::span<const op> ops) {
  return detail::peak_of(p, expected_op_peaks(p, ops));
}

}  // namespace remat::torch
