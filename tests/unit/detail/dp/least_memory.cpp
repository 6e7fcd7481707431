// The run-time least-memory DP (`persistent_need_in_doubles`, in doubles) gives the same needs as
// the constexpr one (`least_peak_dp`), and the interval bounds hold what they promise.
#include <remat/detail/dp/least_memory.hpp>
#include <remat/detail/dp/read_back.hpp>

#include <remat/simulate.hpp>
#include <remat/solvers/store_all.hpp>

#include <doctest/doctest.h>

#include "chain_text.hpp"
#include "random_chain.hpp"

#include <cstdint>
#include <random>
#include <vector>

namespace unit_detail_dp_least_memory_test {

namespace {
using remat::size_type;
using remat::detail::dp_branches;
}  // namespace

TEST_CASE("property: persistent_need_in_doubles equals least_peak_dp's need, both DPs") {
  std::mt19937_64 rng(61);
  int compared = 0;
  for (int n = 0; n < 3000; ++n) {
    remat::testing::random_chain_options o;
    o.max_stages = n % 10 == 0 ? 40 : 12;
    o.max_size = n % 3 == 0 ? 3 : 1000;  // many zeros and ties, or spread sizes
    const remat::chain c = remat::testing::random_chain(rng, o);
    INFO(remat::testing::chain_text(c));
    const remat::detail::model md = remat::detail::make_model(c, 1 + n % 4);
    REQUIRE(remat::detail::need_in_doubles(md));
    for (const dp_branches b : {dp_branches::tape_and_checkpoint, dp_branches::checkpoint_only}) {
      CHECK(remat::detail::persistent_need_in_doubles(md, b) ==
            remat::detail::least_peak_dp(md, b).need);
      ++compared;
    }
  }
  CHECK(compared == 6000);
}

TEST_CASE("property: necessary_memory_table holds necessary_memory of every interval") {
  std::mt19937_64 rng(2303);
  for (int n = 0; n < 300; ++n) {
    const remat::chain c = remat::testing::random_chain(rng, {.min_stages = 1, .max_stages = 12});
    CAPTURE(remat::testing::chain_text(c));
    const remat::detail::model md = remat::detail::make_model(c, 1);
    const std::vector<size_type> t = remat::detail::necessary_memory_table(md);
    REQUIRE(t.size() == remat::detail::interval_count(md.L));
    for (std::int32_t i = 0; i < md.L; ++i)
      for (std::int32_t l = i + 1; l <= md.L; ++l)
        CHECK(t[remat::detail::interval_index(md.L, i, l)] ==
              remat::detail::necessary_memory(md, i, l));
  }
}

TEST_CASE("sizes past 2^52 take the exact integer DP") {
  remat::chain c;
  c.input_size = size_type{1} << 53;
  c.stages.assign(3, {1, 1, 1, 1, 0, 0});
  const remat::detail::model md = remat::detail::make_model(c, 1);
  CHECK_FALSE(remat::detail::need_in_doubles(md));
  CHECK(remat::detail::persistent_need(md) == remat::detail::least_peak_dp(md).need);
}

TEST_CASE("property: store is where the no-recomputation schedule fits, S its time") {
  std::mt19937_64 rng(62);
  for (int n = 0; n < 1000; ++n) {
    const remat::chain c = remat::testing::random_chain(rng);
    INFO(remat::testing::chain_text(c));
    const remat::detail::model md = remat::detail::make_model(c, 1);
    const remat::detail::interval_bounds b = remat::detail::make_interval_bounds(
        md, remat::detail::persistent_need(md), dp_branches::tape_and_checkpoint);
    const std::size_t root = remat::detail::interval_index(md.L, 0, md.L);
    const remat::replay_result all =
        remat::simulate(c, remat::detail::store_all_ops(static_cast<std::int32_t>(c.length())));
    CHECK(md.x[0] + b.store[root] == all.peak_memory);
    CHECK(b.S[root] == all.makespan);
    CHECK(b.need[root] <= b.store[root]);
  }
}

}  // namespace unit_detail_dp_least_memory_test
