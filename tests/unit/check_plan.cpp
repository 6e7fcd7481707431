#include <remat/check_plan.hpp>

#include <remat/memory_plan.hpp>
#include <remat/solve.hpp>

#include <doctest/doctest.h>

#include <span>
#include <string>
#include <vector>

namespace unit_check_plan_test {

using remat::memory_plan;
using remat::op;

TEST_CASE("check_memory_plan rejects what is wrong and says what") {
  remat::chain c;
  c.input_size = 8;
  c.stages = {{1, 1, 16, 24, 4, 8}, {1, 1, 32, 32, 0, 0}};
  c.loss_overhead = 2;
  const std::vector<op> ops = remat::detail::store_all_ops(2);
  const memory_plan good = remat::make_memory_plan(c, std::span<const op>(ops), {.alignment = 8});
  REQUIRE(remat::check_memory_plan(good).ok());

  SUBCASE("two live buffers overlap") {
    memory_plan bad = good;
    bad.buffers[3].offset = bad.buffers[1].offset;  // t_2 onto t_1: both live at ops 1-3
    const auto check = remat::check_memory_plan(bad);
    REQUIRE_FALSE(check.ok());
    CHECK(check.problem.find("overlap") != std::string::npos);
    CHECK(check.problem.find("t_1") != std::string::npos);
    CHECK(check.problem.find("t_2") != std::string::npos);
  }
  SUBCASE("buffers that never live together may share") {
    memory_plan shared = good;
    shared.buffers[2].offset = shared.buffers[10].offset;  // workspaces of op 0 and op 4
    CHECK(remat::check_memory_plan(shared).ok());
  }
  SUBCASE("misaligned") {
    memory_plan bad = good;
    bad.buffers[1].offset += 4;
    CHECK(remat::check_memory_plan(bad).problem.find("misaligned") != std::string::npos);
  }
  SUBCASE("outside the arena") {
    memory_plan bad = good;
    bad.arena_bytes = bad.lower_bound - 8;
    CHECK_FALSE(remat::check_memory_plan(bad).ok());
  }
  SUBCASE("a step reading a dead buffer") {
    memory_plan bad = good;
    bad.steps[4].tape = 3;  // B(0) reading t_2, dropped by B(1)
    CHECK(remat::check_memory_plan(bad).problem.find("step 4 (B(0))") != std::string::npos);
  }
  SUBCASE("alignment not a power of two") {
    memory_plan bad = good;
    bad.alignment = 12;
    CHECK_FALSE(remat::check_memory_plan(bad).ok());
  }
}

TEST_CASE("check_run finds buffers sharing bytes while both were live, on the measured times") {
  remat::chain c;
  c.input_size = 8;
  c.stages = {{1, 1, 16, 24, 4, 8}, {1, 1, 32, 32, 0, 0}};
  c.loss_overhead = 2;
  const std::vector<op> ops = remat::detail::store_all_ops(2);
  const memory_plan m = remat::make_memory_plan(c, std::span<const op>(ops), {.alignment = 8});
  std::vector<double> start, end;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    start.push_back(static_cast<double>(i));
    end.push_back(static_cast<double>(i) + 1);
  }
  const remat::run_memory as_planned = remat::check_run(m, start, end);
  CHECK(as_planned.ok());
  CHECK(as_planned.live_peak == m.lower_bound);
  // Every op at once: buffers placed in the same bytes (freed before the other was made) now
  // live together.
  const std::vector<double> zeros(ops.size(), 0.0), ones(ops.size(), 1.0);
  const remat::run_memory together = remat::check_run(m, zeros, ones);
  CHECK(together.live_peak > m.lower_bound);
  CHECK(together.problem.find("shared bytes while both were live") != std::string::npos);
  CHECK(remat::check_run(m, std::vector<double>(2), std::vector<double>(2)).problem.find(
            "the plan has 5") != std::string::npos);
}

}  // namespace unit_check_plan_test
