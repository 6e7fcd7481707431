// Measuring a libtorch model cut into stages: a `remat::chain` of real times and exact sizes.
//
//   torch::nn::Sequential net(...);                 // or any range of callables tensor -> tensor
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
//                                 once g_k exists
//   loss_time, loss_overhead      the same, for the loss's forward and backward together
//
// Sizes come from `cpu_memory()` (or the meter in the options): exact and identical from run to
// run. Parameters, their gradients and the optimizer's state are outside the budget: every size
// is relative to what is allocated when the measure starts, after the parameters' gradients
// exist (profiling gives undefined gradients a zero tensor while it runs). The profile changes
// nothing: gradients, buffers (batch norm's running statistics) and the CPU generator's state are
// restored when it ends.
#pragma once

#include <remat/chain.hpp>
#include <remat/schedule.hpp>
#include <remat/simulate.hpp>
#include <remat/torch/memory.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>

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

/// One stage: its forward, and the module holding its parameters and buffers when there is one
/// (stages of a `torch::nn::Sequential`, or module holders in a range). A stage without a module
/// is run as given: its buffers are not protected from recomputation, and parameters it reaches
/// should have their gradients allocated before a step (or the first step's measure counts them).
struct stage {
  std::function<at::Tensor(const at::Tensor&)> forward;
  std::shared_ptr<::torch::nn::Module> module;
};

/// Input a stage does not accept as given: names the stage (or none) and what is wrong.
class model_error : public std::invalid_argument {
 public:
  static constexpr std::size_t no_stage = static_cast<std::size_t>(-1);
  model_error(std::size_t stage_index, const std::string& what)
      : std::invalid_argument(
            stage_index == no_stage ? what : "stage " + std::to_string(stage_index) + ": " + what),
        stage_index_(stage_index) {}
  [[nodiscard]] std::size_t stage_index() const noexcept { return stage_index_; }

 private:
  std::size_t stage_index_;
};

/// The stages of a `torch::nn::Sequential`, one per child, in order.
inline std::vector<stage> stages_of(const ::torch::nn::Sequential& seq) {
  std::vector<stage> out;
  out.reserve(seq->size());
  for (std::size_t i = 0; i < seq->size(); ++i) {
    ::torch::nn::AnyModule any = *(seq->begin() + static_cast<std::ptrdiff_t>(i));
    out.push_back({[any](const at::Tensor& x) mutable { return any.forward(x); }, seq->ptr(i)});
  }
  return out;
}

/// A range of callables `tensor -> tensor`.
template <class R>
concept stage_range =
    std::ranges::input_range<R> && std::invocable<std::ranges::range_reference_t<R>, at::Tensor>;

/// The stages of a range of callables; module holders (`torch::nn::Linear`, a `TORCH_MODULE`)
/// keep their module.
template <stage_range R>
std::vector<stage> stages_of(R&& callables) {
  std::vector<stage> out;
  for (auto&& c : callables) {
    stage s;
    using C = std::remove_cvref_t<decltype(c)>;
    if constexpr (requires { std::shared_ptr<::torch::nn::Module>(c.ptr()); }) s.module = c.ptr();
    s.forward = [c](const at::Tensor& x) mutable { return at::Tensor(c(x)); };
    static_assert(std::is_copy_constructible_v<C>, "a stage must be copyable");
    out.push_back(std::move(s));
  }
  return out;
}

inline std::vector<stage> stages_of(std::vector<stage> stages) {
  return stages;
}

/// A loss: the scalar to minimize, from the last stage's output.
using loss_function = std::function<at::Tensor(const at::Tensor&)>;

/// The shape and type of a tensor, as profiled.
struct tensor_shape {
  std::vector<std::int64_t> sizes;
  at::ScalarType dtype = at::ScalarType::Undefined;

  static tensor_shape of(const at::Tensor& t) { return {t.sizes().vec(), t.scalar_type()}; }
  friend bool operator==(const tensor_shape&, const tensor_shape&) = default;
};

/// `[2, 3, 4] float`.
inline std::string to_string(const tensor_shape& s) {
  std::ostringstream out;
  out << '[';
  for (std::size_t i = 0; i < s.sizes.size(); ++i) out << (i ? ", " : "") << s.sizes[i];
  out << "] " << c10::toString(s.dtype);
  return out.str();
}

/// A measured chain (times in milliseconds, sizes in bytes) with the shapes it was measured at.
struct profiled_chain {
  remat::chain chain;
  tensor_shape input;
  std::vector<tensor_shape> outputs;  ///< a_{k+1} of every stage k
  /// Every stage's transient while it records (F_all): `remat::recording_overhead` of its stage
  /// (the chain's stage carries it where it differs from the no-grad forward's).
  std::vector<size_type> recording_overheads;
};

struct profile_options {
  int warmup = 1;  ///< runs of each measure before timing
  int runs = 5;    ///< timed runs of each measure; the median is kept
  /// Where sizes are measured; `cpu_memory()` when null.
  memory_meter* memory = nullptr;
};

namespace detail {

// The CPU generator's whole state (what dropout draws from), without allocating a tensor.
struct rng_state {
  at::mt19937 engine;
  c10::optional<float> next_float;
  c10::optional<double> next_double;
};

inline rng_state save_rng() {
  at::Generator g = at::detail::getDefaultCPUGenerator();  // a handle to the one generator
  const std::lock_guard<std::mutex> lock(g.mutex());
  auto* impl = g.get<at::CPUGeneratorImpl>();
  return {impl->engine(), impl->next_float_normal_sample(), impl->next_double_normal_sample()};
}

inline void restore_rng(const rng_state& s) {
  at::Generator g = at::detail::getDefaultCPUGenerator();  // a handle to the one generator
  const std::lock_guard<std::mutex> lock(g.mutex());
  auto* impl = g.get<at::CPUGeneratorImpl>();
  impl->set_engine(s.engine);
  impl->set_next_float_normal_sample(s.next_float);
  impl->set_next_double_normal_sample(s.next_double);
}

inline std::vector<at::Tensor> buffers_of(const stage& s) {
  return s.module ? s.module->buffers(/*recurse=*/true) : std::vector<at::Tensor>{};
}

inline std::vector<at::Tensor> parameters_of(const std::vector<stage>& stages) {
  std::vector<at::Tensor> out;
  for (const stage& s : stages)
    if (s.module)
      for (const at::Tensor& p : s.module->parameters(/*recurse=*/true))
        if (p.requires_grad() &&
            std::none_of(out.begin(), out.end(), [&](const at::Tensor& q) { return q.is_same(p); }))
          out.push_back(p);
  return out;
}

// Gives every parameter without a gradient a zero one: the gradients are outside the budget,
// so they must exist before a measure starts (a zero gradient is what an undefined one means).
inline void define_gradients(const std::vector<at::Tensor>& parameters) {
  for (const at::Tensor& p : parameters)
    if (!p.grad().defined()) const_cast<at::Tensor&>(p).mutable_grad() = at::zeros_like(p);
}

// Copies of the model's mutable state, put back by `restore`: gradients (or their absence),
// buffers, the generator.
class saved_state {
 public:
  saved_state(const std::vector<stage>& stages, const std::vector<at::Tensor>& parameters)
      : parameters_(parameters), rng_(save_rng()) {
    const at::NoGradGuard no_grad;
    for (const at::Tensor& p : parameters_)
      grads_.push_back(p.grad().defined() ? p.grad().clone() : at::Tensor());
    for (const stage& s : stages)
      for (const at::Tensor& b : buffers_of(s)) {
        buffers_.push_back(b);
        buffer_copies_.push_back(b.clone());
      }
  }
  void restore() {
    const at::NoGradGuard no_grad;
    for (std::size_t i = 0; i < parameters_.size(); ++i) {
      at::Tensor& g = const_cast<at::Tensor&>(parameters_[i]).mutable_grad();
      if (grads_[i].defined() && g.defined())
        g.copy_(grads_[i]);
      else
        g = grads_[i];
    }
    for (std::size_t i = 0; i < buffers_.size(); ++i) buffers_[i].copy_(buffer_copies_[i]);
    restore_rng(rng_);
  }

 private:
  std::vector<at::Tensor> parameters_;
  std::vector<at::Tensor> grads_;
  std::vector<at::Tensor> buffers_;
  std::vector<at::Tensor> buffer_copies_;
  rng_state rng_;
};

inline size_type bytes_of(const at::Tensor& t) {
  return t.defined() ? static_cast<size_type>(t.nbytes()) : 0;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// A detached copy of `a` to record a stage on: a leaf that requires grad when its type can.
inline at::Tensor recording_input(const at::Tensor& a) {
  at::Tensor x = a.detach();
  if (at::isFloatingType(x.scalar_type()) || at::isComplexType(x.scalar_type()))
    x.requires_grad_(true);
  return x;
}

inline double elapsed_ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since)
      .count();
}

inline void check_output(std::size_t k, const at::Tensor& x, const at::Tensor& y) {
  if (!y.defined()) throw model_error(k, "returns an undefined tensor");
  if (y.is_alias_of(x))
    throw model_error(k,
                      "returns its input or a view of it; remat counts each stage's output as "
                      "its own memory: merge the stage with a neighbour or return a new tensor");
}

inline void check_differentiable(std::size_t k, const at::Tensor& y) {
  if (!y.requires_grad())
    throw model_error(k, "its output (" + to_string(tensor_shape::of(y)) +
                             ") does not require grad when recorded: the stage is not "
                             "differentiable (integer output, detach, or no parameters and an "
                             "input that does not require grad)");
}

inline void check_loss(const at::Tensor& l) {
  if (!l.defined() || l.numel() != 1 || !l.requires_grad())
    throw model_error(model_error::no_stage,
                      "the loss must return a scalar that requires grad (got " +
                          (l.defined() ? to_string(tensor_shape::of(l)) : "undefined") + ")");
}

}  // namespace detail

/// Profiles `stages` (a `torch::nn::Sequential`, a range of callables, or `std::vector<stage>`)
/// on `sample`, with `loss` after the last stage. Throws `model_error` for a stage that returns
/// its input or a view of it, is not differentiable, or changes its output's shape from run to
/// run, and for a loss that is not a differentiable scalar; the model is left as it was.
template <class Stages>
profiled_chain profile(Stages&& stages, const at::Tensor& sample, const loss_function& loss,
                       const profile_options& options = {}) {
  const std::vector<stage> list = stages_of(std::forward<Stages>(stages));
  if (list.empty()) throw model_error(model_error::no_stage, "no stages to profile");
  if (options.runs < 1 || options.warmup < 0)
    throw std::invalid_argument("profile_options: runs must be >= 1 and warmup >= 0");
  memory_meter& m = options.memory ? *options.memory : cpu_memory();
  const std::vector<at::Tensor> parameters = detail::parameters_of(list);
  detail::saved_state saved(list, parameters);
  const int total = options.warmup + options.runs;

  profiled_chain out;
  out.input = tensor_shape::of(sample);
  out.chain.input_size = detail::bytes_of(sample);
  try {
    detail::define_gradients(parameters);
    at::Tensor a = sample;  // a_k
    for (std::size_t k = 0; k < list.size(); ++k) {
      remat::stage st;
      size_type recording_overhead = 0;
      std::vector<double> fw, bw;
      at::Tensor next;
      for (int r = 0; r < total; ++r) {
        // No-grad forward: the output's size and the transient memory.
        next = at::Tensor();
        const at::NoGradGuard no_grad;
        m.reset_peak();
        const size_type c0 = m.current();
        const auto t0 = std::chrono::steady_clock::now();
        at::Tensor y = list[k].forward(a);
        const double ms = detail::elapsed_ms(t0);
        const size_type c1 = m.current();
        detail::check_output(k, a, y);
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
        at::Tensor x = detail::recording_input(a);
        m.reset_peak();
        const size_type c0 = m.current();
        at::Tensor y = list[k].forward(x);
        const size_type c1 = m.current();
        detail::check_output(k, x, y);
        detail::check_differentiable(k, y);
        if (tensor_shape::of(y) != out.outputs[k])
          throw model_error(k, "its output's shape differs when recorded (" +
                                   to_string(out.outputs[k]) + ", then " +
                                   to_string(tensor_shape::of(y)) + ")");
        const size_type recording_peak = m.peak();
        at::Tensor g = at::ones_like(y);
        m.reset_peak();
        const size_type c2 = m.current();
        const auto t0 = std::chrono::steady_clock::now();
        ::torch::autograd::backward({y}, {g});
        const double ms = detail::elapsed_ms(t0);
        if (r >= options.warmup) {
          st.tape_size = std::max(st.tape_size, c1 - c0);
          recording_overhead = std::max(recording_overhead, recording_peak - c1);
          st.backward_overhead = std::max(
              st.backward_overhead, std::max<size_type>(0, m.peak() - c2 - detail::bytes_of(a)));
          bw.push_back(ms);
        }
      }
      st.forward_time = detail::median(fw);
      st.backward_time = detail::median(bw);
      st.tape_size = std::max(st.tape_size, st.output_size);
      if (recording_overhead != st.forward_overhead) st.recording_overhead = recording_overhead;
      out.chain.stages.push_back(st);
      out.recording_overheads.push_back(recording_overhead);
      a = std::move(next);
    }
    std::vector<double> lt;
    for (int r = 0; r < total; ++r) {
      at::Tensor leaf = a.detach().requires_grad_(true);
      m.reset_peak();
      const size_type c0 = m.current();
      const auto t0 = std::chrono::steady_clock::now();
      at::Tensor l = loss(leaf);
      detail::check_loss(l);
      l.backward();
      const double ms = detail::elapsed_ms(t0);
      if (r >= options.warmup) {
        out.chain.loss_overhead = std::max(
            out.chain.loss_overhead, std::max<size_type>(0, m.peak() - c0 - detail::bytes_of(a)));
        lt.push_back(ms);
      }
    }
    out.chain.loss_time = detail::median(lt);
  } catch (...) {
    saved.restore();
    throw;
  }
  saved.restore();
  remat::validate(out.chain);
  return out;
}

/// What running `ops` through autograd allocates at each op, as the profile measured the stages:
/// the simulator's op peaks on the profiled chain (an F_all with its stage's recording overhead,
/// the others with the no-grad forward's). Throws `std::invalid_argument` for an invalid
/// schedule.
inline std::vector<size_type> expected_op_peaks(const profiled_chain& p, std::span<const op> ops) {
  const replay_result r = simulate(p.chain, ops);
  if (!r.valid()) throw std::invalid_argument("expected_op_peaks: " + describe(r, ops));
  return r.op_peak;
}

/// The largest of `expected_op_peaks` (the input a_0 alone if there are no ops).
inline size_type expected_peak(const profiled_chain& p, std::span<const op> ops) {
  size_type peak = p.chain.input_size;
  for (size_type v : expected_op_peaks(p, ops)) peak = std::max(peak, v);
  return peak;
}

}  // namespace remat::torch
