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
//   F_all(k, o)         stage k's forward on a detached copy of its input that requires grad,
//                       recording the stage's graph: the tape t_{k+1} is that graph and output;
//                       option o > 0 records with the stage's alternatives[o - 1] instead
//   loss                the loss on a detached copy of a_L; its gradient is g_L
//   B(k)                backward of t_{k+1}'s output with g_{k+1} (through whichever option
//                       recorded it): parameter gradients accumulate as usual, and the gradient
//                       of the detached input is g_k
//
// A stage run more than once in a step behaves as if it ran once: it draws the same dropout
// masks (the generators' state, the CPU's and every GPU's, is saved before its first forward and
// put back for every recomputation, then the generators continue where they were), and its
// buffers (batch norm's running statistics) are updated once: a recomputation restores them
// afterwards.
//
// The first step at an input shape profiles the model at that shape (see profile.hpp) and every
// budget is solved once per shape; an input of a shape never seen is profiled again, or refused
// with `model_error` when `executor_options::on_new_shape` says so. Parameters' gradients are
// outside the budget: a step gives undefined ones a zero tensor before it starts measuring, for
// every parameter the stages and the loss reach (stage.hpp), declared or not.
//
// Every step measures what each op allocates and compares it with the profile's prediction:
// `step_result::within_budget` and `as_predicted` say how it went, and
// `executor_options::enforce_budget` makes an op that goes above the budget an error.
//
// Offloading (`executor_options::transfer`, a link in bytes per ms, and an offloading solver):
//
//   O(k,a|t)   on the device-to-host copy thread: copies a_k's storage (t_k: its output's and
//              those of the tensors autograd saved that its recording allocated) to unmetered
//              host memory, then points the storages there once the copy and the compute ops
//              before it that read the tensor have ended: the metered blocks are freed
//   P(k,a|t)   on the host-to-device copy thread: allocates metered blocks, copies back, points
//              the storages at them
//   W(k,a|t)   the compute thread waits for that offload's free
//
// Each op that allocates (a compute op, a prefetch) also waits for every op whose frees the
// model (remat::simulate at the predicted times) puts before its allocation, so whatever the
// copies and kernels take, the memory in use never exceeds the schedule's peak (docs/libtorch.md,
// "Offloading", for the proof; detail/step_run.hpp and detail/transfer_plan.hpp for the
// machinery).
#pragma once

#include <remat/schedule.hpp>
#include <remat/solve.hpp>
#include <remat/torch/detail/state.hpp>
#include <remat/torch/detail/step_run.hpp>
#include <remat/torch/detail/transfer_plan.hpp>
#include <remat/torch/memory.hpp>
#include <remat/torch/profile.hpp>
#include <remat/torch/stage.hpp>
#include <remat/torch/step.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <cstddef>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace remat::torch {

class executor {
 public:
  /// The stages of anything `stages_of` takes: a `torch::nn::Sequential`, a scripted
  /// `torch.nn.Sequential`, a range of stages, TorchScript modules, module holders or callables.
  template <class Stages>
    requires requires(Stages&& s) {
      { stages_of(std::forward<Stages>(s)) } -> std::same_as<std::vector<stage>>;
    }
  explicit executor(Stages&& stages, executor_options options = {})
      : stages_(stages_of(std::forward<Stages>(stages))), options_(std::move(options)) {
    if (stages_.empty()) throw model_error(model_error::no_stage, "no stages to run");
    for (const double bw : {options_.transfer.offload_bandwidth,
                            options_.transfer.prefetch_bandwidth})
      if (!(bw >= 0) || bw - bw != 0)
        throw std::invalid_argument("executor_options::transfer: a bandwidth must be finite and "
                                    ">= 0 (bytes per ms), not " + std::to_string(bw));
  }

  /// Profiles the model at `sample`'s shape (again, if it was) with `loss`.
  const profiled_chain& profile(const at::Tensor& sample, const loss_function& loss) {
    detail::check_options(options_.profiling);
    discover(sample, loss);
    profiled_chain p = detail::profile_stages(stages_, state_, sample, loss, options_.profiling);
    p.chain.transfer = options_.transfer;
    remat::validate(p.chain);
    entry& e = shapes_[tensor_shape::of(sample)];
    e.profile = std::move(p);
    e.solves.clear();
    e.profiled = true;
    return e.profile;
  }

  /// Uses `p` (a profile made earlier, of these stages) for inputs of its shape.
  void use_profile(profiled_chain p) {
    if (p.chain.length() != stages_.size() || p.outputs.size() != stages_.size())
      throw model_error(model_error::no_stage,
                        "the profile has " + std::to_string(p.chain.length()) +
                            " stages, the model " + std::to_string(stages_.size()));
    for (std::size_t k = 0; k < stages_.size(); ++k)
      if (remat::option_count(p.chain.stages[k]) > stages_[k].option_count())
        throw model_error(
            k, "the profile lists " + std::to_string(remat::option_count(p.chain.stages[k])) +
                   " options, the stage has " + std::to_string(stages_[k].option_count()) +
                   " (forward and its alternatives)");
    p.chain.transfer = options_.transfer;
    remat::validate(p.chain);
    entry& e = shapes_[p.input];
    e.profile = std::move(p);
    e.solves.clear();
    e.profiled = true;
  }

  /// The profile at `shape`, or null.
  [[nodiscard]] const profiled_chain* profile_at(const tensor_shape& shape) const {
    const auto it = shapes_.find(shape);
    return it == shapes_.end() || !it->second.profiled ? nullptr : &it->second.profile;
  }

  /// Solves with `options` from now on (another solver, other slots); the profiles stay, the
  /// schedules kept for each budget are dropped.
  void solve_with(const remat::solve_options& options) {
    options_.solve = options;
    for (auto& [shape, e] : shapes_) e.solves.clear();
  }

  /// One training step of the model on `input` with `loss`, within `budget` bytes: the forward
  /// and backward of the schedule the solver finds; parameter gradients accumulate. A budget no
  /// schedule fits is a result (`feasible == false`) and runs nothing. Throws `model_error`
  /// (bad input: a new shape under `new_shape_policy::error`, a stage that fails in libtorch or
  /// whose output's shape or differentiability changed since profiling) and `budget_exceeded`
  /// (`enforce_budget`), and leaves gradients, buffers and the generator as they were when the
  /// error is found before the backward starts, which is always the case for a stage that
  /// changed since profiling.
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
    discover(input, loss);
    entry& e = shapes_[shape];
    if (input.device() != e.profile.device)
      throw model_error(model_error::no_stage,
                        "the input is on " + input.device().str() + ", the profile at its shape " +
                            to_string(shape) + " was measured on " + e.profile.device.str());
    auto it = e.solves.find(budget);
    if (it == e.solves.end())
      it = e.solves.emplace(budget, remat::solve(e.profile.chain, budget, options_.solve)).first;
    const solve_result& solved = it->second;
    step_result r;
    r.feasible = solved.feasible;
    r.budget = budget;
    r.min_feasible_budget = solved.min_feasible_budget;
    r.schedule = solved.schedule;
    if (!solved.feasible) return r;
    r.expected_op_peaks = expected_op_peaks(e.profile, r.schedule.ops);
    r.expected_peak = detail::peak_of(e.profile, r.expected_op_peaks);
    const bool moves = std::any_of(r.schedule.ops.begin(), r.schedule.ops.end(),
                                   [](const op& o) { return is_transfer(o.kind); });
    const detail::step_context cx{stages_, state_, step_start_, recompute_, options_};
    if (moves) {
      const detail::transfer_plan plan =
          detail::make_transfer_plan(e.profile.chain, r.schedule.ops);
      detail::step_run(cx, e.profile, r, &plan).run(input, loss);
    } else {
      detail::step_run(cx, e.profile, r, nullptr).run(input, loss);
    }
    r.within_budget = r.measured_peak <= budget;
    r.as_predicted = true;
    for (std::size_t i = 0; i < r.op_peaks.size(); ++i)
      if (r.in_predicted_order[i] && r.op_peaks[i] != r.expected_op_peaks[i])
        r.as_predicted = false;
    return r;
  }

  [[nodiscard]] const std::vector<stage>& stages() const noexcept { return stages_; }

 private:
  struct entry {
    bool profiled = false;
    profiled_chain profile;
    std::map<size_type, solve_result> solves;  // by budget: the schedules the steps run
  };
  struct shape_less {
    bool operator()(const tensor_shape& a, const tensor_shape& b) const {
      return std::tie(a.sizes, a.dtype) < std::tie(b.sizes, b.dtype);
    }
  };
  [[nodiscard]] std::string profiled_shapes() const {
    std::string s;
    for (const auto& [shape, e] : shapes_)
      if (e.profiled) s += (s.empty() ? "" : "; ") + to_string(shape);
    return s.empty() ? "none" : s;
  }

  // Finds, once, what the stages and the loss own (parameters, buffers), and allocates the
  // copies a step may need to put buffers back; all of it before any measure.
  void discover(const at::Tensor& sample, const loss_function& loss) {
    if (discovered_) return;
    state_ = detail::discover(stages_, sample, loss);
    const at::NoGradGuard no_grad;
    for (const std::vector<at::Tensor>& bs : state_.buffers) {
      step_start_.push_back(detail::copies_of(bs));
      recompute_.push_back(detail::copies_of(bs));
    }
    discovered_ = true;
  }

  std::vector<stage> stages_;
  executor_options options_;
  std::map<tensor_shape, entry, shape_less> shapes_;
  bool discovered_ = false;
  detail::model_state state_;                        // parameters, every stage's buffers
  std::vector<std::vector<at::Tensor>> step_start_;  // the buffers' values when the step started
  std::vector<std::vector<at::Tensor>> recompute_;   // their values around a recomputation
};

}  // namespace remat::torch
