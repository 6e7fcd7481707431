// The three streams of docs/offload.md on the host: compute ops on the caller's thread, offloads
// and prefetches on one copy thread each (as a GPU's two copy engines), every op starting in
// issue order once the ops it waits for (the program's waits) have ended. The host executor's
// engine for plans with transfers.
//
// One mutex and one condition variable order everything: ops take milliseconds, so a lock per op
// costs nothing that shows, and the waits stay easy to read. Nothing is allocated while running.
#pragma once

#include <remat/detail/planning/program.hpp>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <utility>
#include <vector>

namespace remat::detail {

class host_streams {
 public:
  using clock = std::chrono::steady_clock;
  static constexpr std::size_t none = static_cast<std::size_t>(-1);

  // What a copy op does: `bytes` from `from` to `to`.
  struct copy_task {
    const std::byte* from = nullptr;
    std::byte* to = nullptr;
    std::size_t bytes = 0;
  };
  // Bytes to fill with 0xFF after an op, once op `also_after` (if any) has ended too.
  struct poison_task {
    std::byte* at = nullptr;
    std::size_t bytes = 0;
    std::size_t also_after = none;
  };

  // `copies[i]` for every O and P of `p`; `poison[poison_begin[i] .. [i + 1])` after op i.
  host_streams(const program& p, std::vector<copy_task> copies, std::vector<poison_task> poison,
               std::vector<std::size_t> poison_begin, std::function<void(std::size_t)> before_copy)
      : program_(p),
        copies_(std::move(copies)),
        poison_(std::move(poison)),
        poison_begin_(std::move(poison_begin)),
        before_copy_(std::move(before_copy)),
        started_(p.steps.size(), 0),
        done_(p.steps.size(), 0),
        ready_at_(p.steps.size()),
        start_at_(p.steps.size()),
        end_at_(p.steps.size()) {
    for (std::size_t i = 0; i < p.steps.size(); ++i) {
      const stream s = stream_of(p.steps[i].kind);
      (s == stream::compute ? compute_ : s == stream::d2h ? d2h_ : h2d_).push_back(i);
    }
    d2h_thread_ = std::thread([this] { work(d2h_); });
    h2d_thread_ = std::thread([this] { work(h2d_); });
  }

  host_streams(const host_streams&) = delete;
  host_streams& operator=(const host_streams&) = delete;

  ~host_streams() {
    {
      const std::lock_guard lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    d2h_thread_.join();
    h2d_thread_.join();
  }

  // Runs every op once: `compute(i)` for the compute ops, on this thread. The first exception
  // (from `compute`, a copy, or `before_copy`) stops every stream and is rethrown once they have.
  template <class Compute>
  void run(Compute&& compute) {
    {
      const std::lock_guard lock(mutex_);
      ++run_;
      aborted_ = false;
      error_ = nullptr;
      finished_ = 0;
      run_start_ = clock::now();
    }
    changed_.notify_all();
    try {
      for (const std::size_t i : compute_)
        if (!execute(i, [&] { compute(i); })) break;
    } catch (...) {
      abort(std::current_exception());
    }
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return finished_ == 2; });
    if (error_) std::rethrow_exception(error_);
  }

  // Seconds from the run's start: when op i was ready but for its memory waits, started, ended.
  [[nodiscard]] double ready(std::size_t i) const { return seconds(ready_at_[i]); }
  [[nodiscard]] double start(std::size_t i) const { return seconds(start_at_[i]); }
  [[nodiscard]] double end(std::size_t i) const { return seconds(end_at_[i]); }

 private:
  [[nodiscard]] double seconds(clock::time_point t) const {
    return std::chrono::duration<double>(t - run_start_).count();
  }

  // With the lock held: whether op i may start (`memory`: its memory waits too).
  [[nodiscard]] bool may_start(std::size_t i, bool memory) const {
    if (i > 0 && started_[i - 1] != run_) return false;  // issue order
    for (std::size_t w = program_.waits_begin[i]; w < program_.waits_begin[i + 1]; ++w) {
      const dependency& d = program_.waits[w];
      if ((memory || !d.memory) && done_[d.op] != run_) return false;
    }
    return true;
  }

  // Runs op i on this thread once it may start; false if the run was aborted.
  template <class Body>
  bool execute(std::size_t i, Body&& body) {
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return aborted_ || may_start(i, false); });
      if (aborted_) return false;
      ready_at_[i] = clock::now();
      changed_.wait(lock, [&] { return aborted_ || may_start(i, true); });
      if (aborted_) return false;
      start_at_[i] = clock::now();
      started_[i] = run_;
    }
    changed_.notify_all();
    body();
    for (std::size_t j = poison_begin_[i]; j < poison_begin_[i + 1]; ++j) {
      const poison_task& p = poison_[j];
      if (p.also_after != none && p.also_after != i) {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return aborted_ || done_[p.also_after] == run_; });
        if (aborted_) return false;
      }
      std::memset(p.at, 0xFF, p.bytes);
    }
    {
      const std::lock_guard lock(mutex_);
      end_at_[i] = clock::now();
      done_[i] = run_;
    }
    changed_.notify_all();
    return true;
  }

  void abort(std::exception_ptr e) {
    {
      const std::lock_guard lock(mutex_);
      if (!error_) error_ = std::move(e);
      aborted_ = true;
    }
    changed_.notify_all();
  }

  // A copy thread: waits for a run, runs its ops in issue order, reports that it finished.
  void work(std::span<const std::size_t> ops) {
    std::uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return stop_ || run_ != seen; });
        if (stop_) return;
        seen = run_;
      }
      try {
        for (const std::size_t i : ops) {
          const copy_task& c = copies_[i];
          const bool ran = execute(i, [&] {
            if (before_copy_) before_copy_(i);
            if (c.bytes > 0) std::memcpy(c.to, c.from, c.bytes);
          });
          if (!ran) break;
        }
      } catch (...) {
        abort(std::current_exception());
      }
      {
        const std::lock_guard lock(mutex_);
        ++finished_;
      }
      changed_.notify_all();
    }
  }

  program program_;  // a copy: the executor that owns this may move
  std::vector<copy_task> copies_;
  std::vector<poison_task> poison_;
  std::vector<std::size_t> poison_begin_;
  std::function<void(std::size_t)> before_copy_;
  std::vector<std::size_t> compute_, d2h_, h2d_;  // each stream's ops, in issue order

  std::mutex mutex_;
  std::condition_variable changed_;
  std::uint64_t run_ = 0;               // the run under way (1, 2, ...)
  std::vector<std::uint64_t> started_;  // per op: the last run in which it started
  std::vector<std::uint64_t> done_;     // ... and ended
  bool aborted_ = false;
  bool stop_ = false;
  int finished_ = 0;  // copy threads done with this run
  std::exception_ptr error_;
  clock::time_point run_start_;
  std::vector<clock::time_point> ready_at_, start_at_, end_at_;
  std::thread d2h_thread_, h2d_thread_;
};

}  // namespace remat::detail
