// What the libtorch executor needs to run a schedule with offloads and prefetches
// (docs/offload.md) through autograd: the tensors a recording forward saves, moving a storage's
// bytes between the metered allocator and unmetered host memory, the waits that make the budget
// a guarantee whatever the timing, and the three streams that run the ops.
//
// * Saved tensors. A tape t_{k+1} is stage k's recorded graph: its output and what autograd saved.
//   libtorch 1.13's C++ API has no public hook for saved tensors (at::SavedTensorDefaultHooks is
//   Python's), but every SavedVariable asks the default engine for hooks
//   (`Engine::get_default_saved_variable_hooks`, virtual), and the engine can be replaced
//   (`set_default_engine_stub`, as Python installs its own). `recording_engine` is libtorch's
//   engine but for that one function: while remat records a stage whose tape will move, it gives
//   each saved variable hooks that keep the tensor (as libtorch does without hooks) and report it.
// * Moving. An offload copies a storage's bytes to host memory (plain aligned `new`, which no
//   meter counts) and then swaps the storage's data pointer to that copy, so every tensor and
//   view that shares the storage (the saved input of the next stage's tape, the user's input
//   tensor for a_0) follows, and the metered block is freed; a prefetch allocates a block from
//   the storage's own allocator, copies back and swaps again. Values never change.
// * Waits (`transfer_plan`): see docs/libtorch.md, "Offloading", for the rule and its proof.
// * Streams (`transfer_runner`): compute ops on the caller's thread, offloads and prefetches on
//   one copy thread per direction, as a GPU's two copy engines.
#pragma once

#include <remat/chain.hpp>
#include <remat/schedule.hpp>
#include <remat/simulate.hpp>
#include <remat/torch/memory.hpp>
#include <remat/torch/stage.hpp>

#include <ATen/ATen.h>
#include <c10/core/Storage.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/saved_variable_hooks.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace remat::torch::detail {

// ---------------------------------------------------------------------------------------------
// Saved tensors

// Where the hooks report saved tensors on this thread; null: no hooks (libtorch's behaviour).
inline thread_local std::vector<at::Tensor>* saved_sink = nullptr;

class reporting_hooks final : public ::torch::autograd::SavedVariableHooks {
 public:
  explicit reporting_hooks(std::vector<at::Tensor>* sink) : sink_(sink) {}
  void call_pack_hook(const at::Tensor& t) override {
    // Detached: an output saved by its own node keeps no reference to that node (no cycle).
    saved_ = t.detach();
    sink_->push_back(saved_);
  }
  at::Tensor call_unpack_hook() override { return saved_; }

 private:
  std::vector<at::Tensor>* sink_;
  at::Tensor saved_;
};

class recording_engine final : public ::torch::autograd::Engine {
 public:
  std::unique_ptr<::torch::autograd::SavedVariableHooks> get_default_saved_variable_hooks()
      override {
    if (saved_sink == nullptr) return nullptr;
    return std::make_unique<reporting_hooks>(saved_sink);
  }
  static ::torch::autograd::Engine& get() {
    static recording_engine* const engine = new recording_engine();  // never destroyed
    return *engine;
  }
};

// Makes `recording_engine` the default engine, once for the process. Refused where another
// engine was installed (Python's, in a process that embeds it).
inline void install_recording_engine() {
  static const bool installed = [] {
    using ::torch::autograd::Engine;
    if (&Engine::get_default_engine() != &Engine::get_base_engine())
      throw std::runtime_error(
          "remat::torch::executor: offloading a tape needs libtorch's C++ autograd engine, and "
          "another one is installed (Python's?)");
    ::torch::autograd::set_default_engine_stub(&recording_engine::get);
    return true;
  }();
  (void)installed;
}

// Reports the tensors autograd saves on this thread while it lives.
class collect_saved {
 public:
  explicit collect_saved(std::vector<at::Tensor>& into) : previous_(saved_sink) {
    saved_sink = &into;
  }
  collect_saved(const collect_saved&) = delete;
  collect_saved& operator=(const collect_saved&) = delete;
  ~collect_saved() { saved_sink = previous_; }

 private:
  std::vector<at::Tensor>* previous_;
};

// The storages of `tensors` that the CPU tracker allocated after serial `since`, each once.
inline std::vector<c10::Storage> storages_since(std::uint64_t since,
                                                const std::vector<at::Tensor>& tensors) {
  std::vector<c10::Storage> out;
  for (const at::Tensor& t : tensors) {
    if (!t.defined() || !t.has_storage()) continue;
    const c10::Storage& s = t.storage();
    if (s.nbytes() == 0 || tracking_cpu_allocator::serial_of(s.data_ptr()) <= since) continue;
    const bool seen = std::any_of(out.begin(), out.end(), [&](const c10::Storage& o) {
      return o.unsafeGetStorageImpl() == s.unsafeGetStorageImpl();
    });
    if (!seen) out.push_back(s);
  }
  return out;
}

inline size_type bytes_of(const std::vector<c10::Storage>& storages) {
  size_type n = 0;
  for (const c10::Storage& s : storages) n += static_cast<size_type>(s.nbytes());
  return n;
}

// ---------------------------------------------------------------------------------------------
// Moving storages

inline constexpr std::size_t host_alignment = 64;

inline void delete_host_block(void* p) { ::operator delete(p, std::align_val_t{host_alignment}); }

// Host memory no meter counts.
inline c10::DataPtr host_block(std::size_t bytes) {
  void* p = ::operator new(bytes, std::align_val_t{host_alignment});
  return {p, p, &delete_host_block, c10::Device(c10::DeviceType::CPU)};
}

// Copies each storage's bytes to a new host block (the device copies stay).
inline std::vector<c10::DataPtr> copy_to_host(const std::vector<c10::Storage>& storages) {
  std::vector<c10::DataPtr> host;
  host.reserve(storages.size());
  for (const c10::Storage& s : storages) {
    host.push_back(host_block(s.nbytes()));
    std::memcpy(host.back().get(), s.data(), s.nbytes());
  }
  return host;
}

// Points each storage at its host copy: the device blocks are freed.
inline void install_host_copies(const std::vector<c10::Storage>& storages,
                                std::vector<c10::DataPtr>& host) {
  for (std::size_t i = 0; i < storages.size(); ++i)
    storages[i].unsafeGetStorageImpl()->set_data_ptr_noswap(std::move(host[i]));
  host.clear();
}

// Allocates a device block for each storage from its allocator.
inline std::vector<c10::DataPtr> allocate_device(const std::vector<c10::Storage>& storages) {
  std::vector<c10::DataPtr> blocks;
  blocks.reserve(storages.size());
  for (const c10::Storage& s : storages) {
    c10::Allocator* a = s.unsafeGetStorageImpl()->allocator();
    blocks.push_back((a != nullptr ? a : c10::GetCPUAllocator())->allocate(s.nbytes()));
  }
  return blocks;
}

// Copies each storage's (host) bytes into its block and points the storage at it: the host
// blocks are freed.
inline void install_device_copies(const std::vector<c10::Storage>& storages,
                                  std::vector<c10::DataPtr>& blocks) {
  for (std::size_t i = 0; i < storages.size(); ++i) {
    std::memcpy(blocks[i].get(), storages[i].data(), storages[i].nbytes());
    storages[i].unsafeGetStorageImpl()->set_data_ptr_noswap(std::move(blocks[i]));
  }
  blocks.clear();
}

// ---------------------------------------------------------------------------------------------
// The plan: waits, and the model's order of memory events

// An instant of the model's memory events, ordered as remat::simulate orders them: by time;
// at one time, frees of what was allocated earlier (phase 0) before the ops starting there in
// issue order (phase 1, `order`), each op's allocation (sub 0) before the frees of an op of
// duration 0 (sub 1).
struct event_key {
  double time = 0;
  int phase = 0;
  std::size_t order = 0;
  int sub = 0;
  friend bool operator<(const event_key& a, const event_key& b) {
    return std::tie(a.time, a.phase, a.order, a.sub) < std::tie(b.time, b.phase, b.order, b.sub);
  }
};

enum class op_stream : std::uint8_t { compute, d2h, h2d };

inline op_stream op_stream_of(op_kind k) {
  return k == op_kind::offload ? op_stream::d2h : k == op_kind::prefetch ? op_stream::h2d
                                                                        : op_stream::compute;
}

struct transfer_plan {
  static constexpr std::size_t none = static_cast<std::size_t>(-1);
  struct wait {
    std::size_t op;
    bool freed;  // wait for the offload's free (its copy and its readers ended), not its end
  };
  std::vector<op_stream> streams;             // per op
  std::vector<std::vector<wait>> waits;    // per op: every op it waits for, all issued earlier
  std::vector<std::size_t> free_after;     // per O: the last compute op before it reading the copy
  std::vector<size_type> moved_bytes;      // per O and P: the model's size of the tensor
  std::vector<char> records_moved_tape;    // per F_all: its tape is offloaded later
  bool offloads_input = false;             // an O moves a_0
  // The model's times and memory events: when each op allocates, when a compute op frees (its
  // end), when a prefetch allocates and an offload frees.
  std::vector<double> start, end;
  std::vector<event_key> allocation, release;  // per op
  std::vector<char> has_event;                 // per O and P: allocates or frees bytes
};

// The plan of a valid schedule `ops` on `c` (which has a link if `ops` has transfers).
//
// The rule: an op that allocates (a compute op or a prefetch) waits for every op whose frees
// come, in the model's order at the predicted times, before its allocation; for an offload's
// free, that is the offload and the compute ops before it that read the copy (`freed`).
inline transfer_plan make_transfer_plan(const chain& c, std::span<const op> ops) {
  const replay_result r = remat::simulate(c, ops);
  if (!r.valid())
    throw std::invalid_argument("remat::torch::executor: the schedule is invalid: " +
                                describe(r, ops));
  constexpr std::size_t none = transfer_plan::none;
  const std::size_t n = ops.size();
  const auto L = c.length();
  auto x = [&](std::size_t k) { return k == 0 ? c.input_size : c.stages[k - 1].output_size; };
  auto xb = [&](std::size_t k) { return c.stages[k - 1].tape_size; };

  transfer_plan p;
  p.streams.resize(n);
  p.waits.resize(n);
  p.free_after.assign(n, none);
  p.moved_bytes.assign(n, 0);
  p.records_moved_tape.assign(n, 0);
  p.start = r.start;
  p.end = r.end;
  p.allocation.resize(n);
  p.release.resize(n);
  p.has_event.assign(n, 0);

  struct tensor {
    bool held = false, host = false;
    std::size_t producer = none;     // the compute op or prefetch that made the device copy
    std::size_t recorded_by = none;  // tapes: the F_all that recorded it
    double allocated_at = -1;        // when its device copy was allocated
    double last_read = 0;            // the end of its producer and of every compute op reading it
    std::size_t last_reader = none;  // the last compute op reading it (its producer included)
    std::size_t offload = none;      // the O that made its host copy
  };
  std::vector<tensor> a(L + 1), t(L + 1);
  a[0].held = true;
  auto input_of = [&](std::size_t k) -> tensor& { return a[k].held ? a[k] : t[k]; };

  for (std::size_t i = 0; i < n; ++i) {
    const op& o = ops[i];
    p.streams[i] = op_stream_of(o.kind);
    const auto k = static_cast<std::size_t>(o.stage);
    const double s = r.start[i], e = r.end[i];
    const bool zero = !(s < e);
    p.allocation[i] = {s, 1, i, 0};
    p.release[i] = zero ? event_key{e, 1, i, 1} : event_key{e, 0, 0, 0};
    if (is_transfer(o.kind)) {
      const bool is_tape = o.tensor == tensor_kind::tape;
      tensor& v = is_tape ? t[k] : a[k];
      const size_type bytes = is_tape ? xb(k) : x(k);
      if (o.kind == op_kind::offload) {
        if (v.producer != none) p.waits[i].push_back({v.producer, false});
        p.free_after[i] = v.last_reader;
        p.moved_bytes[i] = bytes;
        if (is_tape && v.recorded_by != none) p.records_moved_tape[v.recorded_by] = 1;
        if (!is_tape && k == 0) p.offloads_input = true;
        const double at = std::max(e, v.last_read);
        p.release[i] = v.allocated_at < at ? event_key{at, 0, 0, 0} : event_key{at, 1, i, 1};
        p.has_event[i] = bytes > 0;
        v.held = false;
        v.host = true;
        v.offload = i;
      } else if (o.kind == op_kind::prefetch) {
        p.waits[i].push_back({v.offload, true});
        p.moved_bytes[i] = bytes;
        p.has_event[i] = bytes > 0;
        v.held = true;
        v.host = false;
        v.producer = i;
        v.allocated_at = s;
        v.last_read = e;
        v.last_reader = none;
      } else {  // wait
        p.waits[i].push_back({v.offload, true});
      }
      continue;
    }
    // A compute op: what it reads (a prefetched copy: wait for its prefetch), makes and drops.
    std::vector<tensor*> reads;
    if (o.kind == op_kind::loss) {
      reads.push_back(&input_of(L));
    } else if (o.kind == op_kind::backward) {
      reads = {&input_of(k), &t[k + 1]};
    } else {
      reads.push_back(&input_of(k));
    }
    for (tensor* v : reads) {
      if (v->producer != none && ops[v->producer].kind == op_kind::prefetch)
        p.waits[i].push_back({v->producer, false});
      v->last_read = std::max(v->last_read, e);
      v->last_reader = i;
    }
    auto make = [&](tensor& v) {
      v.held = true;
      v.producer = i;
      v.allocated_at = s;
      v.last_read = e;
      v.last_reader = i;
    };
    switch (o.kind) {
      case op_kind::forward_checkpoint: make(a[k + 1]); break;
      case op_kind::forward_none:
        a[k].held = false;
        make(a[k + 1]);
        break;
      case op_kind::forward_all:
        make(t[k + 1]);
        t[k + 1].recorded_by = i;
        break;
      case op_kind::loss: a[L].held = false; break;
      case op_kind::backward:
        t[k + 1].held = false;
        a[k].held = false;
        break;
      default: break;
    }
  }

  // Memory waits: every allocating op waits for the frees the model puts before its allocation.
  for (std::size_t j = 0; j < n; ++j) {
    const op_kind kind = ops[j].kind;
    if (kind == op_kind::offload || kind == op_kind::wait) continue;  // they allocate nothing
    std::size_t last_compute = none;
    for (std::size_t i = 0; i < n; ++i) {
      if (i == j || !(p.release[i] < p.allocation[j])) continue;
      if (ops[i].kind == op_kind::offload) {
        if (!p.has_event[i]) continue;
        if (i > j)
          throw std::logic_error("remat::torch::executor: op " + std::to_string(j) +
                                 " would wait for the free of op " + std::to_string(i));
        p.waits[j].push_back({i, true});
      } else if (!is_transfer(ops[i].kind)) {
        if (i > j)
          throw std::logic_error("remat::torch::executor: op " + std::to_string(j) +
                                 " would wait for the end of op " + std::to_string(i));
        last_compute = last_compute == none ? i : std::max(last_compute, i);
      }
    }
    // Compute ops run one at a time in order: a compute op has waited for those before it.
    if (kind == op_kind::prefetch && last_compute != none)
      p.waits[j].push_back({last_compute, false});
  }
  return p;
}

// ---------------------------------------------------------------------------------------------
// The streams

// Runs a plan's ops: compute-stream ops (compute ops and W) on the caller's thread, offloads
// and prefetches on one thread each. Each op starts once the op issued before it has started,
// the op before it on its stream has ended, and its waits are met. An offload's device copy is
// freed (`free(o)`) by whichever ends last: the offload or the last compute op before it that
// reads the copy. The first exception (from any callback) stops every stream; it is rethrown
// once the copy threads have stopped.
class transfer_runner {
 public:
  using clock = std::chrono::steady_clock;

  explicit transfer_runner(const transfer_plan& plan)
      : plan_(plan),
        n_(plan.streams.size()),
        started_(n_, 0),
        done_(n_, 0),
        freed_(n_, 0),
        claimed_(n_, 0),
        issued_(n_, 0),
        start_at_(n_),
        end_at_(n_),
        start_seq_(n_, 0),
        end_seq_(n_, 0),
        event_seq_(n_, 0) {}

  // `prepare(i)` then `execute(i)` for each compute-stream op, in order, on this thread;
  // between them, `issue(j)` for each transfer j issued after i and before the next
  // compute-stream op (and, first, for the transfers before the first one); `copy(j)` on the
  // copy threads; `free(o)` for each offload, on either thread.
  template <class Prepare, class Issue, class Execute, class Copy, class Free>
  void run(Prepare&& prepare, Issue&& issue, Execute&& execute, Copy&& copy, Free&& free) {
    t0_ = clock::now();
    std::vector<std::size_t> d2h, h2d;
    for (std::size_t i = 0; i < n_; ++i) {
      if (plan_.streams[i] == op_stream::d2h) d2h.push_back(i);
      if (plan_.streams[i] == op_stream::h2d) h2d.push_back(i);
    }
    auto work = [&](const std::vector<std::size_t>& ops) {
      try {
        for (const std::size_t i : ops) {
          if (!begin(i)) return;
          copy(i);
          if (!finish(i, free)) return;
        }
      } catch (...) {
        abort(std::current_exception());
      }
    };
    std::thread d2h_thread, h2d_thread;
    try {
      if (!d2h.empty()) d2h_thread = std::thread(work, std::cref(d2h));
      if (!h2d.empty()) h2d_thread = std::thread(work, std::cref(h2d));
      std::size_t next = 0;  // the next op to issue
      auto issue_until = [&](std::size_t end) {
        for (; next < end; ++next) {
          if (plan_.streams[next] == op_stream::compute) continue;
          issue(next);
          {
            const std::lock_guard lock(mutex_);
            issued_[next] = 1;
          }
          changed_.notify_all();
        }
      };
      for (std::size_t i = 0; i < n_; ++i) {
        if (plan_.streams[i] != op_stream::compute) continue;
        issue_until(i);
        next = i + 1;
        if (!begin(i)) break;
        prepare(i);
        std::size_t following = i + 1;
        while (following < n_ && plan_.streams[following] != op_stream::compute) ++following;
        issue_until(following);
        execute(i);
        if (!finish(i, free)) break;
      }
    } catch (...) {
      abort(std::current_exception());
    }
    if (d2h_thread.joinable()) d2h_thread.join();
    if (h2d_thread.joinable()) h2d_thread.join();
    if (error_) std::rethrow_exception(error_);
  }

  // Called from a copy's body: its memory event (a prefetch's allocation) happens now.
  void event(std::size_t i) {
    const std::lock_guard lock(mutex_);
    event_seq_[i] = ++seq_;
  }

  // Measured: milliseconds from the run's start.
  [[nodiscard]] double start_ms(std::size_t i) const { return ms(start_at_[i]); }
  [[nodiscard]] double end_ms(std::size_t i) const { return ms(end_at_[i]); }
  // The order of what happened: an op's start and end, a transfer's memory event (0: none).
  [[nodiscard]] std::uint64_t start_seq(std::size_t i) const { return start_seq_[i]; }
  [[nodiscard]] std::uint64_t end_seq(std::size_t i) const { return end_seq_[i]; }
  [[nodiscard]] std::uint64_t event_seq(std::size_t i) const { return event_seq_[i]; }

 private:
  [[nodiscard]] double ms(clock::time_point t) const {
    return std::chrono::duration<double, std::milli>(t - t0_).count();
  }

  // With the lock held.
  [[nodiscard]] bool may_start(std::size_t i) const {
    if (plan_.streams[i] != op_stream::compute && !issued_[i]) return false;
    if (i > 0 && !started_[i - 1]) return false;
    for (const transfer_plan::wait& w : plan_.waits[i])
      if (!(w.freed ? freed_[w.op] : done_[w.op])) return false;
    return true;
  }

  bool begin(std::size_t i) {
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return aborted_ || may_start(i); });
      if (aborted_) return false;
      started_[i] = 1;
      start_at_[i] = clock::now();
      start_seq_[i] = ++seq_;
    }
    changed_.notify_all();
    return true;
  }

  // Op i has ended: frees the offloads whose copy and readers have all ended now.
  template <class Free>
  bool finish(std::size_t i, Free& free) {
    std::vector<std::size_t> frees;
    {
      const std::lock_guard lock(mutex_);
      done_[i] = 1;
      end_at_[i] = clock::now();
      end_seq_[i] = ++seq_;
      for (std::size_t o = 0; o < n_; ++o) {
        if (plan_.streams[o] != op_stream::d2h || claimed_[o] || !done_[o]) continue;
        const std::size_t r = plan_.free_after[o];
        if (r != transfer_plan::none && !done_[r]) continue;
        claimed_[o] = 1;
        frees.push_back(o);
      }
    }
    for (const std::size_t o : frees) {
      free(o);
      const std::lock_guard lock(mutex_);
      freed_[o] = 1;
      if (plan_.has_event[o]) event_seq_[o] = ++seq_;
    }
    changed_.notify_all();
    std::lock_guard lock(mutex_);
    return !aborted_;
  }

  void abort(std::exception_ptr e) {
    {
      const std::lock_guard lock(mutex_);
      if (!error_) error_ = std::move(e);
      aborted_ = true;
    }
    changed_.notify_all();
  }

  const transfer_plan& plan_;
  std::size_t n_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<char> started_, done_, freed_, claimed_, issued_;
  bool aborted_ = false;
  std::exception_ptr error_;
  clock::time_point t0_;
  std::vector<clock::time_point> start_at_, end_at_;
  std::uint64_t seq_ = 0;
  std::vector<std::uint64_t> start_seq_, end_seq_, event_seq_;
};

}  // namespace remat::torch::detail
