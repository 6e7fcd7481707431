// validate and to_chain: every rule names the right stage, field and reason; edge values pass.
#include <remat/chain.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace unit_chain_test {

namespace {

using remat::chain;
using remat::chain_error;
using remat::size_type;
using remat::stage;

constexpr std::size_t no_stage = chain_error::no_stage;
constexpr size_type two_62 = size_type{1} << 62;
constexpr double not_a_number = std::numeric_limits<double>::quiet_NaN();
constexpr double infinity = std::numeric_limits<double>::infinity();

// A user stage with signed sizes narrower than remat's.
struct int_stage {
  double forward_time = 1;
  double backward_time = 1;
  int output_size = 1;
  int tape_size = 1;
  int forward_overhead = 0;
  int backward_overhead = 0;
};

// A user stage with unsigned 64-bit sizes, which can exceed 2^62.
struct u64_stage {
  float forward_time = 1;
  float backward_time = 1;
  std::uint64_t output_size = 1;
  std::uint64_t tape_size = 1;
};

template <class Stage, class Size>
struct user_chain {
  std::vector<Stage> stages;
  Size input_size = 1;
};

chain three_stages() {
  chain c;
  c.input_size = 1;
  c.stages = {{1, 2, 3, 4, 5, 6}, {1, 2, 3, 4, 5, 6}, {1, 2, 3, 4, 5, 6}};
  c.loss_time = 1;
  c.loss_overhead = 1;
  return c;
}

// The error validating `c` raises, if any.
template <class C>
std::optional<chain_error> error_of(const C& c) {
  try {
    (void)remat::to_chain(c);
  } catch (const chain_error& e) {
    return e;
  }
  return std::nullopt;
}

struct expected {
  std::size_t stage;
  std::string field;
  std::string what;
};

template <class C>
void check_error(const C& c, const expected& want) {
  const std::optional<chain_error> e = error_of(c);
  REQUIRE(e.has_value());
  CHECK(e->stage_index() == want.stage);
  CHECK(e->field() == want.field);
  CHECK(std::string(e->what()) == want.what);
}

}  // namespace

TEST_CASE("a valid chain passes, at run time and at compile time") {
  const chain c = three_stages();
  CHECK_NOTHROW(remat::validate(c));
  CHECK(remat::to_chain(c) == c);
  static_assert([] {
    chain k;
    k.stages.push_back({1, 1, 1, 1, 0, 0});
    remat::validate(k);
    return true;
  }());
}

TEST_CASE("times must be finite and non-negative") {
  chain c = three_stages();
  c.stages[1].forward_time = -1;
  check_error(c, {1, "forward_time", "stages[1].forward_time: must be >= 0 (-1.000000)"});

  c = three_stages();
  c.stages[2].backward_time = not_a_number;
  check_error(c, {2, "backward_time", "stages[2].backward_time: must be a finite number"});

  c = three_stages();
  c.stages[0].forward_time = infinity;
  check_error(c, {0, "forward_time", "stages[0].forward_time: must be a finite number"});

  c = three_stages();
  c.stages[0].backward_time = -infinity;
  check_error(c, {0, "backward_time", "stages[0].backward_time: must be a finite number"});

  c = three_stages();
  c.loss_time = not_a_number;
  check_error(c, {no_stage, "loss.backward_time", "loss.backward_time: must be a finite number"});

  c = three_stages();
  c.loss_time = -0.5;
  check_error(c, {no_stage, "loss.backward_time", "loss.backward_time: must be >= 0 (-0.500000)"});

  // A user stage's time of another floating type is checked the same way.
  user_chain<u64_stage, int> u{{{}, {}}};
  u.stages[1].backward_time = std::numeric_limits<float>::infinity();
  check_error(u, {1, "backward_time", "stages[1].backward_time: must be a finite number"});
}

TEST_CASE("sizes must be non-negative") {
  chain c = three_stages();
  c.stages[2].output_size = -1;
  check_error(c, {2, "output_size", "stages[2].output_size: must be >= 0 (-1)"});

  c = three_stages();
  c.input_size = -5;
  check_error(c, {no_stage, "input_size", "input_size: must be >= 0 (-5)"});

  c = three_stages();
  c.loss_overhead = -2;
  check_error(c, {no_stage, "loss.backward_overhead", "loss.backward_overhead: must be >= 0 (-2)"});

  c = three_stages();
  c.stages[1].backward_overhead = -7;
  check_error(c, {1, "backward_overhead", "stages[1].backward_overhead: must be >= 0 (-7)"});

  // A user type's signed sizes.
  user_chain<int_stage, int> u{{{}, {}, {}}};
  u.stages[2].forward_overhead = -3;
  check_error(u, {2, "forward_overhead", "stages[2].forward_overhead: must be >= 0 (-3)"});
  u = {{{}, {}, {}}};
  u.stages[0].tape_size = -1;
  check_error(u, {0, "tape_size", "stages[0].tape_size: must be >= 0 (-1)"});
  u = {{{}}, -4};
  check_error(u, {no_stage, "input_size", "input_size: must be >= 0 (-4)"});
}

TEST_CASE("sizes must be at most 2^62") {
  user_chain<u64_stage, std::uint64_t> u{{{}, {}}};
  u.stages[1].output_size = (std::uint64_t{1} << 62) + 1;
  u.stages[1].tape_size = u.stages[1].output_size;
  check_error(u,
              {1, "output_size", "stages[1].output_size: must be <= 2^62 (4611686018427387905)"});

  u = {{{}}};
  u.input_size = std::numeric_limits<std::uint64_t>::max();
  check_error(u, {no_stage, "input_size", "input_size: must be <= 2^62 (18446744073709551615)"});

  chain c = three_stages();
  c.stages[0].forward_overhead = two_62 + 1;
  check_error(c, {0, "forward_overhead",
                  "stages[0].forward_overhead: must be <= 2^62 (4611686018427387905)"});
}

TEST_CASE("the tape holds the output: tape_size >= output_size") {
  chain c = three_stages();
  c.stages[1] = {1, 1, 40, 12, 0, 0};
  check_error(c, {1, "tape_size", "stages[1].tape_size: must be >= output_size (12 < 40)"});

  user_chain<int_stage, int> u{{{}, {}}};
  u.stages[1].output_size = 5;
  u.stages[1].tape_size = 3;
  check_error(u, {1, "tape_size", "stages[1].tape_size: must be >= output_size (3 < 5)"});
}

TEST_CASE("a chain has at least one stage") {
  chain c;
  check_error(c, {no_stage, "stages", "stages: must not be empty"});
  check_error(user_chain<int_stage, int>{}, {no_stage, "stages", "stages: must not be empty"});
}

TEST_CASE("the chain's total memory must fit in 64 bits") {
  const std::string overflows =
      ": the chain's total memory (all activations, tapes, gradients and the largest overhead) "
      "overflows 64 bits";

  // Two tapes of 2^62 make 2^63: the second one overflows.
  chain c;
  c.stages = {{1, 1, 0, two_62, 0, 0}, {1, 1, 0, 0, 0, 0}, {1, 1, 0, two_62, 0, 0}};
  check_error(c, {2, "tape_size", "stages[2].tape_size" + overflows});

  // An output counts twice (activation and gradient) and its tape once.
  c.stages = {{1, 1, two_62 / 2, two_62 / 2, 0, 0}, {1, 1, two_62 / 2, two_62 / 2, 0, 0}};
  check_error(c, {1, "output_size", "stages[1].output_size" + overflows});

  // The input counts twice too: a_0 and g_0 are both held by B(0).
  c.stages = {{1, 1, 0, 0, 0, 0}};
  c.input_size = two_62;
  check_error(c, {no_stage, "input_size", "input_size" + overflows});

  // The largest overhead counts once, after everything else.
  c.input_size = 0;
  c.stages = {{1, 1, 0, two_62, 0, two_62}};
  check_error(c, {no_stage, "overheads", "overheads" + overflows});
  c.stages = {{1, 1, 0, two_62, 0, 0}};
  c.loss_overhead = two_62;
  check_error(c, {no_stage, "overheads", "overheads" + overflows});
}

TEST_CASE("edge values are valid") {
  // Zeros everywhere.
  chain c;
  c.stages.assign(4, stage{});
  CHECK_NOTHROW(remat::validate(c));

  // A single size of 2^62 (a tape, an overhead), and 2^61 as the input (counted twice).
  c.stages = {{0, 0, 0, two_62, 0, 0}};
  CHECK_NOTHROW(remat::validate(c));
  c.stages = {{0, 0, 0, 0, two_62, two_62}};
  CHECK_NOTHROW(remat::validate(c));
  c.stages = {{0, 0, 0, 0, 0, 0}};
  c.input_size = two_62 / 2;
  CHECK_NOTHROW(remat::validate(c));

  // A total of exactly 2^63 - 1.
  c.input_size = 0;
  c.stages = {{0, 0, 0, two_62, 0, 0}, {0, 0, 0, two_62 - 1, 0, 0}};
  CHECK_NOTHROW(remat::validate(c));
  c.stages[1].tape_size = two_62;
  CHECK_THROWS_AS(remat::validate(c), chain_error);

  // 2^62 in an unsigned user type, tape equal to output, negative zero and huge times.
  user_chain<u64_stage, std::uint64_t> u{{{}, {}}, 0};
  u.stages[0].output_size = 0;
  u.stages[0].tape_size = std::uint64_t{1} << 62;
  u.stages[1].output_size = 7;
  u.stages[1].tape_size = 7;
  u.stages[1].forward_time = -0.0f;
  u.stages[1].backward_time = std::numeric_limits<float>::max();
  const chain k = remat::to_chain(u);
  CHECK(k.stages[0].tape_size == two_62);
  CHECK(k.stages[1] ==
        stage{0, static_cast<double>(std::numeric_limits<float>::max()), 7, 7, 0, 0});
}

TEST_CASE("the first bad value is the one reported") {
  chain c = three_stages();
  c.stages[2].tape_size = 0;
  c.stages[1].backward_time = -1;
  check_error(c, {1, "backward_time", "stages[1].backward_time: must be >= 0 (-1.000000)"});
  c.stages[1].forward_time = not_a_number;  // before backward_time in the same stage
  check_error(c, {1, "forward_time", "stages[1].forward_time: must be a finite number"});
}

TEST_CASE("chain_error is an invalid_argument that keeps its location") {
  const chain_error e(3, "tape_size", "must be >= output_size (12 < 40)");
  const std::invalid_argument& base = e;
  CHECK(std::string(base.what()) == "stages[3].tape_size: must be >= output_size (12 < 40)");
  CHECK(e.stage_index() == 3);
  CHECK(e.field() == "tape_size");
  const chain_error top(no_stage, "input_size", "must be >= 0 (-1)");
  CHECK(std::string(top.what()) == "input_size: must be >= 0 (-1)");
  CHECK(top.stage_index() == no_stage);
}

TEST_CASE("chain::length and equality") {
  chain a = three_stages();
  const chain b = three_stages();
  CHECK(a.length() == 3);
  CHECK(a == b);
  a.stages[2].backward_overhead = 0;
  CHECK(a != b);
}

}  // namespace unit_chain_test
