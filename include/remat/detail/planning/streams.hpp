// The three streams of docs/offload.md on the host, for every executor that runs transfers on
// threads: compute-stream ops (compute ops and W) on the caller's thread, offloads and
// prefetches on one copy thread each (as a GPU's two copy engines). Each op starts in issue order
// once the ops it waits for have ended (or, for an offload's device copy, been released), and a
// copy starts only once the caller has issued it (the caller hands each transfer its tensors
// in issue order).
//
// One mutex and one condition variable order everything: ops take milliseconds, so a lock per op
// costs nothing that shows, and the waits stay easy to read. The copy threads live as long as
// the runner and serve every run; nothing is allocated while running.
#pragma once

#include <remat/schedule.hpp>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <span>
#include <thread>
#include <utility>
#include <vector>

namespace remat::detail {

// What op `after` waits for before it starts.
struct stream_wait {
  enum class until : std::uint8_t {
    data,      // op `op` has ended: the op reads what it made
    memory,    // op `op` has ended: it frees bytes the op writes (a stall, measured apart)
    released,  // offload `op`'s device copy has been released (its copy and readers ended)
  };
  std::size_t op = 0;
  until what = until::data;
};

// The runner's input: per op its stream, its waits, and for each offload the op whose end
// releases its device copy with the offload's own (`none`: the offload alone).
struct stream_program {
  static constexpr std::size_t none = static_cast<std::size_t>(-1);
  std::vector<stream> streams;
  std::vector<stream_wait> waits;        // op i waits for waits[waits_begin[i] .. [i + 1])
  std::vector<std::size_t> waits_begin;  // n + 1 entries
  std::vector<std::size_t> release_after;  // per op (none but for offloads)
};

class stream_runner {
 public:
  using clock = std::chrono::steady_clock;
  static constexpr std::size_t none = stream_program::none;

  explicit stream_runner(stream_program p) : p_(std::move(p)) {
    const std::size_t n = p_.streams.size();
    for (auto* v : {&started_, &done_, &issued_, &released_, &claimed_}) v->assign(n, 0);
    for (auto* v : {&start_seq_, &end_seq_, &mark_seq_}) v->assign(n, 0);
    for (auto* v : {&ready_at_, &start_at_, &end_at_}) v->assign(n, clock::time_point{});
    // Per op: the offloads whose device copy its end may release.
    release_begin_.assign(n + 1, 0);
    for (std::size_t o = 0; o < n; ++o)
      if (p_.streams[o] == stream::d2h) {
        ++release_begin_[o + 1];
        if (p_.release_after[o] != none && p_.release_after[o] != o)
          ++release_begin_[p_.release_after[o] + 1];
      }
    for (std::size_t i = 0; i < n; ++i) release_begin_[i + 1] += release_begin_[i];
    releases_.resize(release_begin_[n]);
    std::vector<std::size_t> at(release_begin_.begin(), release_begin_.end() - 1);
    for (std::size_t o = 0; o < n; ++o)
      if (p_.streams[o] == stream::d2h) {
        releases_[at[o]++] = o;
        if (p_.release_after[o] != none && p_.release_after[o] != o)
          releases_[at[p_.release_after[o]]++] = o;
      }
    for (std::size_t i = 0; i < n; ++i) {
      if (p_.streams[i] == stream::d2h) d2h_.push_back(i);
      if (p_.streams[i] == stream::h2d) h2d_.push_back(i);
    }
    d2h_thread_ = std::thread([this] { work(d2h_); });
    h2d_thread_ = std::thread([this] { work(h2d_); });
  }

  stream_runner(const stream_runner&) = delete;
  stream_runner& operator=(const stream_runner&) = delete;

  ~stream_runner() {
    {
      const std::lock_guard lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    d2h_thread_.join();
    h2d_thread_.join();
  }

  // Runs every op once. On this thread, in issue order: `prepare(i)` once compute-stream op i
  // may start, then `issue(j)` for the transfers issued after it (up to the next compute-stream
  // op; those before the first one come first), then `execute(i)`. On the copy threads:
  // `copy(j)` for each offload and prefetch once it may start. `release(o)` (either thread) once
  // offload o and the op it releases after have ended. The first exception (from any of them)
  // stops every stream and is rethrown once they have.
  template <class Prepare, class Issue, class Execute, class Copy, class Release>
  void run(Prepare&& prepare, Issue&& issue, Execute&& execute, Copy&& copy, Release&& release) {
    {
      const std::lock_guard lock(mutex_);
      ++run_;
      aborted_ = false;
      error_ = nullptr;
      finished_ = 0;
      copy_ = callback::to(copy);
      release_ = callback::to(release);
      t0_ = clock::now();
    }
    changed_.notify_all();
    const std::size_t n = p_.streams.size();
    std::size_t next = 0;  // the next transfer to issue
    auto issue_until = [&](std::size_t end) {
      for (; next < end; ++next) {
        if (p_.streams[next] == stream::compute) continue;
        issue(next);
        {
          const std::lock_guard lock(mutex_);
          issued_[next] = run_;
        }
        changed_.notify_all();
      }
    };
    try {
      for (std::size_t i = 0; i < n; ++i) {
        if (p_.streams[i] != stream::compute) continue;
        issue_until(i);
        next = i + 1;
        if (!begin(i)) break;
        prepare(i);
        std::size_t following = i + 1;
        while (following < n && p_.streams[following] != stream::compute) ++following;
        issue_until(following);
        execute(i);
        if (!finish(i)) break;
      }
      issue_until(n);
    } catch (...) {
      abort(std::current_exception());
    }
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return finished_ == 2; });
    copy_ = release_ = {};
    if (error_) std::rethrow_exception(error_);
  }

  // From a callback of op i: blocks until op j has ended; false if the run was aborted.
  bool wait_ended(std::size_t j) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return aborted_ || done_[j] == run_; });
    return !aborted_;
  }
  // From a callback of op i: records that its memory event (a prefetch's allocation) is now.
  void mark(std::size_t i) {
    const std::lock_guard lock(mutex_);
    mark_seq_[i] = ++seq_;
  }

  // Seconds from the last run's start: when op i was ready but for its memory waits, started,
  // ended.
  [[nodiscard]] double ready(std::size_t i) const { return seconds(ready_at_[i]); }
  [[nodiscard]] double start(std::size_t i) const { return seconds(start_at_[i]); }
  [[nodiscard]] double end(std::size_t i) const { return seconds(end_at_[i]); }
  // The order of what happened in the last run: an op's start and end, an offload's release or a
  // marked event (0: none).
  [[nodiscard]] std::uint64_t start_seq(std::size_t i) const { return start_seq_[i]; }
  [[nodiscard]] std::uint64_t end_seq(std::size_t i) const { return end_seq_[i]; }
  [[nodiscard]] std::uint64_t mark_seq(std::size_t i) const { return mark_seq_[i]; }

 private:
  // A callable by reference, for the copy threads (no allocation).
  struct callback {
    void* object = nullptr;
    void (*call)(void*, std::size_t) = nullptr;
    void operator()(std::size_t i) const { call(object, i); }
    template <class F>
    static callback to(F& f) {
      return {&f, [](void* p, std::size_t i) { (*static_cast<F*>(p))(i); }};
    }
  };

  [[nodiscard]] double seconds(clock::time_point t) const {
    return std::chrono::duration<double>(t - t0_).count();
  }

  // With the lock held: whether op i may start (`memory`: its memory waits too).
  [[nodiscard]] bool may_start(std::size_t i, bool memory) const {
    if (i > 0 && started_[i - 1] != run_) return false;  // issue order
    if (p_.streams[i] != stream::compute && issued_[i] != run_) return false;
    for (std::size_t w = p_.waits_begin[i]; w < p_.waits_begin[i + 1]; ++w) {
      const stream_wait& d = p_.waits[w];
      if (d.what == stream_wait::until::released) {
        if (released_[d.op] != run_) return false;
      } else if ((memory || d.what == stream_wait::until::data) && done_[d.op] != run_) {
        return false;
      }
    }
    return true;
  }

  bool begin(std::size_t i) {
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return aborted_ || may_start(i, false); });
      if (aborted_) return false;
      ready_at_[i] = clock::now();
      changed_.wait(lock, [&] { return aborted_ || may_start(i, true); });
      if (aborted_) return false;
      start_at_[i] = clock::now();
      start_seq_[i] = ++seq_;
      started_[i] = run_;
    }
    changed_.notify_all();
    return true;
  }

  // Op i has ended: releases the offloads whose copy and reader have both ended now.
  bool finish(std::size_t i) {
    {
      const std::lock_guard lock(mutex_);
      end_at_[i] = clock::now();
      end_seq_[i] = ++seq_;
      done_[i] = run_;
    }
    for (std::size_t r = release_begin_[i]; r < release_begin_[i + 1]; ++r) {
      const std::size_t o = releases_[r];
      {
        const std::lock_guard lock(mutex_);
        const std::size_t after = p_.release_after[o];
        if (claimed_[o] == run_ || done_[o] != run_ || (after != none && done_[after] != run_))
          continue;
        claimed_[o] = run_;
      }
      release_(o);
      const std::lock_guard lock(mutex_);
      released_[o] = run_;
      mark_seq_[o] = ++seq_;
    }
    changed_.notify_all();
    const std::lock_guard lock(mutex_);
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
          if (!begin(i)) break;
          copy_(i);
          if (!finish(i)) break;
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

  stream_program p_;
  std::vector<std::size_t> d2h_, h2d_;  // the copy streams' ops, in issue order
  std::vector<std::size_t> releases_, release_begin_;  // per op: offloads its end may release

  std::mutex mutex_;
  std::condition_variable changed_;
  std::uint64_t run_ = 0;  // the run under way (1, 2, ...); per-op flags hold the run they are of
  std::vector<std::uint64_t> started_, done_, issued_, released_, claimed_;
  bool aborted_ = false;
  bool stop_ = false;
  int finished_ = 0;  // copy threads done with this run
  std::exception_ptr error_;
  callback copy_, release_;
  clock::time_point t0_;
  std::vector<clock::time_point> ready_at_, start_at_, end_at_;
  std::uint64_t seq_ = 0;
  std::vector<std::uint64_t> start_seq_, end_seq_, mark_seq_;
  std::thread d2h_thread_, h2d_thread_;
};

}  // namespace remat::detail
