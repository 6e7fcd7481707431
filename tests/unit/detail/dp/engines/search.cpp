// The branch-and-bound solve at one budget against the dense reference DP in exact units: the same
// value and the same schedule, bit for bit, whatever the lower bounds' slots; the lower bounds
// never above the optimum; a cap on the work stops the search, and the search resumes from what
// it kept.
#include <remat/detail/dp/engines/search.hpp>

#include <remat/detail/dp/engines/frontier.hpp>
#include <remat/detail/dp/engines/reference.hpp>
#include <remat/simulate.hpp>

#include <doctest/doctest.h>

#include "chain_text.hpp"
#include "dp_chains.hpp"
#include "random_chain.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace unit_detail_dp_engines_search_test {

namespace {

using remat::chain;
using remat::size_type;
using remat::detail::dp_branches;
using remat::detail::interval_bounds;
using remat::detail::interval_index;
using remat::detail::model;
using remat::detail::reference_table;
using remat::detail::search_result;
using remat::testing::dp_test_chain;
using remat::testing::everything;

interval_bounds bounds_of(const model& md, dp_branches branches) {
  return remat::detail::make_interval_bounds(md, remat::detail::persistent_need(md, branches),
                                             branches);
}

constexpr dp_branches both[] = {dp_branches::tape_and_checkpoint, dp_branches::checkpoint_only};

}  // namespace

TEST_CASE("property: the value and the schedule are the dense DP's, bit for bit, any slots") {
  std::mt19937_64 rng(1601);
  int feasible = 0, infeasible = 0;
  for (int n = 0; n < 800; ++n) {
    const chain c = dp_test_chain(rng, {.min_stages = 1, .max_stages = 9, .max_size = 30});
    CAPTURE(remat::testing::chain_text(c));
    const model md = remat::detail::make_model(c, 1);
    for (const dp_branches branches : both) {
      CAPTURE(static_cast<int>(branches));
      const interval_bounds b = bounds_of(md, branches);
      const reference_table ref = remat::detail::reference_dp(md, everything(md), branches);
      for (int k = 0; k < 4; ++k) {
        const size_type m = std::uniform_int_distribution<size_type>(0, everything(md))(rng);
        const size_type slots = std::uniform_int_distribution<size_type>(1, 12)(rng);
        CAPTURE(m);
        CAPTURE(slots);
        const search_result r = remat::detail::search_dp(md, b, m, slots, branches);
        REQUIRE(r.complete);
        const double want = ref.value[ref.at(0, md.L, m)];
        CHECK(r.value == want);
        if (want < remat::detail::infinite_time) {
          ++feasible;
          CHECK(r.ops == remat::detail::reference_ops(md, ref, 0, md.L, m));
        } else {
          ++infeasible;
          CHECK(r.ops.empty());
        }
      }
    }
  }
  CHECK(feasible > 2000);
  CHECK(infeasible > 300);
}

TEST_CASE("property: longer chains, larger sizes: the frontier DP's value, schedules that fit") {
  std::mt19937_64 rng(1602);
  for (int n = 0; n < 24; ++n) {
    const chain c = dp_test_chain(rng, {.min_stages = 20, .max_stages = 32, .max_size = 1000});
    CAPTURE(remat::testing::chain_text(c));
    const model md = remat::detail::make_model(c, 1);
    for (const dp_branches branches : both) {
      CAPTURE(static_cast<int>(branches));
      const interval_bounds b = bounds_of(md, branches);
      const remat::detail::frontier_table f =
          remat::detail::frontier_dp(md, interval_bounds{}, {.branches = branches});
      const std::vector<remat::detail::frontier_step>& root = f.root();
      REQUIRE_FALSE(root.empty());
      // From the least memory to the fastest schedule's, and between breakpoints.
      for (int k = 0; k < 4; ++k) {
        const std::size_t p = std::uniform_int_distribution<std::size_t>(0, root.size() - 1)(rng);
        const size_type m = root[p].m + (k % 2 == 0 ? 0 : (k == 1 ? -1 : 7));
        CAPTURE(m);
        const search_result r = remat::detail::search_dp(md, b, m, 64, branches);
        REQUIRE(r.complete);
        CHECK(r.value == f.value(0, md.L, m));
        if (!r.ops.empty()) {
          const remat::replay_result run = remat::simulate(c, r.ops);
          CHECK(run.valid());
          CHECK(run.peak_memory <= md.x[0] + m);
          // The value is on the model's time grid; the replay sums the chain's own times.
          CHECK(run.makespan == doctest::Approx(r.value).epsilon(1e-12));
        }
      }
    }
  }
}

TEST_CASE("property: the lower bounds are never above the optimum, every cell and memory") {
  std::mt19937_64 rng(1603);
  for (int n = 0; n < 300; ++n) {
    const chain c = dp_test_chain(rng, {.min_stages = 1, .max_stages = 8, .max_size = 30});
    CAPTURE(remat::testing::chain_text(c));
    const model md = remat::detail::make_model(c, 1);
    for (const dp_branches branches : both) {
      const size_type M = everything(md);
      const reference_table ref = remat::detail::reference_dp(md, M, branches);
      const size_type slots = std::uniform_int_distribution<size_type>(1, 12)(rng);
      const remat::detail::lower_bound_table lb = remat::detail::make_lower_bounds(
          remat::detail::plan_lower_bounds(md, M, slots, branches, 1), branches, 1);
      long above = 0;
      for (std::int32_t i = 0; i <= md.L; ++i)
        for (std::int32_t l = i; l <= md.L; ++l)
          for (size_type m = 0; m <= M; ++m)
            if (lb.at(interval_index(md.L, i, l), m) > ref.value[ref.at(i, l, m)]) ++above;
      CHECK(above == 0);
    }
  }
}

// The (cell, memory) pairs, memories 0 to m, where the lower bounds differ from the optimum.
long bounds_off_optimum(const model& md, const remat::detail::lower_bound_table& lb,
                        const reference_table& ref, size_type m) {
  long differ = 0;
  for (std::int32_t i = 0; i <= md.L; ++i)
    for (std::int32_t l = i; l <= md.L; ++l)
      for (size_type k = 0; k <= m; ++k)
        if (lb.at(interval_index(md.L, i, l), k) != ref.value[ref.at(i, l, k)]) ++differ;
  return differ;
}

// Sizes that are multiples of a power of two w, and memories whose m / slots is not: the unit
// stays within slots / 4 to 4 slots memories, and mostly divides every size (w does, losing
// nothing); where it does, rounding down loses nothing and the bounds are the optimum.
TEST_CASE("the lower bounds' unit divides the common sizes; the bounds are then exact") {
  std::mt19937_64 rng(1606);
  int divides = 0;
  const int chains = 200;
  for (int n = 0; n < chains; ++n) {
    chain c = dp_test_chain(rng, {.min_stages = 1, .max_stages = 7, .max_size = 6});
    const size_type w = size_type{1} << std::uniform_int_distribution<int>(2, 6)(rng);
    c.input_size *= w;
    c.loss_overhead *= w;
    for (remat::stage& s : c.stages) {
      s.output_size *= w;
      s.tape_size *= w;
      s.forward_overhead *= w;
      s.backward_overhead *= w;
      if (s.recording_overhead) *s.recording_overhead *= w;
      for (remat::stage_option& o : s.options) {
        o.tape_size *= w;
        o.forward_overhead *= w;
        o.backward_overhead *= w;
      }
    }
    CAPTURE(remat::testing::chain_text(c));
    remat::validate(c);  // scaled as a whole, the chain stays valid
    const model md = remat::detail::make_model(c, 1);
    const size_type M = everything(md);
    const size_type m = std::uniform_int_distribution<size_type>(M / 4, M)(rng);
    // m / slots a little above w: w is a candidate, and m / slots does not divide the sizes.
    const size_type slots =
        std::max<size_type>(1, m / (w + std::uniform_int_distribution<size_type>(1, w - 1)(rng)));
    const size_type unit = remat::detail::lower_bound_unit(md, m, slots);
    const size_type target = std::max<size_type>(1, m / slots);
    CHECK(unit >= std::max<size_type>(1, target / 4));
    CHECK(unit <= 4 * target);
    if (remat::detail::rounding_loss(md, unit) != 0) continue;  // not every size divided
    ++divides;
    for (const dp_branches branches : both) {
      const reference_table ref = remat::detail::reference_dp(md, m, branches);
      const remat::detail::lower_bound_table lb = remat::detail::make_lower_bounds(
          remat::detail::plan_lower_bounds(md, m, slots, branches, 1), branches, 1);
      REQUIRE(lb.unit == unit);
      CHECK(bounds_off_optimum(md, lb, ref, m) == 0);
    }
  }
  CHECK(divides > chains / 2);
}

// ResNet-1001's case in small: every output 64, every tape 128, m / slots 200. Near m / slots
// (100 to 400) the units lose more than 20% of m (128 drops half of each output), so the unit is
// 64, finer than half of m / slots, and the bounds are the optimum.
TEST_CASE("the lower bounds' unit goes finer where the units near m / slots lose much") {
  chain c;
  c.input_size = 64;
  for (int k = 0; k < 12; ++k) c.stages.push_back({1.0, 2.0, 64, 128, 0, 0, {}});
  const model md = remat::detail::make_model(c, 1);
  const size_type m = 1200, slots = 6;
  CHECK(remat::detail::lower_bound_unit(md, m, slots) == 64);
  for (const dp_branches branches : both) {
    const reference_table ref = remat::detail::reference_dp(md, m, branches);
    const remat::detail::lower_bound_table lb = remat::detail::make_lower_bounds(
        remat::detail::plan_lower_bounds(md, m, slots, branches, 1), branches, 1);
    CHECK(bounds_off_optimum(md, lb, ref, m) == 0);
  }
}

// Random sizes (no unit near m / 512 divides them) make loose bounds: the search is not tried,
// and costs nothing. The same chain with its sizes rounded to multiples of 2^20 is searched.
TEST_CASE("the search is not tried where rounding to its unit loses more than a quarter of m") {
  std::mt19937_64 rng(1607);
  for (const bool aligned : {false, true}) {
    chain c;
    c.input_size = 1 << 20;
    std::uniform_int_distribution<size_type> size(500000, 2000000);
    const int stages = aligned ? 30 : 200;
    for (int k = 0; k < stages; ++k) {
      size_type out = size(rng);
      if (aligned) out = (out >> 20 << 20) + (size_type{1} << 20);
      c.stages.push_back({1.0, 2.0, out, 3 * out, out, 2 * out, {}});
    }
    const model md = remat::detail::make_model(c, 1);
    const dp_branches branches = dp_branches::tape_and_checkpoint;
    const interval_bounds b = bounds_of(md, branches);
    const size_type m = b.need[interval_index(md.L, 0, md.L)] * 2;
    const size_type unit =
        remat::detail::lower_bound_unit(md, m, remat::detail::tuning.search_slots);
    const double loss = remat::detail::rounding_loss(md, unit) / static_cast<double>(m);
    CAPTURE(loss);
    const search_result r = remat::detail::search_dp_within(md, b, m, branches, 1, 1e6, 1e12);
    // The solve asks `search_plan` before it weighs the search against the frontier DP.
    CHECK(remat::detail::search_plan(md, m, branches, 1).has_value() == aligned);
    if (aligned) {
      CHECK(loss < remat::detail::tuning.search_max_rounding_loss);
      CHECK(r.complete);
      CHECK(r.work > 0);
    } else {
      CHECK(loss > remat::detail::tuning.search_max_rounding_loss);
      CHECK_FALSE(r.complete);
      CHECK(r.work == 0);
    }
  }
}

// The search reads its bounds from per-interval rows and divides by the unit with a
// multiplication: the same values as the table's own lookup, at every memory of small chains and
// at random memories of chains with sizes up to 2^45 (the solve searches only where sums of
// sizes are exact in doubles, `need_in_doubles`).
TEST_CASE("the search's lookups are max(S, LB) from the table, huge sizes included") {
  std::mt19937_64 rng(1605);
  for (int n = 0; n < 200; ++n) {
    const bool huge = n % 2 == 1;
    const chain c = dp_test_chain(
        rng, {.min_stages = 1, .max_stages = 10, .max_size = huge ? size_type{1} << 45 : 40});
    CAPTURE(remat::testing::chain_text(c));
    const model md = remat::detail::make_model(c, 1);
    REQUIRE(md.exact_sums);
    for (const dp_branches branches : both) {
      const interval_bounds b = bounds_of(md, branches);
      const size_type M = everything(md);
      const size_type slots = std::uniform_int_distribution<size_type>(1, 40)(rng);
      const remat::detail::lower_bound_table lb = remat::detail::make_lower_bounds(
          remat::detail::plan_lower_bounds(md, M, slots, branches, 1), branches, 1);
      remat::detail::search::engine s(md, b, branches);
      s.restart(lb, remat::detail::infinite_time);
      auto want = [&](std::size_t cell, size_type m) {
        if (m < b.need[cell]) return remat::detail::infinite_time;
        if (m >= b.store[cell]) return b.S[cell];
        return std::max(b.S[cell], lb.at(cell, m));
      };
      long differ = 0;
      std::uniform_int_distribution<size_type> any(0, M);
      for (std::int32_t i = 0; i <= md.L; ++i)
        for (std::int32_t l = i; l <= md.L; ++l) {
          const std::size_t cell = interval_index(md.L, i, l);
          auto check = [&](size_type m) {
            if (s.lower(cell, m) != want(cell, m)) ++differ;
          };
          if (!huge) {
            for (size_type m = 0; m <= M; ++m) check(m);
            continue;
          }
          // Around the multiples of the unit, where floor(m / unit) steps, and anywhere.
          for (int k = 0; k < 20; ++k) {
            const size_type near = any(rng) / lb.unit * lb.unit;
            for (const size_type m : {near - 1, near, near + 1, any(rng)})
              if (m >= 0 && m <= M) check(m);
          }
        }
      CHECK(differ == 0);
    }
  }
}

TEST_CASE("a cap on the work stops the search; a larger one resumes it to the same result") {
  std::mt19937_64 rng(1604);
  int stopped = 0;
  for (int n = 0; n < 40; ++n) {
    const chain c = dp_test_chain(rng, {.min_stages = 20, .max_stages = 30, .max_size = 1000});
    CAPTURE(remat::testing::chain_text(c));
    const model md = remat::detail::make_model(c, 1);
    const dp_branches branches = dp_branches::tape_and_checkpoint;
    const interval_bounds b = bounds_of(md, branches);
    const size_type m = b.need[interval_index(md.L, 0, md.L)] + 200;
    const search_result whole = remat::detail::search_dp(md, b, m, 16, branches);
    REQUIRE(whole.complete);
    if (whole.work < 100) continue;
    ++stopped;
    const remat::detail::lower_bound_table lb = remat::detail::make_lower_bounds(
        remat::detail::plan_lower_bounds(md, m, 16, branches, 1), branches, 1);
    remat::detail::search::engine s(md, b, branches);
    s.restart(lb, whole.work / 4);
    const search_result part = remat::detail::search_dp(md, s, m);
    CHECK_FALSE(part.complete);
    CHECK(part.ops.empty());
    CHECK(part.work <= whole.work / 4 + static_cast<double>(md.L) + 1);
    // Resumed with finer bounds: what was solved is kept.
    const remat::detail::lower_bound_table finer = remat::detail::make_lower_bounds(
        remat::detail::plan_lower_bounds(md, m, 64, branches, 1), branches, 1);
    s.restart(finer, remat::detail::infinite_time);
    const search_result resumed = remat::detail::search_dp(md, s, m);
    REQUIRE(resumed.complete);
    CHECK(resumed.value == whole.value);
    CHECK(resumed.ops == whole.ops);
  }
  CHECK(stopped > 20);
}

}  // namespace unit_detail_dp_engines_search_test
