// What a training step of `remat::torch::executor` takes and gives: the executor's options, the
// step's result, and the error of a step that goes above its budget.
#pragma once

#include <remat/chain.hpp>
#include <remat/schedule.hpp>
#include <remat/solver_options.hpp>
#include <remat/torch/memory.hpp>
#include <remat/torch/profile.hpp>

#include <ATen/ATen.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
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
  /// Where memory is measured; `default_memory(input.device())` when null (`cpu_memory()` for
  /// the CPU, `cuda_memory` for a GPU).
  memory_meter* memory = nullptr;
  /// Throw `budget_exceeded` as soon as an op's measured peak goes above the step's budget.
  bool enforce_budget = false;
  /// The link to host memory the solver may use, in bytes per millisecond each way (the
  /// profile's units): it becomes the `transfer` of every profile this executor uses, so that
  /// `solver::offload` and the offloading baselines can move activations and tapes to host
  /// memory. Zero (the default): no link, no transfers.
  remat::transfer_rates transfer = {};
  /// Called on a copy thread before each offload or prefetch, with the op's index: for tracing,
  /// and for tests that delay copies (a late copy costs time, never memory).
  std::function<void(std::size_t)> before_copy = {};
};

/// An op of a step that allocated more than the budget (`executor_options::enforce_budget`).
/// The step stops there; gradients, buffers and the generator are as they were when it started
/// if the op came before the backward began (as a `model_error` leaves them), otherwise the
/// gradients hold what the backward had accumulated.
class budget_exceeded : public std::runtime_error {
 public:
  budget_exceeded(std::size_t op_index, const std::string& op, size_type measured,
                  size_type predicted, size_type budget)
      : std::runtime_error("op " + std::to_string(op_index) + " (" + op + ") allocated " +
                           std::to_string(measured) + " bytes, above the budget of " +
                           std::to_string(budget) + " (predicted " + std::to_string(predicted) +
                           ")"),
        op_index_(op_index),
        measured_(measured) {}
  [[nodiscard]] std::size_t op_index() const noexcept { return op_index_; }
  [[nodiscard]] size_type measured() const noexcept { return measured_; }

 private:
  std::size_t op_index_;
  size_type measured_;
};

/// What one training step did. Memory is relative to what was allocated before the step (the
/// parameters, their gradients, the optimizer's state), plus the input a_0, as the model counts.
struct step_result {
  bool feasible = false;  ///< false: no schedule fits the budget; nothing ran, nothing changed
  size_type budget = 0;
  size_type min_feasible_budget = 0;  ///< the least budget the solver finds a schedule for
  remat::schedule schedule;           ///< the ops run, with the model's makespan and peak
  /// What the profile predicts each op allocates (`expected_op_peaks`) and their largest
  /// (`expected_peak`): what `op_peaks` and `measured_peak` should be. `expected_peak` is the
  /// model's `schedule.peak_memory`, or below it by a backward's slack (profiled_chain).
  std::vector<size_type> expected_op_peaks;
  size_type expected_peak = 0;
  double loss = 0;                  ///< the loss's value
  size_type measured_peak = 0;      ///< the most allocated while the step ran, in bytes
  /// The most allocated while each compute op (and wait) ran, by every thread; for an offload,
  /// what was allocated when it started, and for a prefetch, right after its allocation.
  std::vector<size_type> op_peaks;
  /// Per op: 1 where what it measures can be compared with the prediction: every op of a
  /// schedule without transfers; with transfers, a compute op (or wait) before which the
  /// prefetches allocated and the offloads freed exactly what the model has allocated and freed
  /// at its predicted start, and none of them while it ran (the timing was as predicted).
  std::vector<char> in_predicted_order;
  bool within_budget = false;  ///< `measured_peak <= budget`
  /// `op_peaks[i] == expected_op_peaks[i]` for every op `in_predicted_order` (without
  /// transfers: all of them, so the peaks are equal too).
  bool as_predicted = false;
  double measured_ms = 0;  ///< wall time of the step, milliseconds
  std::vector<double> op_start_ms, op_end_ms;  ///< when each op started and ended, ms
  at::Tensor input_gradient;  ///< g_0 (undefined for an input that cannot have one)
};

}  // namespace remat::torch
