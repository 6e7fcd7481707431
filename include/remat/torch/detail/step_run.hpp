// One training step of remat::torch::executor: a schedule run through autograd, op by op, with
// every op measured. The op's values (the tensors it reads, makes and drops) come from the walk
// over the schedule (remat/walk.hpp): `prepare` takes them, `execute` runs a compute op
// (a forward, the loss, a backward), and with transfers `issue`, `copy` and `release` move
// tensors on the three streams of detail/planning/streams.hpp.
#pragma once

#include <remat/detail/planning/streams.hpp>
#include <remat/op_table.hpp>
#include <remat/schedule.hpp>
#include <remat/torch/detail/cuda_copies.hpp>
#include <remat/torch/detail/moves.hpp>
#include <remat/torch/detail/saved.hpp>
#include <remat/torch/detail/state.hpp>
#include <remat/torch/detail/transfer_plan.hpp>
#include <remat/torch/memory.hpp>
#include <remat/torch/profile.hpp>
#include <remat/torch/stage.hpp>
#include <remat/torch/step.hpp>
#include <remat/walk.hpp>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace remat::torch::detail {

// What an executor keeps across steps and a step uses.
struct step_context {
  std::vector<stage>& stages;
  model_state& state;
  std::vector<std::vector<at::Tensor>>& step_start;  // the buffers' values when a step starts
  std::vector<std::vector<at::Tensor>>& recompute;   // their values around a recomputation
  const executor_options& options;
};

class step_run {
 public:
  // `transfers`: the plan of a schedule that moves tensors (null otherwise), for `r.schedule`.
  step_run(step_context cx, const profiled_chain& p, step_result& r, const transfer_plan* transfers)
      : cx_(cx),
        p_(p),
        r_(r),
        ops_(r.schedule.ops),
        transfers_(transfers),
        L_(cx.stages.size()),
        g_(L_ + 1),
        stage_rng_(L_),
        forwarded_(L_, 0) {
    if (transfers_ != nullptr) {
      walked_ = transfers_->walked;
      values_.resize(transfers_->values);
    } else {
      const remat::walk_failure f = remat::walk(
          p_.chain, ops_, [&](const walked_op& w, const std::vector<remat::walked_value>& v) {
            walked_.push_back(w);
            values_.resize(v.size());
          });
      if (f.error != replay_error::none)
        throw std::invalid_argument("remat::torch::executor: the schedule is invalid");
    }
    tasks_.resize(ops_.size());
  }

  // Runs the step on `input` with `loss`. On an error before the backward started, the
  // gradients, buffers and generators are put back as they were.
  void run(const at::Tensor& input, const loss_function& loss) {
    loss_ = &loss;
    for (const at::Tensor& q : cx_.state.parameters)
      if (!q.grad().defined()) defined_here_.push_back(q);
    define_gradients(cx_.state.parameters);
    for (std::size_t k = 0; k < L_; ++k) copy_all(cx_.state.buffers[k], cx_.step_start[k]);
    rng_at_start_ = save_rng();
    meter_ = cx_.options.memory ? cx_.options.memory : &default_memory(input.device());
    try {
      at::Tensor a0 = start_measuring(input);
      values_[0] = std::make_shared<held_tensor>();
      values_[0]->value = a0;
      if (transfers_ == nullptr)
        run_in_order();
      else
        run_on_streams();
      r_.input_gradient = g_[0];
    } catch (...) {
      if (!backward_started_) {
        for (std::size_t k = 0; k < L_; ++k) copy_all(cx_.step_start[k], cx_.state.buffers[k]);
        restore_rng(rng_at_start_);
        for (const at::Tensor& q : defined_here_) const_cast<at::Tensor&>(q).mutable_grad().reset();
      }
      throw;
    }
    r_.measured_ms = elapsed_ms(t0_);
    r_.measured_peak = peak_;
  }

 private:
  // A materialization of a_k or t_k: what a value of the step holds.
  struct held_tensor {
    at::Tensor value;  // a_k, or the output stage k-1 recorded (t_k's graph comes with it)
    at::Tensor input;  // t_k: the detached input stage k-1 was recorded on
    std::vector<c10::Storage> storages;  // what an offload moves (t_k: collected when recorded)
    std::vector<c10::DataPtr> host;      // an offload's host copies, until they replace the device's
  };
  using slot = std::shared_ptr<held_tensor>;

  // The baseline every measure is relative to, and a_0 (a copy, counted here, where an offload
  // of a_0 would move more than the input or a storage the CPU meter does not count).
  at::Tensor start_measuring(const at::Tensor& input) {
    bool copy_input = false;
    if (transfers_ != nullptr && transfers_->offloads_input) {
      const c10::Storage& s = input.storage();
      copy_input = static_cast<size_type>(s.nbytes()) != bytes_of(input) ||
                   (meter_ == &cpu_memory() &&
                    tracking_cpu_allocator::serial_of(s.data_ptr()) == 0);
    }
    base_ = meter_->current() - (copy_input ? 0 : bytes_of(input));
    copies_base_.store(base_);
    meter_->reset_peak();
    r_.op_peaks.assign(ops_.size(), 0);
    r_.op_start_ms.assign(ops_.size(), 0);
    r_.op_end_ms.assign(ops_.size(), 0);
    t0_ = std::chrono::steady_clock::now();
    if (!copy_input) return input;
    const at::NoGradGuard no_grad;
    return input.clone(at::MemoryFormat::Contiguous);
  }

  void run_in_order() {
    for (std::size_t i = 0; i < ops_.size(); ++i) {
      begin_measure(i);
      prepare(i);
      execute(i);
      end_measure(i);
    }
    r_.in_predicted_order.assign(ops_.size(), 1);
  }

  void run_on_streams() {
    const std::vector<char>& moved = transfers_->records_moved_tape;
    if (std::find(moved.begin(), moved.end(), 1) != moved.end()) install_recording_engine();
    const c10::Device device = values_[0]->value.device();
#if defined(REMAT_TORCH_CUDA)
    if (device.is_cuda()) cuda_ = std::make_unique<cuda_copies>(device, ops_.size());
#endif
    if (!device.is_cpu() && !on_cuda())
      throw model_error(model_error::no_stage,
                        "the schedule offloads tensors on " + device.str() +
                            "; remat::torch offloads CPU tensors, and CUDA tensors where "
                            "libtorch has CUDA");
    remat::detail::stream_runner runner(transfers_->program);
    runner_ = &runner;
    runner.run(
        [&](std::size_t i) {
          begin_measure(i);
          prepare(i);
        },
        [&](std::size_t i) { issue(i); },
        [&](std::size_t i) {
          execute(i);
#if defined(REMAT_TORCH_CUDA)
          if (cuda_) cuda_->computed(i);
#endif
          end_measure(i);
        },
        [&](std::size_t i) { copy(i); }, [&](std::size_t i) { release(i); });
    peak_ = std::max(peak_, meter_->peak() - base_);  // the copies after the last compute op
    r_.in_predicted_order = predicted_order(runner);
    for (std::size_t i = 0; i < ops_.size(); ++i)
      if (ops_[i].kind == op_kind::offload || ops_[i].kind == op_kind::prefetch) {
        r_.op_start_ms[i] = runner.start(i) * 1000;
        r_.op_end_ms[i] = runner.end(i) * 1000;
      }
    runner_ = nullptr;
  }

  // A compute-stream op's values, taken when it starts (before the transfers issued after it).
  void prepare(std::size_t i) {
    const walked_op& w = walked_[i];
    cur_ = {};
    if (is_transfer(w.o.kind)) return;  // a wait
    cur_.in = values_[w.read(operand::input)];
    for (std::size_t j = 0; j < w.frees.size(); ++j) {
      if (w.frees[j] == remat::no_value) continue;
      const operand what = w.rule->frees[j];
      if (what == operand::tape_above) cur_.tape = std::move(values_[w.frees[j]]);
      if (what == operand::activation_input) cur_.dropped = std::move(values_[w.frees[j]]);
    }
    const operand made = w.rule->makes;
    if (made == operand::activation_above || made == operand::tape_above)
      cur_.out = values_[w.made] = std::make_shared<held_tensor>();
  }

  void execute(std::size_t i) {
    const op& o = ops_[i];
    const auto k = static_cast<std::size_t>(o.stage);
    switch (o.kind) {
      case op_kind::forward_checkpoint:
      case op_kind::forward_none: {
        at::Tensor y;
        {
          const at::NoGradGuard no_grad;
          y = forward(k, o.kind == op_kind::forward_none ? "F_none" : "F_ck", cur_.in->value);
        }
        cur_.out->value = std::move(y);
        break;
      }
      case op_kind::forward_all: record(i, k); break;
      case op_kind::loss: run_loss(); break;
      case op_kind::backward: run_backward(k); break;
      default: break;  // a wait
    }
    cur_ = {};
  }

  // Stage k's forward (`stage::recording(option)` where it records); a recomputation draws the
  // same random numbers and leaves the buffers as they were.
  at::Tensor forward(std::size_t k, const std::string& op, const at::Tensor& x,
                     std::size_t option = 0) {
    const auto& f = cx_.stages[k].recording(option);
    at::Tensor y;
    if (!forwarded_[k]) {
      stage_rng_[k] = save_rng();
      y = in_stage(k, op, [&] { return f(x); });
      forwarded_[k] = 1;
    } else {
      const rng_state now = save_rng();
      restore_rng(stage_rng_[k]);
      copy_all(cx_.state.buffers[k], cx_.recompute[k]);
      auto put_back = [&] {
        copy_all(cx_.recompute[k], cx_.state.buffers[k]);
        restore_rng(now);
      };
      try {
        y = in_stage(k, op, [&] { return f(x); });
      } catch (...) {
        put_back();
        throw;
      }
      put_back();
    }
    check_output(k, x, y);
    if (tensor_shape::of(y) != p_.outputs[k])
      throw model_error(k, "its output is " + to_string(tensor_shape::of(y)) + ", profiled as " +
                               to_string(p_.outputs[k]) +
                               "; a stage must give the same shape for the same input");
    return y;
  }

  // F_all(k, o): stage k recorded on a detached input with option o. Where its tape moves later,
  // what autograd saves (and the output) that this op allocated is what the offload moves, and
  // must be the whole tape.
  void record(std::size_t i, std::size_t k) {
    at::Tensor x = recording_input(cur_.in->value);
    const std::size_t o = ops_[i].option;
    const std::string op = o == 0 ? "F_all" : "F_all, " + option_name(o);
    at::Tensor y;
    if (transfers_ != nullptr && transfers_->records_moved_tape[i]) {
      std::vector<at::Tensor> saved;
      const std::uint64_t since = cpu_tracker().last_serial();
      {
        const collect_saved collect(saved);
        y = forward(k, op, x, o);
      }
      saved.push_back(y);
      cur_.out->storages = x.is_cpu() ? storages_since(since, saved)
                                      : storages_except(saved, known_to(x));
      const size_type found = bytes_of(cur_.out->storages);
      const size_type tape = option_at(p_.chain.stages[k], o).tape_size;
      if (found != tape)
        throw model_error(k, op,
                          "the tape t_" + std::to_string(k + 1) + " is " + std::to_string(tape) +
                              " bytes, but its output and what autograd saved that this stage "
                              "allocated are " +
                              std::to_string(found) + "; it cannot be offloaded whole");
    } else {
      y = forward(k, op, x, o);
    }
    check_differentiable(k, y);
    cur_.out->value = std::move(y);
    cur_.out->input = std::move(x);
  }

  void run_loss() {
    at::Tensor leaf = cur_.in->value.detach().requires_grad_(true);
    at::Tensor l = in_stage(model_error::no_stage, "loss", [&] { return (*loss_)(leaf); });
    check_loss(l);
    define_new_gradients(walk_graph(l, leaf).leaves);
    copies_base_.store(base_);
    backward_started_ = true;
    in_stage(model_error::no_stage, "loss", [&] { l.backward(); });
    r_.loss = l.item<double>();
    g_[L_] = leaf.grad();
  }

  void run_backward(std::size_t k) {
    backward_started_ = true;
    cur_.tape->storages.clear();  // autograd frees saved tensors as the backward goes
    in_stage(k, "B", [&] { ::torch::autograd::backward({cur_.tape->value}, {g_[k + 1]}); });
    g_[k] = cur_.tape->input.requires_grad() ? cur_.tape->input.grad() : at::Tensor();
    cur_.tape.reset();
    g_[k + 1] = at::Tensor();
  }

  // Gives `leaves` (the loss's graph's) that are not known parameters and have no gradient a
  // zero one, in the middle of an op: what is allocated is kept out of the op's measure.
  void define_new_gradients(const std::vector<at::Tensor>& leaves) {
    for (const at::Tensor& q : leaves) {
      if (q.grad().defined()) continue;
      op_peak_ = std::max(op_peak_, meter_->peak() - base_);
      const size_type before = meter_->current();
      const_cast<at::Tensor&>(q).mutable_grad() = at::zeros_like(q);
      base_ += meter_->current() - before;
      meter_->reset_peak();
      defined_here_.push_back(q);
      add_unique(cx_.state.parameters, q);
    }
  }

  // A transfer's tensor, handed over in issue order on the compute thread: an offload takes the
  // device copy's value to the host copy's, a prefetch the host copy's to the new device copy's.
  void issue(std::size_t i) {
    const walked_op& w = walked_[i];
    if (w.o.kind == op_kind::wait) return;
    const remat::value_id from =
        w.read(w.o.kind == op_kind::offload ? operand::device_copy : operand::host_copy);
    tasks_[i] = values_[from];
    values_[w.made] = std::move(values_[from]);
  }

  // On a copy thread: an offload copies the storages to host memory (they are swapped in by
  // `release`); a prefetch allocates device blocks and copies back.
  void copy(std::size_t i) {
    const op& o = ops_[i];
    if (cx_.options.before_copy) cx_.options.before_copy(i);
    held_tensor& e = *tasks_[i];
    const size_type expected = transfers_->moved_bytes[i];
    if (o.kind == op_kind::offload) {
      if (o.tensor == tensor_kind::activation) e.storages = {e.value.storage()};
      if (bytes_of(e.storages) != expected)
        throw model_error(static_cast<std::size_t>(o.stage), to_string(o),
                          "its storage is " + std::to_string(bytes_of(e.storages)) +
                              " bytes, the model's tensor " + std::to_string(expected) +
                              " (a view of a larger tensor?); offloading moves whole storages");
      r_.op_peaks[i] = meter_->current() - copies_base_.load();
      e.host = on_cuda() ? to_host_cuda(i, e) : copy_to_host(e.storages);
      return;
    }
    if (bytes_of(e.storages) != expected)
      throw std::logic_error("remat::torch::executor: op " + std::to_string(i) + " (" +
                             to_string(o) + ") found " + std::to_string(bytes_of(e.storages)) +
                             " bytes to bring back, the model " + std::to_string(expected));
    if (on_cuda()) {
#if defined(REMAT_TORCH_CUDA)
      cuda_->to_device(e.storages);
#endif
      runner_->mark(i);
      r_.op_peaks[i] = meter_->current() - copies_base_.load();
    } else {
      std::vector<c10::DataPtr> blocks = allocate_device(e.storages);
      runner_->mark(i);
      r_.op_peaks[i] = meter_->current() - copies_base_.load();
      install_device_copies(e.storages, blocks);
    }
    if (o.tensor == tensor_kind::activation) e.storages.clear();
    tasks_[i].reset();
  }

  // An offload's copy on the GPU, once the op that made the tensor has run.
  std::vector<c10::DataPtr> to_host_cuda([[maybe_unused]] std::size_t i,
                                         [[maybe_unused]] held_tensor& e) {
#if defined(REMAT_TORCH_CUDA)
    const std::size_t from = transfers_->moved_from[i];
    const bool prefetched = from != transfer_plan::none && ops_[from].kind == op_kind::prefetch;
    return cuda_->to_host(e.storages, from == transfer_plan::none ? cuda_copies::input : from,
                          prefetched);
#else
    return {};
#endif
  }

  // What a recording forward on `x` did not allocate: x, the parameters, the buffers.
  [[nodiscard]] std::vector<at::Tensor> known_to(const at::Tensor& x) const {
    std::vector<at::Tensor> known = cx_.state.parameters;
    known.push_back(x);
    for (const std::vector<at::Tensor>& bs : cx_.state.buffers)
      known.insert(known.end(), bs.begin(), bs.end());
    return known;
  }

  [[nodiscard]] bool on_cuda() const noexcept {
#if defined(REMAT_TORCH_CUDA)
    return cuda_ != nullptr;
#else
    return false;
#endif
  }

  // Offload i's copy and the compute ops before it that read the tensor have ended: the
  // storages now point at the host copies, and the metered blocks are freed.
  void release(std::size_t i) {
    held_tensor& e = *tasks_[i];
    install_host_copies(e.storages, e.host);
    tasks_[i].reset();
  }

  void begin_measure(std::size_t i) {
    peak_ = std::max(peak_, meter_->peak() - base_);  // while no compute op ran (copies only)
    meter_->reset_peak();
    op_peak_ = 0;
    r_.op_start_ms[i] = elapsed_ms(t0_);
  }

  void end_measure(std::size_t i) {
    r_.op_end_ms[i] = elapsed_ms(t0_);
    op_peak_ = std::max(op_peak_, meter_->peak() - base_);
    r_.op_peaks[i] = op_peak_;
    peak_ = std::max(peak_, op_peak_);
    if (cx_.options.enforce_budget && op_peak_ > r_.budget)
      throw budget_exceeded(i, to_string(ops_[i]), op_peak_, r_.expected_op_peaks[i], r_.budget);
  }

  // Per op: whether the transfers' memory events (a prefetch's allocation, an offload's release)
  // before it and while it ran were the model's at the predicted times; for compute-stream ops.
  [[nodiscard]] std::vector<char> predicted_order(
      const remat::detail::stream_runner& runner) const {
    const transfer_plan& plan = *transfers_;
    const std::size_t n = ops_.size();
    std::vector<char> out(n, 0);
    for (std::size_t j = 0; j < n; ++j) {
      if (plan.program.streams[j] != stream::compute) continue;
      bool same = true;
      for (std::size_t e = 0; e < n && same; ++e) {
        if (!plan.has_event[e]) continue;
        const event_key& key =
            ops_[e].kind == op_kind::prefetch ? plan.allocation[e] : plan.release[e];
        const std::uint64_t seq = runner.mark_seq(e);
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

  step_context cx_;
  const profiled_chain& p_;
  step_result& r_;
  const std::vector<op>& ops_;
  const transfer_plan* transfers_;
  const loss_function* loss_ = nullptr;
  std::size_t L_;
  std::vector<walked_op> walked_;
  std::vector<slot> values_;  // per value of the walk: the tensor, while held
  std::vector<slot> tasks_;   // per transfer: what it moves, while it runs
  std::vector<at::Tensor> g_;
  struct {
    slot in, out, tape, dropped;
  } cur_;  // the compute op under way
  std::vector<at::Tensor> defined_here_;  // gradients this step gave a zero tensor
  rng_state rng_at_start_;
  std::vector<rng_state> stage_rng_;
  std::vector<char> forwarded_;
  bool backward_started_ = false;
  memory_meter* meter_ = nullptr;
  size_type base_ = 0, peak_ = 0, op_peak_ = 0;
  std::atomic<size_type> copies_base_{0};  // `base_` for the copy threads
  std::chrono::steady_clock::time_point t0_;
  remat::detail::stream_runner* runner_ = nullptr;
#if defined(REMAT_TORCH_CUDA)
  std::unique_ptr<cuda_copies> cuda_;  // a step that offloads CUDA tensors
#endif
};

}  // namespace remat::torch::detail
