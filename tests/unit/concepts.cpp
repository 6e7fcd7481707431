// What `stage_like` and `chain_like` accept and reject, shown with minimal user types: most of
// this file is checked at compile time.
#include <remat/concepts.hpp>

#include <remat/chain.hpp>
#include <remat/solve.hpp>

#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <forward_list>
#include <list>
#include <optional>
#include <span>
#include <vector>

namespace unit_concepts_test {

namespace user {

// Every cost as a const member function; no overheads.
struct fn_stage {
  int scale = 1;
  constexpr double forward_time() const { return 1.5 * scale; }
  constexpr double backward_time() const { return 2.5 * scale; }
  constexpr long output_size() const { return 3L * scale; }
  constexpr long tape_size() const { return 4L * scale; }
};

// Every cost as a data member, of assorted arithmetic types, and one overhead.
struct data_stage {
  float forward_time = 1;
  int backward_time = 2;
  unsigned output_size = 3;
  std::uint64_t tape_size = 4;
  short forward_overhead = 5;
};

// Every cost, overheads included, through free functions found by argument-dependent lookup.
struct adl_stage {
  long scale = 1;
};
constexpr double forward_time(const adl_stage& s) {
  return 1.0 * static_cast<double>(s.scale);
}
constexpr double backward_time(const adl_stage& s) {
  return 2.0 * static_cast<double>(s.scale);
}
constexpr long output_size(const adl_stage& s) {
  return 10 * s.scale;
}
constexpr long tape_size(const adl_stage& s) {
  return 20 * s.scale;
}
constexpr long forward_overhead(const adl_stage& s) {
  return 30 * s.scale;
}
constexpr long backward_overhead(const adl_stage& s) {
  return 40 * s.scale;
}

// A recording-forward overhead: as a member function, as a data member, by ADL, and as an
// optional that may be empty.
struct recording_fn_stage : data_stage {
  constexpr long recording_overhead() const { return 2; }
};
struct recording_data_stage : data_stage {
  std::int64_t recording_overhead = 9;
};
struct recording_adl_stage : adl_stage {};
constexpr long recording_overhead(const recording_adl_stage& s) {
  return 7 * s.scale;
}
struct recording_optional_stage : data_stage {
  std::optional<int> recording_overhead;
};

// A member function wins over a free function of the same name, a data member likewise.
struct member_and_adl {
  constexpr double forward_time() const { return 1; }
  double backward_time = 2;
  long output_size = 3;
  long tape_size = 4;
};
constexpr double forward_time(const member_and_adl&) {
  return 100;
}
constexpr double backward_time(const member_and_adl&) {
  return 200;
}

// Rejected stages: each differs from a valid one in exactly one way.
struct missing_tape {
  double forward_time = 1;
  double backward_time = 1;
  long output_size = 1;
};
struct double_size {
  double forward_time = 1;
  double backward_time = 1;
  double output_size = 1;
  long tape_size = 1;
};
struct double_overhead {  // an optional cost, present but not a size, is not silently 0
  double forward_time = 1;
  double backward_time = 1;
  long output_size = 1;
  long tape_size = 1;
  double backward_overhead = 1;
};
struct bool_size {
  double forward_time = 1;
  double backward_time = 1;
  long output_size = 1;
  bool tape_size = true;
};
struct bool_time {
  bool forward_time = true;
  double backward_time = 1;
  long output_size = 1;
  long tape_size = 1;
};
template <class Char>
struct char_size {
  double forward_time = 1;
  double backward_time = 1;
  Char output_size = 1;
  long tape_size = 1;
};
struct int8_size {
  double forward_time = 1;
  double backward_time = 1;
  std::int8_t output_size = 1;
  std::uint8_t tape_size = 1;
};

// Chains over user ranges.
struct array_chain {
  std::array<fn_stage, 3> stages{fn_stage{1}, fn_stage{2}, fn_stage{3}};
  long input_size = 2;
};
struct list_chain {
  std::list<data_stage> stages{data_stage{}, data_stage{}};
  int input_size = 1;
  double loss_time = 0.5;
  int loss_overhead = 3;
};
struct fn_chain {  // member functions; `stages()` returns a range by value
  std::vector<adl_stage> stages() const { return {adl_stage{1}, adl_stage{2}}; }
  long input_size() const { return 7; }
};
inline constexpr adl_stage some_stages[] = {adl_stage{1}, adl_stage{2}, adl_stage{3}};
struct span_chain {  // a view of stages stored elsewhere
  std::span<const adl_stage> stages = some_stages;
  long input_size = 1;
};

// Rejected chains.
struct forward_list_chain {  // not a sized range
  std::forward_list<fn_stage> stages;
  long input_size = 1;
};
struct int_range_chain {  // elements are not stages
  std::vector<int> stages;
  long input_size = 1;
};
struct missing_input_chain {
  std::vector<fn_stage> stages;
};
struct double_input_chain {
  std::vector<fn_stage> stages;
  double input_size = 1;
};

}  // namespace user

// Free functions are found by ADL only: one declared outside the stage's namespace (here in the
// global namespace) is not used, although it is visible wherever the stage is.
namespace hidden {
struct stage {
  double backward_time = 1;
  long output_size = 1;
  long tape_size = 1;
};
}  // namespace hidden
constexpr double forward_time(const hidden::stage&) {
  return 1;
}

namespace {

using remat::chain_like;
using remat::stage_like;

// Accepted stages.
static_assert(stage_like<remat::stage>);
static_assert(stage_like<user::fn_stage>);
static_assert(stage_like<user::data_stage>);
static_assert(stage_like<user::adl_stage>);
static_assert(stage_like<user::member_and_adl>);
static_assert(stage_like<user::int8_size>);

// The values each lookup finds.
static_assert(remat::forward_time(user::fn_stage{2}) == 3.0);
static_assert(remat::tape_size(user::fn_stage{2}) == 8);
static_assert(remat::backward_time(user::data_stage{}) == 2);
static_assert(remat::tape_size(user::data_stage{}) == 4);
static_assert(remat::forward_overhead(user::data_stage{}) == 5);
static_assert(remat::output_size(user::adl_stage{3}) == 30);
static_assert(remat::backward_overhead(user::adl_stage{3}) == 120);
static_assert(remat::forward_time(user::member_and_adl{}) == 1);
static_assert(remat::backward_time(user::member_and_adl{}) == 2);

// Absent overheads are 0.
static_assert(remat::forward_overhead(user::fn_stage{}) == 0);
static_assert(remat::backward_overhead(user::fn_stage{}) == 0);
static_assert(remat::backward_overhead(user::data_stage{}) == 0);

// The recording overhead: the user's where given (an empty optional gives none), else the
// forward overhead (0 where that is absent too).
static_assert(remat::recording_overhead(user::recording_fn_stage{}) == 2);
static_assert(remat::recording_overhead(user::recording_data_stage{}) == 9);
static_assert(remat::recording_overhead(user::recording_adl_stage{{2}}) == 14);
static_assert(remat::recording_overhead(user::recording_optional_stage{}) == 5);
static_assert(remat::recording_overhead(user::recording_optional_stage{{}, 3}) == 3);
static_assert(remat::recording_overhead(user::data_stage{}) == 5);
static_assert(remat::recording_overhead(user::adl_stage{3}) == 90);
static_assert(remat::recording_overhead(user::fn_stage{}) == 0);
static_assert(remat::recording_overhead(remat::stage{1, 1, 1, 1, 4, 0}) == 4);
static_assert(remat::recording_overhead(remat::stage{1, 1, 1, 1, 4, 0, 6}) == 6);
static_assert(stage_like<user::recording_optional_stage>);
static_assert(stage_like<remat::stage>);
// A stage without one equals the same stage giving the forward overhead explicitly.
static_assert(remat::stage{1, 1, 1, 1, 4, 0} == remat::stage{1, 1, 1, 1, 4, 0, 4});
static_assert(remat::stage{1, 1, 1, 1, 4, 0} != remat::stage{1, 1, 1, 1, 4, 0, 3});

// Rejected stages.
static_assert(!stage_like<user::missing_tape>);
static_assert(!stage_like<user::double_size>);
static_assert(!stage_like<user::double_overhead>);
static_assert(!stage_like<user::bool_size>);
static_assert(!stage_like<user::bool_time>);
static_assert(!stage_like<user::char_size<char>>);
static_assert(!stage_like<user::char_size<wchar_t>>);
static_assert(!stage_like<user::char_size<char8_t>>);
static_assert(!stage_like<user::char_size<char16_t>>);
static_assert(!stage_like<user::char_size<char32_t>>);
static_assert(!stage_like<hidden::stage>);
static_assert(!stage_like<int>);

// Accepted chains.
static_assert(chain_like<remat::chain>);
static_assert(chain_like<user::array_chain>);
static_assert(chain_like<user::list_chain>);
static_assert(chain_like<user::fn_chain>);
static_assert(chain_like<user::span_chain>);
static_assert(remat::input_size(user::array_chain{}) == 2);
static_assert(remat::loss_time(user::array_chain{}) == 0);
static_assert(remat::loss_overhead(user::array_chain{}) == 0);

// Rejected chains.
static_assert(!chain_like<user::forward_list_chain>);
static_assert(!chain_like<user::int_range_chain>);
static_assert(!chain_like<user::missing_input_chain>);
static_assert(!chain_like<user::double_input_chain>);
static_assert(!chain_like<std::vector<remat::stage>>);  // a range alone has no input size

// Conversion of a user chain, at compile time.
static_assert([] {
  const remat::chain c = remat::to_chain(user::array_chain{});
  return c.length() == 3 && c.input_size == 2 && c.stages[2].forward_time == 4.5 &&
         c.stages[2].tape_size == 12 && c.stages[1].forward_overhead == 0;
}());

}  // namespace

TEST_CASE("to_chain copies every cost of a user chain") {
  const remat::chain l = remat::to_chain(user::list_chain{});
  REQUIRE(l.length() == 2);
  CHECK(l.stages[1] == remat::stage{1, 2, 3, 4, 5, 0});
  CHECK(l.input_size == 1);
  CHECK(l.loss_time == 0.5);
  CHECK(l.loss_overhead == 3);

  const remat::chain f = remat::to_chain(user::fn_chain{});
  REQUIRE(f.length() == 2);
  CHECK(f.stages[1] == remat::stage{2, 4, 20, 40, 60, 80});
  CHECK(f.input_size == 7);

  const remat::chain v = remat::to_chain(user::span_chain{});
  REQUIRE(v.length() == 3);
  CHECK(v.stages[2] == remat::stage{3, 6, 30, 60, 90, 120});
}

TEST_CASE("to_chain copies a user stage's recording overhead where it differs") {
  struct rec_chain {
    std::vector<user::recording_optional_stage> stages{{}, {}, {}};
    long input_size = 1;
  };
  rec_chain mine;
  mine.stages[1].recording_overhead = 2;
  mine.stages[2].recording_overhead = 5;  // the forward overhead: kept as none
  const remat::chain c = remat::to_chain(mine);
  CHECK_FALSE(c.stages[0].recording_overhead.has_value());
  REQUIRE(c.stages[1].recording_overhead.has_value());
  CHECK(*c.stages[1].recording_overhead == 2);
  CHECK_FALSE(c.stages[2].recording_overhead.has_value());
  mine.stages[0].recording_overhead = -1;
  CHECK_THROWS_WITH_AS(remat::to_chain(mine), "stages[0].recording_overhead: must be >= 0 (-1)",
                       remat::chain_error);
}

TEST_CASE("solve works on a user chain as on the equivalent remat::chain") {
  const user::list_chain mine;
  const remat::chain theirs = remat::to_chain(mine);
  for (remat::size_type budget = 0; budget <= 40; ++budget) {
    for (remat::solver s :
         {remat::solver::optimal, remat::solver::store_all, remat::solver::exhaustive}) {
      CAPTURE(budget);
      CAPTURE(remat::name(s));
      const remat::solve_options o{.solver = s, .slots = remat::exact_units};
      const remat::solve_result a = remat::solve(mine, budget, o);
      const remat::solve_result b = remat::solve(theirs, budget, o);
      CHECK(a.feasible == b.feasible);
      CHECK(a.schedule == b.schedule);
      CHECK(a.min_feasible_budget == b.min_feasible_budget);
    }
  }
  // Store-all peaks at 15, in the loss: a_0, t_1, t_2 and g_2 (1 + 4 + 4 + 3) and its overhead 3.
  const remat::solve_result r =
      remat::solve(mine, 15, {.solver = remat::solver::optimal, .slots = remat::exact_units});
  REQUIRE(r.feasible);
  CHECK(remat::simulate(mine, r.schedule).fits(15));
  CHECK(r.schedule.makespan == 1 + 1 + 0.5 + 2 + 2);
}

TEST_CASE("solve works at compile time on a user chain") {
  static_assert(
      remat::solve(user::array_chain{}, 1000, {.slots = remat::exact_units}).schedule.makespan ==
      (1.5 + 2.5) * (1 + 2 + 3));
  CHECK(remat::solve(user::array_chain{}, 1000).feasible);
}

}  // namespace unit_concepts_test
