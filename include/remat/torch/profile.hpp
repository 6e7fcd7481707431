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
// A stage with alternatives (stage::alternatives) is checked against its forward first
// (detail/alternatives.hpp), then each of its options is recorded and run backward as above: the
// chain's stage lists them (`options[o]`: the recording forward's median time and transient, the
// tape, the backward's time and overhead), and its own fields stay those of option 0, as for a
// stage without alternatives, which lists none.
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
#include <remat/walk.hpp>

#include <remat/torch/detail/alternatives.hpp>
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
  /// Per stage k with alternatives, `backward_slack` of B(k) for each option o of F_all(k, o)
  /// that recorded its tape (`[k][0]` is `backward_slack[k]`); empty for a stage without.
  std::vector<std::vector<size_type>> option_backward_slack;
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

// How far below the model's op peak B(k) peaks when option o recorded its tape.
inline size_type backward_slack_of(const profiled_chain& p, std::size_t k, std::size_t o) {
  if (k < p.option_backward_slack.size() && o < p.option_backward_slack[k].size())
    return p.option_backward_slack[k][o];
  return o == 0 && k < p.backward_slack.size() ? p.backward_slack[k] : 0;
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
  // What the no-grad runs of one stage measured, and the recorded runs of one of its options.
  struct no_grad_measures {
    size_type output_size = 0, overhead = 0;
    std::vector<double> ms;
  };
  struct recorded_measures {
    size_type tape_size = 0, overhead = 0;
    size_type backward_rise = 0;  // the most the backward allocates above its start
    std::vector<double> forward_ms, backward_ms;
  };

  bool measured(int run) const { return run >= options_.warmup; }  // warm-up runs fill caches

  // Stage k on its input a_k: records its costs in the chain and returns a_{k+1}.
  at::Tensor profile_stage(std::size_t k, const at::Tensor& a) {
    no_grad_measures n;
    at::Tensor next;
    for (int r = 0; r < total_; ++r) {
      next = at::Tensor();  // the previous run's output is not held while this one runs
      next = measure_no_grad(k, a, r, n);
    }
    check_alternatives(k, list_[k], state_, a);
    std::vector<recorded_measures> rec(list_[k].option_count());
    for (std::size_t o = 0; o < rec.size(); ++o)
      for (int r = 0; r < total_; ++r) measure_recorded(k, o, a, r, rec[o]);
    remat::stage st;
    st.output_size = n.output_size;
    st.forward_overhead = n.overhead;
    st.forward_time = median(n.ms);
    const remat::stage_option first = option_of(a, st, rec[0]);
    st.tape_size = first.tape_size;
    st.backward_time = first.backward_time;
    st.backward_overhead = first.backward_overhead;
    if (first.forward_overhead != st.forward_overhead)
      st.recording_overhead = first.forward_overhead;
    out_.recording_overheads.push_back(first.forward_overhead);
    out_.backward_slack.push_back(slack_of(a, rec[0]));
    out_.option_backward_slack.emplace_back();
    if (rec.size() > 1)
      for (const recorded_measures& m : rec) {
        st.options.push_back(option_of(a, st, m));
        out_.option_backward_slack.back().push_back(slack_of(a, m));
      }
    out_.chain.stages.push_back(std::move(st));
    return next;
  }

  // An option's costs from its recorded runs, with stage `st`'s output size. The model holds
  // g_k (the size of a_k) with the tape while B(k) runs: the backward's overhead is its rise
  // above that, clamped at 0 (the rest is `slack_of`).
  static remat::stage_option option_of(const at::Tensor& a, const remat::stage& st,
                                       const recorded_measures& m) {
    return {median(m.forward_ms), median(m.backward_ms), std::max(m.tape_size, st.output_size),
            m.overhead, std::max<size_type>(0, m.backward_rise - bytes_of(a))};
  }
  static size_type slack_of(const at::Tensor& a, const recorded_measures& m) {
    return std::max<size_type>(0, bytes_of(a) - m.backward_rise);
  }

  // One no-grad forward of stage k: the output's size and the transient memory.
  at::Tensor measure_no_grad(std::size_t k, const at::Tensor& a, int run, no_grad_measures& s) {
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
      s.output_size = std::max(s.output_size, c1 - c0);
      s.overhead = std::max(s.overhead, meter_.peak() - c1);
      s.ms.push_back(ms);
    }
    return y;
  }

  // One recording forward of option o of stage k, then its backward with an incoming gradient
  // of ones.
  void measure_recorded(std::size_t k, std::size_t o, const at::Tensor& a, int run,
                        recorded_measures& s) {
    at::Tensor x = recording_input(a);
    const std::string op =
        o == 0 ? "forward (recording)" : option_name(o) + ", forward (recording)";
    meter_.reset_peak();
    const size_type c0 = meter_.current();
    const auto t0 = std::chrono::steady_clock::now();
    at::Tensor y = in_stage(k, op, [&] { return list_[k].recording(o)(x); });
    const double forward_ms = elapsed_ms(t0);
    const size_type c1 = meter_.current();
    check_output(k, x, y);
    check_differentiable(k, y);
    check_shape(k, "its output's shape differs when recorded", y);
    const size_type recording_peak = meter_.peak();
    at::Tensor g = at::ones_like(y);
    meter_.reset_peak();
    const size_type c2 = meter_.current();
    const auto t1 = std::chrono::steady_clock::now();
    in_stage(k, o == 0 ? "backward" : option_name(o) + ", backward",
             [&] { ::torch::autograd::backward({y}, {g}); });
    const double backward_ms = elapsed_ms(t1);
    if (measured(run)) {
      s.tape_size = std::max(s.tape_size, c1 - c0);
      s.overhead = std::max(s.overhead, recording_peak - c1);
      s.backward_rise = std::max(s.backward_rise, meter_.peak() - c2);
      s.forward_ms.push_back(forward_ms);
      s.backward_ms.push_back(backward_ms);
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
/// output's shape from run to run, for an alternative that does not compute what its stage's
/// forward computes (detail/alternatives.hpp), and for a loss that is not a differentiable
/// scalar. The model is left as it was: gradients (the loss's parameters' included), buffers,
/// generator.
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
/// or its option's, the others with the no-grad forward's), less `backward_slack` on each B (of
/// the option that recorded its tape) and the loss. Throws
/// `std::invalid_argument` for an invalid schedule.
inline std::vector<size_type> expected_op_peaks(const profiled_chain& p, std::span<const op> ops) {
  const replay_result r = simulate(p.chain, ops);
  if (!r.valid()) throw std::invalid_argument("expected_op_peaks: " + describe(r, ops));
  std::vector<size_type> peaks = r.op_peak;
  if (p.backward_slack.size() != p.chain.length() + 1) return peaks;
  // The walk knows the option each B runs (that of the tape it consumes).
  remat::walk(p.chain, ops, [&](const walked_op& w, const std::vector<walked_value>&) {
    const auto k = static_cast<std::size_t>(w.o.stage);
    if (w.rule->cost == cost_source::backward)
      peaks[w.index] -= detail::backward_slack_of(p, k, w.option);
    else if (w.rule->cost == cost_source::loss)
      peaks[w.index] -= p.backward_slack.back();
  });
  return peaks;
}

/// The largest of `expected_op_peaks` (the input a_0 alone if there are no ops): at most the
/// model's peak (`simulate`, the solver's `peak_memory`), below it by at most the largest
/// `backward_slack`.
inline size_type expected_peak(const profiled_chain& p, std::span<const op> ops) {
  return detail::peak_of(p, expected_op_peaks(p, ops));
}

}  // namespace remat::torch
