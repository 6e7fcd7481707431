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
// "Offloading", for the proof; detail/transfers.hpp for the machinery).
#pragma once

#include <remat/schedule.hpp>
#include <remat/solve.hpp>
#include <remat/torch/detail/state.hpp>
#include <remat/torch/detail/transfers.hpp>
#include <remat/torch/memory.hpp>
#include <remat/torch/profile.hpp>
#include <remat/torch/stage.hpp>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
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
  remat::schedule plan;               ///< the ops run, with the model's makespan and peak
  /// What the profile predicts each op allocates (`expected_op_peaks`) and their largest
  /// (`expected_peak`): what `op_peaks` and `measured_peak` should be. `expected_peak` is the
  /// model's `plan.peak_memory`, or below it by a backward's slack (profiled_chain).
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
    p.chain.transfer = options_.transfer;
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

  /// Solves with `options` from now on (another solver, other slots); the profiles stay, the
  /// schedules kept for each budget are dropped.
  void solve_with(const remat::solve_options& options) {
    options_.solve = options;
    for (auto& [shape, e] : shapes_) e.plans.clear();
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
    r.expected_op_peaks = expected_op_peaks(e.profile, r.plan.ops);
    r.expected_peak = detail::peak_of(e.profile, r.expected_op_peaks);
    const bool moves = std::any_of(r.plan.ops.begin(), r.plan.ops.end(),
                                   [](const op& o) { return is_transfer(o.kind); });
    if (moves) {
      const detail::transfer_plan plan = detail::make_transfer_plan(e.profile.chain, r.plan.ops);
      run(e.profile, input, loss, r, &plan);
    } else {
      run(e.profile, input, loss, r, nullptr);
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
    std::map<size_type, solve_result> plans;
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

  // Gives `leaves` (the loss's graph's) that are not known parameters and have no gradient a
  // zero one, in the middle of an op: what is allocated is kept out of the op's measure.
  void define_new_gradients(const std::vector<at::Tensor>& leaves, memory_meter& m,
                            size_type& base, size_type& op_peak,
                            std::vector<at::Tensor>& defined_here) {
    for (const at::Tensor& p : leaves) {
      if (p.grad().defined()) continue;
      op_peak = std::max(op_peak, m.peak() - base);
      const size_type before = m.current();
      const_cast<at::Tensor&>(p).mutable_grad() = at::zeros_like(p);
      base += m.current() - before;
      m.reset_peak();
      defined_here.push_back(p);
      detail::add_unique(state_.parameters, p);
    }
  }

  // A materialization of a_k or t_k: what a slot of the step holds.
  struct held_tensor {
    at::Tensor value;  // a_k, or the output stage k-1 recorded (t_k's graph comes with it)
    at::Tensor input;  // t_k: the detached input stage k-1 was recorded on
    std::vector<c10::Storage> storages;  // what an offload moves (t_k: collected when recorded)
    std::vector<c10::DataPtr> host;      // an offload's host copies, until they replace the device's
  };
  using slot = std::shared_ptr<held_tensor>;

  // Runs `r.plan` (with `transfers`, the plan of a schedule that moves tensors; null otherwise).
  void run(const profiled_chain& p, const at::Tensor& input, const loss_function& loss,
           step_result& r, const detail::transfer_plan* transfers) {
    const std::size_t L = stages_.size();
    const std::vector<op>& ops = r.plan.ops;
    const std::size_t n = ops.size();
    std::vector<at::Tensor> defined_here;  // gradients this step gave a zero tensor
    for (const at::Tensor& q : state_.parameters)
      if (!q.grad().defined()) defined_here.push_back(q);
    detail::define_gradients(state_.parameters);
    for (std::size_t k = 0; k < L; ++k) detail::copy_all(state_.buffers[k], step_start_[k]);
    const detail::rng_state rng_at_start = detail::save_rng();
    std::vector<detail::rng_state> stage_rng(L);
    std::vector<char> forwarded(L, 0);
    bool backward_started = false;

    memory_meter& m = options_.memory ? *options_.memory : default_memory(input.device());
    // An offload of a_0 moves the input's storage: where that storage is more than the input
    // (a view of a batch) or is not counted by the CPU meter (allocated before it was
    // installed), the step runs on a copy of the input, allocated and counted here as a_0.
    bool copy_input = false;
    if (transfers != nullptr && transfers->offloads_input) {
      const c10::Storage& s = input.storage();
      copy_input = static_cast<size_type>(s.nbytes()) != detail::bytes_of(input) ||
                   (&m == &cpu_memory() &&
                    detail::tracking_cpu_allocator::serial_of(s.data_ptr()) == 0);
    }
    size_type base = m.current() - (copy_input ? 0 : detail::bytes_of(input));
    m.reset_peak();
    at::Tensor a0 = input;
    if (copy_input) {
      const at::NoGradGuard no_grad;
      a0 = input.clone(at::MemoryFormat::Contiguous);
    }
    std::atomic<size_type> copies_base{base};  // `base` for the copy threads
    size_type peak = 0, op_peak = 0;
    r.op_peaks.assign(n, 0);
    r.op_start_ms.assign(n, 0);
    r.op_end_ms.assign(n, 0);
    const auto t0 = std::chrono::steady_clock::now();
    try {
      // Device slots (held: non-null), host slots (a host copy), gradients.
      std::vector<slot> a(L + 1), t(L + 1), a_host(L + 1), t_host(L + 1);
      std::vector<at::Tensor> g(L + 1);
      std::vector<slot> tasks(n);  // what each transfer moves, while it runs
      a[0] = std::make_shared<held_tensor>();
      a[0]->value = a0;
      struct {
        slot in, out, tape, dropped;
      } cur;  // the compute op under way
      auto forward = [&](std::size_t k, const char* op, const at::Tensor& x) {
        at::Tensor y;
        if (!forwarded[k]) {
          stage_rng[k] = detail::save_rng();
          y = detail::in_stage(k, op, [&] { return stages_[k].forward(x); });
          forwarded[k] = 1;
        } else {  // a recomputation: same draws, buffers untouched
          const detail::rng_state now = detail::save_rng();
          detail::restore_rng(stage_rng[k]);
          detail::copy_all(state_.buffers[k], recompute_[k]);
          auto put_back = [&] {
            detail::copy_all(recompute_[k], state_.buffers[k]);
            detail::restore_rng(now);
          };
          try {
            y = detail::in_stage(k, op, [&] { return stages_[k].forward(x); });
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
      auto input_slot = [&](std::size_t k) -> const slot& { return a[k] ? a[k] : t[k]; };
      // A compute op's slots, taken when it starts (before the transfers issued after it).
      auto prepare = [&](std::size_t i) {
        const op& o = ops[i];
        const auto k = static_cast<std::size_t>(o.stage);
        cur = {};
        switch (o.kind) {
          case op_kind::forward_checkpoint:
          case op_kind::forward_none:
            cur.in = input_slot(k);
            if (o.kind == op_kind::forward_none && a[k]) cur.dropped = std::move(a[k]);
            cur.out = a[k + 1] = std::make_shared<held_tensor>();
            break;
          case op_kind::forward_all:
            cur.in = input_slot(k);
            cur.out = t[k + 1] = std::make_shared<held_tensor>();
            break;
          case op_kind::loss:
            cur.in = input_slot(L);
            if (a[L]) cur.dropped = std::move(a[L]);
            break;
          case op_kind::backward:
            cur.tape = std::move(t[k + 1]);
            if (a[k]) cur.dropped = std::move(a[k]);
            break;
          default: break;  // a wait
        }
      };
      auto execute = [&](std::size_t i) {
        const op& o = ops[i];
        const auto k = static_cast<std::size_t>(o.stage);
        switch (o.kind) {
          case op_kind::forward_checkpoint:
          case op_kind::forward_none: {
            at::Tensor y;
            {
              const at::NoGradGuard no_grad;
              y = forward(k, o.kind == op_kind::forward_none ? "F_none" : "F_ck", cur.in->value);
            }
            cur.out->value = std::move(y);
            break;
          }
          case op_kind::forward_all: {
            at::Tensor x = detail::recording_input(cur.in->value);
            at::Tensor y;
            if (transfers != nullptr && transfers->records_moved_tape[i]) {
              // Its tape moves later: what autograd saves (and the output) that this op
              // allocated is what the offload moves, and must be the whole tape.
              std::vector<at::Tensor> saved;
              const std::uint64_t since = detail::cpu_tracker().last_serial();
              {
                const detail::collect_saved collect(saved);
                y = forward(k, "F_all", x);
              }
              saved.push_back(y);
              cur.out->storages = detail::storages_since(since, saved);
              const size_type found = detail::bytes_of(cur.out->storages);
              const size_type tape = p.chain.stages[k].tape_size;
              if (found != tape)
                throw model_error(k, "F_all",
                                  "the tape t_" + std::to_string(k + 1) + " is " +
                                      std::to_string(tape) + " bytes, but its output and what "
                                      "autograd saved that this stage allocated are " +
                                      std::to_string(found) + "; it cannot be offloaded whole");
            } else {
              y = forward(k, "F_all", x);
            }
            detail::check_differentiable(k, y);
            cur.out->value = std::move(y);
            cur.out->input = std::move(x);
            break;
          }
          case op_kind::loss: {
            at::Tensor leaf = cur.in->value.detach().requires_grad_(true);
            at::Tensor l =
                detail::in_stage(model_error::no_stage, "loss", [&] { return loss(leaf); });
            detail::check_loss(l);
            define_new_gradients(detail::walk_graph(l, leaf).leaves, m, base, op_peak,
                                 defined_here);
            copies_base.store(base);
            backward_started = true;
            detail::in_stage(model_error::no_stage, "loss", [&] { l.backward(); });
            r.loss = l.item<double>();
            g[L] = leaf.grad();
            break;
          }
          case op_kind::backward: {
            backward_started = true;
            cur.tape->storages.clear();  // autograd frees saved tensors as the backward goes
            detail::in_stage(k, "B", [&] {
              ::torch::autograd::backward({cur.tape->value}, {g[k + 1]});
            });
            g[k] = cur.tape->input.requires_grad() ? cur.tape->input.grad() : at::Tensor();
            cur.tape.reset();
            g[k + 1] = at::Tensor();
            break;
          }
          default: break;  // a wait
        }
        cur = {};
      };
      auto begin_measure = [&](std::size_t i) {
        peak = std::max(peak, m.peak() - base);  // while no compute op ran (copies only)
        m.reset_peak();
        op_peak = 0;
        r.op_start_ms[i] = detail::elapsed_ms(t0);
      };
      auto end_measure = [&](std::size_t i) {
        r.op_end_ms[i] = detail::elapsed_ms(t0);
        op_peak = std::max(op_peak, m.peak() - base);
        r.op_peaks[i] = op_peak;
        peak = std::max(peak, op_peak);
        if (options_.enforce_budget && op_peak > r.budget)
          throw budget_exceeded(i, to_string(ops[i]), op_peak, r.expected_op_peaks[i], r.budget);
      };

      if (transfers == nullptr) {
        for (std::size_t i = 0; i < n; ++i) {
          begin_measure(i);
          prepare(i);
          execute(i);
          end_measure(i);
        }
        r.in_predicted_order.assign(n, 1);
      } else {
        if (std::find(transfers->records_moved_tape.begin(), transfers->records_moved_tape.end(),
                      1) != transfers->records_moved_tape.end())
          detail::install_recording_engine();
        detail::transfer_runner runner(*transfers);
        auto issue = [&](std::size_t i) {
          const op& o = ops[i];
          const auto k = static_cast<std::size_t>(o.stage);
          const bool is_tape = o.tensor == tensor_kind::tape;
          slot& device = is_tape ? t[k] : a[k];
          slot& host = is_tape ? t_host[k] : a_host[k];
          if (o.kind == op_kind::offload) {
            tasks[i] = device;
            host = std::move(device);
          } else if (o.kind == op_kind::prefetch) {
            tasks[i] = host;
            device = std::move(host);
          }
        };
        auto copy = [&](std::size_t i) {
          const op& o = ops[i];
          if (options_.before_copy) options_.before_copy(i);
          held_tensor& e = *tasks[i];
          if (o.kind == op_kind::offload) {
            if (o.tensor == tensor_kind::activation) e.storages = {e.value.storage()};
            for (const c10::Storage& s : e.storages)
              if (s.device_type() != c10::DeviceType::CPU)
                throw std::invalid_argument(
                    "remat::torch::executor: op " + std::to_string(i) + " (" + to_string(o) +
                    ") moves a tensor on " + c10::DeviceTypeName(s.device_type()) +
                    "; offloading runs on CPU tensors only (the CUDA path is future work)");
            if (detail::bytes_of(e.storages) != transfers->moved_bytes[i])
              throw model_error(
                  static_cast<std::size_t>(o.stage), to_string(o),
                  "its storage is " + std::to_string(detail::bytes_of(e.storages)) +
                      " bytes, the model's tensor " + std::to_string(transfers->moved_bytes[i]) +
                      " (a view of a larger tensor?); offloading moves whole storages");
            r.op_peaks[i] = m.current() - copies_base.load();
            e.host = detail::copy_to_host(e.storages);
          } else {
            if (detail::bytes_of(e.storages) != transfers->moved_bytes[i])
              throw std::logic_error("remat::torch::executor: op " + std::to_string(i) + " (" +
                                     to_string(o) + ") found " +
                                     std::to_string(detail::bytes_of(e.storages)) +
                                     " bytes to bring back, the model " +
                                     std::to_string(transfers->moved_bytes[i]));
            std::vector<c10::DataPtr> blocks = detail::allocate_device(e.storages);
            runner.event(i);
            r.op_peaks[i] = m.current() - copies_base.load();
            detail::install_device_copies(e.storages, blocks);
            if (o.tensor == tensor_kind::activation) e.storages.clear();
            tasks[i].reset();
          }
        };
        auto free = [&](std::size_t i) {
          held_tensor& e = *tasks[i];
          detail::install_host_copies(e.storages, e.host);
          tasks[i].reset();
        };
        runner.run(
            [&](std::size_t i) {
              begin_measure(i);
              prepare(i);
            },
            issue,
            [&](std::size_t i) {
              execute(i);
              end_measure(i);
            },
            copy, free);
        peak = std::max(peak, m.peak() - base);  // the copies after the last compute op
        r.in_predicted_order = predicted_order(*transfers, runner, ops);
        for (std::size_t i = 0; i < n; ++i)
          if (is_transfer(ops[i].kind) && ops[i].kind != op_kind::wait) {
            r.op_start_ms[i] = runner.start_ms(i);
            r.op_end_ms[i] = runner.end_ms(i);
          }
      }
      r.input_gradient = g[0];
    } catch (...) {
      if (!backward_started) {
        for (std::size_t k = 0; k < L; ++k) detail::copy_all(step_start_[k], state_.buffers[k]);
        detail::restore_rng(rng_at_start);
        for (const at::Tensor& q : defined_here) const_cast<at::Tensor&>(q).mutable_grad().reset();
      }
      throw;
    }
    r.measured_ms = detail::elapsed_ms(t0);
    r.measured_peak = peak;
  }

  // Per op: whether the transfers' memory events (a prefetch's allocation, an offload's free)
  // before it and while it ran were the model's at the predicted times; for compute-stream ops.
  static std::vector<char> predicted_order(const detail::transfer_plan& plan,
                                           const detail::transfer_runner& runner,
                                           const std::vector<op>& ops) {
    const std::size_t n = ops.size();
    std::vector<char> out(n, 0);
    for (std::size_t j = 0; j < n; ++j) {
      if (plan.streams[j] != detail::op_stream::compute) continue;
      bool same = true;
      for (std::size_t e = 0; e < n && same; ++e) {
        if (!plan.has_event[e]) continue;
        const detail::event_key& key =
            ops[e].kind == op_kind::prefetch ? plan.allocation[e] : plan.release[e];
        const std::uint64_t seq = runner.event_seq(e);
        const bool model_before = key < plan.allocation[j];
        const bool model_during = !model_before && key.time < plan.end[j];
        const bool real_before = seq != 0 && seq < runner.start_seq(j);
        const bool real_during = seq > runner.start_seq(j) && seq < runner.end_seq(j);
        same = model_before == real_before && !model_during && !real_during;
      }
      out[j] = same ? 1 : 0;
    }
    return out;
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
