// remat/ranges.hpp: chains from columns (with the errors a chain file would give), a coarse
// chain's blocks, and the lazy expansion of coarse schedules (the same ops as remat::expand).
#include <remat/ranges.hpp>

#include <remat/solve.hpp>

#include <doctest/doctest.h>

#include "random_chain.hpp"
#include "random_schedule.hpp"

#include <range/v3/range/conversion.hpp>
#include <range/v3/view/transform.hpp>

#include <array>
#include <cstdint>
#include <list>
#include <random>
#include <string>
#include <vector>

namespace unit_ranges_test {

TEST_CASE("chain_from: columns of any ranges, checked as a chain is") {
  const std::vector<double> fw = {1, 2, 0.5};
  const std::list<float> bw = {2, 4, 1};  // any forward range, any arithmetic type
  const std::array<int, 3> out = {3, 5, 1};
  const std::vector<long> tape = {4, 9, 1};
  const remat::chain c = remat::chain_from(7, fw, bw, out, tape, 0.25, 2);
  remat::chain expected;
  expected.input_size = 7;
  expected.stages = {{1, 2, 3, 4, 0, 0}, {2, 4, 5, 9, 0, 0}, {0.5, 1, 1, 1, 0, 0}};
  expected.loss_time = 0.25;
  expected.loss_overhead = 2;
  CHECK(c == expected);

  const std::vector<long> fo = {0, 6, 0}, bo = {1, 0, 2};
  const remat::chain with = remat::chain_from(7, fw, bw, out, tape, fo, bo);
  CHECK(with.stages[1].forward_overhead == 6);
  CHECK(with.stages[2].backward_overhead == 2);

  // A seventh column: recording overheads, kept where they differ from the forward overheads.
  const std::vector<int> fa = {0, 2, 5};
  const remat::chain rec = remat::chain_from(7, fw, bw, out, tape, fo, bo, fa, 0.25, 2);
  CHECK_FALSE(rec.stages[0].recording_overhead.has_value());
  CHECK(rec.stages[1].recording_overhead == 2);
  CHECK(rec.stages[2].recording_overhead == 5);
  CHECK(rec.loss_time == 0.25);
  const std::vector<int> short_fa = {0, 2};
  CHECK_THROWS_WITH_AS(remat::chain_from(7, fw, bw, out, tape, fo, bo, short_fa),
                       "recording_overhead: the column has 2 values, forward_time has 3",
                       remat::chain_error);
  const std::vector<int> negative_fa = {0, -1, 0};
  CHECK_THROWS_WITH_AS(remat::chain_from(7, fw, bw, out, tape, fo, bo, negative_fa),
                       "stages[1].recording_overhead: must be >= 0 (-1)", remat::chain_error);

  // Columns straight from a profiler's records.
  struct record {
    double f, b;
    long o, t;
  };
  const std::vector<record> records = {{1, 2, 3, 4}, {2, 4, 5, 9}, {0.5, 1, 1, 1}};
  namespace rv = ranges::views;
  const remat::chain from_records = remat::chain_from(
      7, records | rv::transform(&record::f), records | rv::transform(&record::b),
      records | rv::transform(&record::o), records | rv::transform(&record::t), 0.25, 2);
  CHECK(from_records == expected);

  const std::vector<long> short_tape = {4, 9};
  CHECK_THROWS_WITH_AS(remat::chain_from(7, fw, bw, out, short_tape),
                       "tape_size: the column has 2 values, forward_time has 3",
                       remat::chain_error);
  const std::vector<long> small_tape = {4, 4, 1};
  CHECK_THROWS_WITH_AS(remat::chain_from(7, fw, bw, out, small_tape),
                       "stages[1].tape_size: must be >= output_size (4 < 5)", remat::chain_error);
  const std::vector<double> negative = {1, -2, 0.5};
  CHECK_THROWS_WITH_AS(remat::chain_from(7, negative, bw, out, tape),
                       doctest::Contains("stages[1].forward_time: must be >= 0"),
                       remat::chain_error);
  const std::vector<double> none;
  CHECK_THROWS_WITH_AS(remat::chain_from(7, none, none, none, none), "stages: must not be empty",
                       remat::chain_error);
}

TEST_CASE("views::blocks and views::expand agree with coarse_chain and remat::expand") {
  std::mt19937_64 rng(16);
  for (int trial = 0; trial < 500; ++trial) {
    const remat::chain c = remat::testing::random_chain(rng, {.min_stages = 1, .max_stages = 12});
    const std::size_t L = c.length();
    const std::size_t K = std::uniform_int_distribution<std::size_t>(1, L)(rng);
    const remat::coarse_chain cc = remat::coarsen(c, K);
    const auto blocks = remat::views::blocks(cc) | ranges::to<std::vector>();
    REQUIRE(blocks.size() == K);
    std::int32_t next = 0;
    std::size_t largest = 0;
    for (const remat::block& b : blocks) {
      CHECK(b.first == next);
      next = b.end;
      largest = std::max(largest, static_cast<std::size_t>(b.size()));
    }
    CHECK(static_cast<std::size_t>(next) == L);
    CHECK(largest == cc.largest_block());
    if (const auto ops = remat::testing::random_schedule(cc.chain, rng, 300)) {
      const std::vector<remat::op> lazy =
          remat::views::expand(cc, *ops) | ranges::to<std::vector>();
      CHECK(lazy == remat::expand(cc, *ops));
    }
  }
}

}  // namespace unit_ranges_test
