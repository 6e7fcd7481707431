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

// Profiles a list of stages and the loss, one measure at a time: each stage's no-grad forward
// (output size, F_none's transient, forward time), its recording forward and backward (tape,
// F_all's transient, backward overhead and time), then the loss. The model's state is put back
// when `run` ends, whether it returns or throws.
class chain_profiler {
 public:
  chain_profiler(const std::vector<stage>& list, const model_state& state,
                 const at::Tensor& sample, const loss_function& loss,
                 const profile_options& options)
      : list_(list),
        state_(state),
        sample_(sample),
        loss_(loss),
        options_(options),
        meter_(options.memory ? *options.memory : default_memory(sample.device())),
        total_(options.warmup + options.runs) {}

  profiled_chain run() {
    saved_state saved(state_);
    out_.input = tensor_shape::of(sample_);
    out_.device = sample_.device();
    out_.chain.input_size = bytes_of(sample_);
    try {
      define_gradients(state_.parameters);
      at::Tensor a = sample_;  // a_k
      for (std::size_t k = 0; k < list_.size(); ++k) a = profile_stage(k, a);
      profile_loss(a);
    } catch (...) {
      saved.restore();
      throw;
    }
    saved.restore();
    remat::validate(out_.chain);
    return std::move(out_);
  }

 private:
  // What the runs of one stage measured, before they become the stage's costs.
  struct stage_measures {
    remat::stage costs;
    size_type recording_overhead = 0;
    size_type backward_rise = 0;  // the most the backward allocates above its start
    std::vector<double> forward_ms, backward_ms;
  };

  bool measured(int run) const { return run >= options_.warmup; }  // warm-up runs fill caches

  // Stage k on its input a_k: records its costs in the chain and returns a_{k+1}.
  at::Tensor profile_stage(std::size_t k, const at::Tensor& a) {
    stage_measures s;
    at::Tensor next;
    for (int r = 0; r < total_; ++r) {
      next = at::Tensor();  // the previous run's output is not held while this one runs
      next = measure_no_grad(k, a, r, s);
    }
    for (int r = 0; r < total_; ++r) measure_recorded(k, a, r, s);
    remat::stage& st = s.costs;
    // The model holds g_k (the size of a_k) with the tape while B(k) runs: the overhead is the
    // rise above that, clamped at 0 (backward_slack).
    st.backward_overhead = std::max<size_type>(0, s.backward_rise - bytes_of(a));
    out_.backward_slack.push_back(std::max<size_type>(0, bytes_of(a) - s.backward_rise));
    st.forward_time = median(s.forward_ms);
    st.backward_time = median(s.backward_ms);
    st.tape_size = std::max(st.tape_size, st.output_size);
    if (s.recording_overhead != st.forward_overhead) st.recording_overhead = s.recording_overhead;
    out_.chain.stages.push_back(st);
    out_.recording_overheads.push_back(s.recording_overhead);
    return next;
  }

  // One no-grad forward of stage k: the output's size and the transient memory.
  at::Tensor measure_no_grad(std::size_t k, const at::Tensor& a, int run, stage_measures& s) {
    const at::NoGradGuard no_grad;
    meter_.reset_peak();
    const size_type c0 = meter_.current();
    const auto t0 = std::chrono::steady_clock::now();
    at::Tensor y = in_stage(k, "forward (no grad)", [&] { return list_[k].forward(a); });
    const double ms = elapsed_ms(t0);
    const size_type c1 = meter_.current();
    check_output(k, a, y);
    if (run == 0) out_.outputs.push_back(tensor_shape::of(y));
    check_shape(k, "its output's shape changes from run to run", y);
    if (measured(run)) {
      s.costs.output_size = std::max(s.costs.output_size, c1 - c0);
      s.costs.forward_overhead = std::max(s.costs.forward_overhead, meter_.peak() - c1);
      s.forward_ms.push_back(ms);
    }
    return y;
  }

  // One recording forward of stage k, then its backward with an incoming gradient of ones.
  void measure_recorded(std::size_t k, const at::Tensor& a, int run, stage_measures& s) {
    at::Tensor x = recording_input(a);
    meter_.reset_peak();
    const size_type c0 = meter_.current();
    at::Tensor y = in_stage(k, "forward (recording)", [&] { return list_[k].forward(x); });
    const size_type c1 = meter_.current();
    check_output(k, x, y);
    check_differentiable(k, y);
    check_shape(k, "its output's shape differs when recorded", y);
    const size_type recording_peak = meter_.peak();
    at::Tensor g = at::ones_like(y);
    meter_.reset_peak();
    const size_type c2 = meter_.current();
    const auto t0 = std::chrono::steady_clock::now();
    in_stage(k, "backward", [&] { ::torch::autograd::backward({y}, {g}); });
    const double ms = elapsed_ms(t0);
    if (measured(run)) {
      s.costs.tape_size = std::max(s.costs.tape_size, c1 - c0);
      s.recording_overhead = std::max(s.recording_overhead, recording_peak - c1);
      s.backward_rise = std::max(s.backward_rise, meter_.peak() - c2);
      s.backward_ms.push_back(ms);
    }
  }

  // The loss's forward and backward together, on a_L.
  void profile_loss(const at::Tensor& a) {
    std::vector<double> ms;
    size_type rise = 0;
    for (int r = 0; r < total_; ++r) {
      at::Tensor leaf = a.detach().requires_grad_(true);
      meter_.reset_peak();
      const size_type c0 = meter_.current();
      const auto t0 = std::chrono::steady_clock::now();
      in_stage(model_error::no_stage, "loss", [&] {
        at::Tensor l = loss_(leaf);
        check_loss(l);
        l.backward();
      });
      const double elapsed = elapsed_ms(t0);
      if (measured(r)) {
        rise = std::max(rise, meter_.peak() - c0);
        ms.push_back(elapsed);
      }
    }
    out_.chain.loss_overhead = std::max<size_type>(0, rise - bytes_of(a));
    out_.backward_slack.push_back(std::max<size_type>(0, bytes_of(a) - rise));
    out_.chain.loss_time = median(ms);
  }

  void check_shape(std::size_t k, const char* what, const at::Tensor& y) const {
    if (tensor_shape::of(y) != out_.outputs[k])
      throw model_error(k, std::string(what) + " (" + to_string(out_.outputs[k]) + ", then " +
                               to_string(tensor_shape::of(y)) + ")");
  }

  const std::vector<stage>& list_;
  const model_state& state_;
  const at::Tensor& sample_;
  const loss_function& loss_;
  const profile_options& options_;
  memory_meter& meter_;
  int total_;
  profiled_chain out_;
};

// Profiles `stages` on `sample` with `loss`, their state found beforehand (`discover`).
inline profiled_chain profile_stages(const std::vector<stage>& list, const model_state& state,
                                     const at::Tensor& sample, const loss_function& loss,
                                     const profile_options& options) {
  return chain_profiler(list, state, sample, loss, options).run();
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
