// Training a libtorch model under a memory budget: remat's schedule, run through autograd.
//
//   remat::torch::executor ex(net);                  // a torch::nn::Sequential, or stages
//   for (...) {
//     optimizer.zero_grad();
//     remat::torch::step_result r = ex.step(x, loss, 512 << 20);   // forward and backward
//     optimizer.step();
//   }
//
// Each op of the schedule is run as Rotor runs it in Python:
//
//   F_ck(k), F_none(k)  stage k's forward under no-grad (F_none then drops its input a_k)
//   F_all(k)            stage k's forward on a detached copy of its input that requires grad,
//                       recording the stage's graph: the tape t_{k+1} is that graph and output
//   loss                the loss on a detached copy of a_L; its gradient is g_L
//   B(k)                backward of t_{k+1}'s output with g_{k+1}: parameter gradients accumulate
//                       as usual, and the gradient of the detached input is g_k
//
// A stage run more than once in a step behaves as if it ran once: it draws the same dropout
// masks (the CPU generator's state is saved before its first forward and put back for every
// recomputation, then the generator continues where it was), and its buffers (batch norm's
// running statistics) are updated once: a recomputation restores them afterwards.
//
// The first step at an input shape profiles the model at that shape (see profile.hpp) and every
// budget is solved once per shape; an input of a shape never seen is profiled again, or refused
// with `model_error` when `executor_options::on_new_shape` says so. Parameters' gradients are
// outside the budget: a step gives undefined ones a zero tensor before it starts measuring.
#pragma once

#include <remat/schedule.hpp>
#include <remat/solve.hpp>
#include <remat/torch/memory.hpp>
#include <remat/torch/profile.hpp>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace remat::torch {

/// What a step does with an input of a shape it has not profiled.
enum class new_shape_policy : std::uint8_t {
  profile,  ///< profile the model at that shape (its own chain and schedules)
  error,    ///< throw `model_error`: the caller profiles explicitly (`executor::profile`)
};

struct executor_options {
  /// The solver and its options; `slots` and the solver matter, the budget is per step.
  remat::solve_options solve = {};
  profile_options profiling = {};
  new_shape_policy on_new_shape = new_shape_policy::profile;
  /// Where memory is measured; `cpu_memory()` when null.
  memory_meter* memory = nullptr;
};

/// What one training step did. Memory is relative to what was allocated before the step (the
/// parameters, their gradients, the optimizer's state), plus the input a_0, as the model counts.
struct step_result {
  bool feasible = false;  ///< false: no schedule fits the budget; nothing ran, nothing changed
  size_type budget = 0;
  size_type min_feasible_budget = 0;  ///< the least budget the solver finds a schedule for
  remat::schedule plan;               ///< the ops run, with the predicted makespan and peak
  /// The peak the profile predicts for the ops (`expected_peak`: the simulator's on the profiled
  /// chain, each F_all with its recording overhead): what `measured_peak` should be, and equal to
  /// `plan.peak_memory`.
  size_type expected_peak = 0;
  double loss = 0;                  ///< the loss's value
  size_type measured_peak = 0;      ///< the most allocated while the step ran, in bytes
  std::vector<size_type> op_peaks;  ///< the most allocated while each op ran
  double measured_ms = 0;           ///< wall time of the step, milliseconds
  at::Tensor input_gradient;        ///< g_0 (undefined for an input that cannot have one)
};

class executor {
 public:
  /// The stages of a `torch::nn::Sequential`; for a range of callables, see `stages_of`.
  explicit executor(const ::torch::nn::Sequential& net, executor_options options = {})
      : executor(stages_of(net), options) {}
  explicit executor(std::vector<stage> stages, executor_options options = {})
      : stages_(std::move(stages)), options_(options), parameters_(detail::parameters_of(stages_)) {
    if (stages_.empty()) throw model_error(model_error::no_stage, "no stages to run");
  }

  /// Profiles the model at `sample`'s shape (again, if it was) with `loss`.
  const profiled_chain& profile(const at::Tensor& sample, const loss_function& loss) {
    entry& e = shapes_[tensor_shape::of(sample)];
    e.profile = remat::torch::profile(stages_, sample, loss, options_.profiling);
    e.plans.clear();
    e.profiled = true;
    return e.profile;
  }

  /// Uses `p` (a profile made earlier, of these stages) for inputs of its shape.
  void use_profile(profiled_chain p) {
    if (p.chain.length() != stages_.size() || p.outputs.size() != stages_.size())
      throw model_error(model_error::no_stage,
                        "the profile has " + std::to_string(p.chain.length()) +
                            " stages, the model " + std::to_string(stages_.size()));
    remat::validate(p.chain);
    entry& e = shapes_[p.input];
    e.profile = std::move(p);
    e.plans.clear();
    e.profiled = true;
  }

  /// The profile at `shape`, or null.
  [[nodiscard]] const profiled_chain* profile_at(const tensor_shape& shape) const {
    const auto it = shapes_.find(shape);
    return it == shapes_.end() || !it->second.profiled ? nullptr : &it->second.profile;
  }

  /// One training step of the model on `input` with `loss`, within `budget` bytes: the forward
  /// and backward of the schedule the solver finds; parameter gradients accumulate. A budget no
  /// schedule fits is a result (`feasible == false`) and runs nothing. Throws `model_error`
  /// (bad input: a new shape under `new_shape_policy::error`, a stage whose output's shape or
  /// differentiability changed since profiling) and leaves gradients, buffers and the
  /// generator as they were when the error is found before the backward starts, which is
  /// always the case for a stage that changed since profiling.
  step_result step(const at::Tensor& input, const loss_function& loss, size_type budget) {
    const tensor_shape shape = tensor_shape::of(input);
    if (profile_at(shape) == nullptr) {
      if (options_.on_new_shape == new_shape_policy::error)
        throw model_error(model_error::no_stage,
                          "the input's shape " + to_string(shape) +
                              " was not profiled (profiled: " + profiled_shapes() +
                              "); call executor::profile with it first");
      profile(input, loss);
    }
    entry& e = shapes_[shape];
    auto it = e.plans.find(budget);
    if (it == e.plans.end())
      it = e.plans.emplace(budget, remat::solve(e.profile.chain, budget, options_.solve)).first;
    const solve_result& solved = it->second;
    step_result r;
    r.feasible = solved.feasible;
    r.budget = budget;
    r.min_feasible_budget = solved.min_feasible_budget;
    r.plan = solved.plan;
    if (!solved.feasible) return r;
    r.expected_peak = expected_peak(e.profile, r.plan.ops);
    run(e.profile, input, loss, r);
    return r;
  }

  [[nodiscard]] const std::vector<stage>& stages() const noexcept { return stages_; }

 private:
  struct entry {
    bool profiled = false;
    profiled_chain profile;
    std::map<size_type, solve_result> plans;
  };
  struct shape_less {
    bool operator()(const tensor_shape& a, const tensor_shape& b) const {
      return std::tie(a.sizes, a.dtype) < std::tie(b.sizes, b.dtype);
    }
  };
  struct tape {
    at::Tensor input;   // the detached input the stage was recorded on
    at::Tensor output;  // its output, carrying the stage's graph
  };

  [[nodiscard]] std::string profiled_shapes() const {
    std::string s;
    for (const auto& [shape, e] : shapes_)
      if (e.profiled) s += (s.empty() ? "" : "; ") + to_string(shape);
    return s.empty() ? "none" : s;
  }

  // The state a step may have to put back, allocated once (before any measure) and reused.
  void prepare_snapshots() {
    if (snapshots_ready_) return;
    const at::NoGradGuard no_grad;
    for (const stage& s : stages_) {
      buffers_.push_back(detail::buffers_of(s));
      step_start_.emplace_back();
      recompute_.emplace_back();
      for (const at::Tensor& b : buffers_.back()) {
        step_start_.back().push_back(b.clone());
        recompute_.back().push_back(b.clone());
      }
    }
    snapshots_ready_ = true;
  }
  // Through `variable_data()` (Python's `.data`): putting a buffer back must not bump its
  // version, or a tape that saved it (batch norm saves its running statistics) would refuse to
  // run backward; the value put back is the one that tape saw.
  static void copy_all(const std::vector<at::Tensor>& from, const std::vector<at::Tensor>& to) {
    const at::NoGradGuard no_grad;
    for (std::size_t i = 0; i < from.size(); ++i) to[i].variable_data().copy_(from[i]);
  }

  void run(const profiled_chain& p, const at::Tensor& input, const loss_function& loss,
           step_result& r) {
    const std::size_t L = stages_.size();
    std::vector<char> had_gradient;
    for (const at::Tensor& q : parameters_) had_gradient.push_back(q.grad().defined() ? 1 : 0);
    detail::define_gradients(parameters_);
    prepare_snapshots();
    for (std::size_t k = 0; k < L; ++k) copy_all(buffers_[k], step_start_[k]);
    const detail::rng_state rng_at_start = detail::save_rng();
    std::vector<detail::rng_state> stage_rng(L);
    std::vector<char> forwarded(L, 0);
    bool backward_started = false;

    memory_meter& m = options_.memory ? *options_.memory : cpu_memory();
    const size_type base = m.current() - detail::bytes_of(input);
    size_type peak = 0;
    r.op_peaks.reserve(r.plan.ops.size());
    const auto t0 = std::chrono::steady_clock::now();
    try {
      std::vector<at::Tensor> a(L + 1), g(L + 1);
      std::vector<tape> t(L + 1);
      a[0] = input;
      auto input_of = [&](std::size_t k) -> const at::Tensor& {
        return a[k].defined() ? a[k] : t[k].output;
      };
      auto forward = [&](std::size_t k, const at::Tensor& x) {
        at::Tensor y;
        if (!forwarded[k]) {
          stage_rng[k] = detail::save_rng();
          y = stages_[k].forward(x);
          forwarded[k] = 1;
        } else {  // a recomputation: same draws, buffers untouched
          const detail::rng_state now = detail::save_rng();
          detail::restore_rng(stage_rng[k]);
          copy_all(buffers_[k], recompute_[k]);
          auto put_back = [&] {
            copy_all(recompute_[k], buffers_[k]);
            detail::restore_rng(now);
          };
          try {
            y = stages_[k].forward(x);
          } catch (...) {
            put_back();
            throw;
          }
          put_back();
        }
        detail::check_output(k, x, y);
        if (tensor_shape::of(y) != p.outputs[k])
          throw model_error(k, "its output is " + to_string(tensor_shape::of(y)) +
                                   ", profiled as " + to_string(p.outputs[k]) +
                                   "; a stage must give the same shape for the same input");
        return y;
      };
      for (const op& o : r.plan.ops) {
        m.reset_peak();
        const auto k = static_cast<std::size_t>(o.stage);
        switch (o.kind) {
          case op_kind::forward_checkpoint:
          case op_kind::forward_none: {
            at::Tensor y;
            {
              const at::NoGradGuard no_grad;
              y = forward(k, input_of(k));
            }
            a[k + 1] = std::move(y);
            if (o.kind == op_kind::forward_none) a[k] = at::Tensor();
            break;
          }
          case op_kind::forward_all: {
            at::Tensor x = detail::recording_input(input_of(k));
            at::Tensor y = forward(k, x);
            detail::check_differentiable(k, y);
            t[k + 1] = {std::move(x), std::move(y)};
            break;
          }
          case op_kind::loss: {
            at::Tensor leaf = input_of(L).detach().requires_grad_(true);
            at::Tensor l = loss(leaf);
            detail::check_loss(l);
            backward_started = true;
            l.backward();
            r.loss = l.item<double>();
            g[L] = leaf.grad();
            a[L] = at::Tensor();
            break;
          }
          case op_kind::backward: {
            backward_started = true;
            ::torch::autograd::backward({t[k + 1].output}, {g[k + 1]});
            g[k] = t[k + 1].input.requires_grad() ? t[k + 1].input.grad() : at::Tensor();
            t[k + 1] = tape{};
            g[k + 1] = at::Tensor();
            a[k] = at::Tensor();
            break;
          }
        }
        r.op_peaks.push_back(m.peak() - base);
        peak = std::max(peak, r.op_peaks.back());
      }
      r.input_gradient = g[0];
    } catch (...) {
      if (!backward_started) {
        for (std::size_t k = 0; k < L; ++k) copy_all(step_start_[k], buffers_[k]);
        detail::restore_rng(rng_at_start);
        for (std::size_t i = 0; i < parameters_.size(); ++i)
          if (!had_gradient[i]) const_cast<at::Tensor&>(parameters_[i]).mutable_grad().reset();
      }
      throw;
    }
    r.measured_ms = detail::elapsed_ms(t0);
    r.measured_peak = peak;
  }

  std::vector<stage> stages_;
  executor_options options_;
  std::vector<at::Tensor> parameters_;
  std::map<tensor_shape, entry, shape_less> shapes_;
  bool snapshots_ready_ = false;
  std::vector<std::vector<at::Tensor>> buffers_;     // every stage's buffers
  std::vector<std::vector<at::Tensor>> step_start_;  // their values when the step started
  std::vector<std::vector<at::Tensor>> recompute_;   // their values around a recomputation
};

}  // namespace remat::torch
