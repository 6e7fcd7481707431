// Memory plans of schedules with transfers (docs/offload.md, docs/executors.md): device buffers
// and host copies in two pools, lifetimes in predicted time, and the waits that keep every range
// free before it is written whatever the ops' durations. The property that matters is checked by
// running each plan under random durations (an executor's semantics: issue order, one op at a
// time per stream, the plan's waits) and replaying its buffers on those times.
#include <remat/check_plan.hpp>
#include <remat/memory_plan.hpp>

#include <remat/plan.hpp>
#include <remat/solve.hpp>

#include <doctest/doctest.h>
#include <offload_chains.hpp>
#include <random_chain.hpp>
#include <random_schedule.hpp>

#include <algorithm>
#include <cstddef>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace unit_memory_plan_transfers_test {

namespace {

using remat::memory_plan;
using remat::op;
using remat::size_type;
using remat::testing::chain_a;
using remat::testing::chain_a_ops;

// When each op starts and ends if every op takes `duration(i)`: ops start in issue order, one at
// a time on each stream, and after the plan's waits, as the executors run them.
template <class Duration>
std::pair<std::vector<double>, std::vector<double>> run_times(const memory_plan& m,
                                                              Duration&& duration) {
  const std::size_t n = m.steps.size();
  std::vector<double> start(n, 0), end(n, 0);
  double stream_end[3] = {0, 0, 0};
  std::size_t w = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto s = static_cast<std::size_t>(remat::stream_of(m.steps[i].op.kind));
    double t = std::max(i > 0 ? start[i - 1] : 0.0, stream_end[s]);
    for (; w < m.waits.size() && m.waits[w].after == i; ++w) t = std::max(t, end[m.waits[w].before]);
    start[i] = t;
    end[i] = t + duration(i);
    stream_end[s] = end[i];
  }
  return {start, end};
}

// Whatever the durations: every read comes after what it reads was made, and no two buffers
// share a byte while both are live.
void require_safe_under_any_timing(const memory_plan& m, std::mt19937_64& rng) {
  std::exponential_distribution<double> heavy(1.0);
  for (int run = 0; run < 8; ++run) {
    const auto [start, end] = run_times(m, [&](std::size_t i) {
      if (m.steps[i].op.kind == remat::op_kind::wait) return 0.0;
      const double d = heavy(rng);
      return run % 4 == 0 ? 1e-6 * d : d * d;  // some runs nearly instant, the rest heavy-tailed
    });
    for (std::size_t i = 0; i < m.steps.size(); ++i) {
      const remat::step& s = m.steps[i];
      for (const remat::buffer_id id : {s.input, s.tape, s.gradient})
        if (id != remat::no_buffer && id != memory_plan::input())
          REQUIRE_MESSAGE(end[m.buffers[id].first_op] <= start[i],
                          "op " << i << " reads buffer " << id << " before it is made");
    }
    const remat::run_memory seen = remat::check_run(m, start, end);
    REQUIRE_MESSAGE(seen.ok(), seen.problem);
    REQUIRE(seen.live_peak <= m.arena_bytes);
  }
}

int checked_peaks = 0;  // plans whose predicted peak check_run reproduced

void require_sound(const remat::chain& c, const std::vector<op>& ops, const memory_plan& m,
                   std::mt19937_64& rng) {
  INFO(remat::to_string(remat::schedule{ops, 0, 0}));
  const remat::memory_plan_check check = remat::check_memory_plan(m);
  REQUIRE_MESSAGE(check.ok(), check.problem);
  const remat::replay_result r = remat::simulate(c, std::span<const op>(ops));
  REQUIRE(r.valid());
  REQUIRE(m.lower_bound == r.peak_memory);
  REQUIRE(m.arena_bytes >= m.lower_bound);
  // At the predicted times the buffers reproduce the simulator's peak (where no op takes 0 time:
  // at one instant the simulator orders such ops' allocations by issue, check_run cannot).
  const remat::run_memory predicted = remat::check_run(m, r.start, r.end);
  REQUIRE_MESSAGE(predicted.ok(), predicted.problem);
  bool instant = false;
  for (std::size_t i = 0; i < ops.size(); ++i)
    instant = instant || (ops[i].kind != remat::op_kind::wait && !(r.start[i] < r.end[i]));
  checked_peaks += !instant;
  if (!instant) CHECK(predicted.live_peak == r.peak_memory);
  for (const remat::wait& w : m.waits) {
    REQUIRE(w.before < w.after);
    // At the predicted times no wait holds anything back: the plan costs no time.
    CHECK(r.end[w.before] <= r.start[w.after]);
  }
  require_safe_under_any_timing(m, rng);
}

}  // namespace

TEST_CASE("chain A: a_0 offloaded, its range reused by the loss's transient, then prefetched") {
  const remat::chain c = chain_a();
  const std::vector<op> ops = chain_a_ops();
  const memory_plan m = remat::make_memory_plan(c, std::span<const op>(ops), {.alignment = 1});
  std::mt19937_64 rng(1);
  require_sound(c, ops, m, rng);
  CHECK(m.lower_bound == 23);
  CHECK(m.arena_bytes == 23);
  CHECK(m.host_bytes == 5);
  CHECK(m.has_transfers());
  CHECK(m.start == std::vector<double>{0, 0, 4, 8, 9, 9, 17});
  // The host copy: made by O (op 1), consumed by P (op 5).
  const remat::step& o = m.steps[1];
  const remat::step& p = m.steps[5];
  CHECK(o.input == memory_plan::input());
  CHECK(m.buffers[o.output].on_host);
  CHECK(p.input == o.output);
  CHECK(m.buffers[p.output].first_op == 5);
  CHECK(m.steps[6].input == p.output);  // B(0) reads the prefetched a_0
  // a_0 is freed once O and F_all(0), which reads it, have ended: whatever reuses its bytes waits
  // for both. P waits for O (its host copy) and B(0) for P (data).
  const auto has = [&](std::size_t before, std::size_t after, remat::wait_reason why) {
    return std::find(m.waits.begin(), m.waits.end(), remat::wait{before, after, why}) !=
           m.waits.end();
  };
  CHECK(has(1, 5, remat::wait_reason::data));
  CHECK(has(5, 6, remat::wait_reason::data));
  // The loss needs 23 bytes, a_0 is 5 of them: something written after O reuses a_0's bytes.
  CHECK(std::any_of(m.waits.begin(), m.waits.end(), [](const remat::wait& w) {
    return w.before == 1 && w.why == remat::wait_reason::memory;
  }));
}

TEST_CASE("chain A at 5/12: the offload ends after the loss starts, so they cannot share bytes") {
  const remat::chain c = chain_a(5.0 / 12);
  const std::vector<op> ops = chain_a_ops();
  const memory_plan m = remat::make_memory_plan(c, std::span<const op>(ops), {.alignment = 1});
  std::mt19937_64 rng(2);
  require_sound(c, ops, m, rng);
  CHECK(m.lower_bound == 28);
  CHECK(m.arena_bytes == 28);
}

TEST_CASE("random chains and walks with transfers: every plan is sound under any timing") {
  std::mt19937_64 rng(77);
  int plans = 0, with_waits = 0, reused = 0;
  for (int trial = 0; trial < 600; ++trial) {
    remat::chain c = remat::testing::random_chain(rng, {.max_stages = 6, .max_size = 12});
    const double bandwidth = std::uniform_real_distribution<double>(0.25, 8.0)(rng);
    c.transfer = {bandwidth, bandwidth * 1.5};
    const auto ops = remat::testing::random_schedule(c, rng, 120, 4, true);
    if (!ops) continue;
    const remat::size_type alignment = trial % 3 == 0 ? 8 : 1;
    const memory_plan m =
        remat::make_memory_plan(c, std::span<const op>(*ops), {.alignment = alignment});
    require_sound(c, *ops, m, rng);
    ++plans;
    with_waits += std::any_of(m.waits.begin(), m.waits.end(), [](const remat::wait& w) {
      return w.why == remat::wait_reason::memory;
    });
    reused += m.arena_bytes < [&] {
      size_type sum = 0;
      for (const remat::buffer& b : m.buffers) sum += b.on_host ? 0 : b.size;
      return sum;
    }();
  }
  MESSAGE(plans << " plans, " << with_waits << " with memory waits, " << reused
                << " reusing bytes, " << checked_peaks << " peaks reproduced");
  CHECK(plans >= 400);
  CHECK(with_waits >= plans / 4);
}

TEST_CASE("the offload solver's schedules plan within the budget on chains with a link") {
  std::mt19937_64 rng(5);
  int planned = 0;
  for (int trial = 0; trial < 150; ++trial) {
    remat::chain c = remat::testing::random_chain(rng, {.min_stages = 2, .max_stages = 8});
    c.transfer = {2.0, 2.0};
    const remat::solve_result all = remat::solve(c, remat::max_size, {.solver = remat::solver::store_all});
    const size_type top = all.schedule.peak_memory;
    for (const remat::solver s : {remat::solver::offload, remat::solver::save_on_cpu,
                                  remat::solver::vdnn, remat::solver::sequential_offload}) {
      const remat::solve_result least = remat::solve(c, top, {.solver = s});
      if (least.min_feasible_budget == remat::solve_result::no_budget) continue;
      const size_type lo = least.min_feasible_budget;
      const size_type budget = lo + (top - lo) / 3;
      const remat::plan_result p = remat::plan(c, budget, {.solve = {.solver = s}, .alignment = 1});
      CAPTURE(remat::name(s));
      CAPTURE(budget);
      if (!p.feasible) continue;
      REQUIRE(p.memory.arena_bytes <= budget);
      require_sound(c, p.solution.schedule.ops, p.memory, rng);
      ++planned;
    }
  }
  MESSAGE(planned << " plans of link solvers");
  CHECK(planned >= 200);
}

TEST_CASE("check_memory_plan refuses a plan that misses a wait") {
  const remat::chain c = chain_a();
  const std::vector<op> ops = chain_a_ops();
  const memory_plan m = remat::make_memory_plan(c, std::span<const op>(ops), {.alignment = 1});
  REQUIRE(remat::check_memory_plan(m).ok());
  for (std::size_t w = 0; w < m.waits.size(); ++w) {
    memory_plan broken = m;
    broken.waits.erase(broken.waits.begin() + static_cast<std::ptrdiff_t>(w));
    const remat::memory_plan_check check = remat::check_memory_plan(broken);
    CAPTURE(w);
    CHECK_FALSE(check.ok());
    CHECK((check.problem.find("without waiting") != std::string::npos ||
           check.problem.find("overlap while both may be live") != std::string::npos));
  }
  memory_plan backwards = m;
  backwards.waits.push_back({6, 2, remat::wait_reason::data});
  CHECK(remat::check_memory_plan(backwards).problem.find("earlier op") != std::string::npos);
  memory_plan outside = m;
  outside.buffers[m.steps[1].output].offset = 8;  // the host copy past the end of its pool
  CHECK(remat::check_memory_plan(outside).problem.find("host pool") != std::string::npos);
}

TEST_CASE("check_run finds buffers that shared bytes while both were live") {
  const remat::chain c = chain_a();
  const std::vector<op> ops = chain_a_ops();
  const memory_plan m = remat::make_memory_plan(c, std::span<const op>(ops), {.alignment = 1});
  // The loss starts before the offload of a_0 ends: its transient would write over a_0.
  std::vector<double> start = m.start, end = m.end;
  end[1] = 8.5;
  const remat::run_memory seen = remat::check_run(m, start, end);
  CHECK_FALSE(seen.ok());
  CHECK(seen.problem.find("shared bytes") != std::string::npos);
  CHECK(seen.live_peak == 28);
  CHECK_FALSE(remat::check_run(m, start, std::vector<double>(3, 0)).ok());
}

}  // namespace unit_memory_plan_transfers_test
