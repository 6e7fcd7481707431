// The frontier DP against the dense reference DP in exact units: the same value in every cell at
// every memory, bit for bit; schedules read back at any memory replay at that value within it;
// thinned frontiers bracket the exact ones; threads and shared intervals change nothing.
#include <remat/detail/dp/engines/frontier.hpp>
#include <remat/detail/dp/engines/reference.hpp>

#include <remat/simulate.hpp>
#include <remat/solvers/optimal.hpp>

#include <doctest/doctest.h>

#include "chain_text.hpp"
#include "dp_chains.hpp"
#include "random_chain.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace unit_detail_dp_engines_frontier_test {

namespace {

using remat::chain;
using remat::size_type;
using remat::detail::dp_branches;
using remat::detail::frontier_options;
using remat::detail::frontier_step;
using remat::detail::frontier_table;
using remat::detail::model;
using remat::detail::reference_table;
using remat::testing::dp_test_chain;
using remat::testing::everything;

frontier_table frontier_of(const model& md, frontier_options o) {
  const remat::detail::interval_bounds b = remat::detail::make_interval_bounds(
      md, remat::detail::persistent_need(md, o.branches), o.branches);
  return remat::detail::frontier_dp(md, b, o);
}

// Cells (interval, m) where the frontier's value differs from the reference's.
long differences(const model& md, const reference_table& ref, const frontier_table& f) {
  long bad = 0;
  for (std::int32_t i = 0; i <= md.L; ++i)
    for (std::int32_t l = i; l <= md.L; ++l)
      for (size_type m = 0; m <= ref.M; ++m)
        if (ref.value[ref.at(i, l, m)] != f.value(i, l, m)) ++bad;
  return bad;
}

bool well_formed(const frontier_table& t) {
  if (t.choices.size() != t.frontiers.size()) return false;
  for (std::size_t c = 0; c < t.frontiers.size(); ++c)
    if (t.choices[c].size() != t.frontiers[c].size()) return false;
  for (const auto& f : t.frontiers)
    for (std::size_t k = 1; k < f.size(); ++k)
      if (!(f[k - 1].m < f[k].m && f[k].t < f[k - 1].t)) return false;
  return true;
}

}  // namespace

TEST_CASE("property: frontier values equal the dense DP's in exact units, every cell and memory") {
  std::mt19937_64 rng(1501);
  for (int n = 0; n < 1500; ++n) {
    const chain c = dp_test_chain(rng, {.min_stages = 1, .max_stages = 9});
    CAPTURE(remat::testing::chain_text(c));
    const model md = remat::detail::make_model(c, 1);
    for (const dp_branches branches :
         {dp_branches::tape_and_checkpoint, dp_branches::checkpoint_only}) {
      CAPTURE(static_cast<int>(branches));
      const size_type M = everything(md);
      const reference_table ref = remat::detail::reference_dp(md, M, branches);
      const frontier_table f = frontier_of(md, {.branches = branches});
      REQUIRE(well_formed(f));
      REQUIRE(differences(md, ref, f) == 0);
    }
  }
}

// Frontiers of many blocks of `merge_block` points, so that the merge skips blocks and rebuilds
// parts of the envelope: longer chains, fewer of them.
TEST_CASE("property: long chains, frontiers of many blocks: values equal the dense DP's") {
  std::mt19937_64 rng(1505);
  std::size_t largest = 0;
  for (int n = 0; n < 16; ++n) {
    const chain c = dp_test_chain(rng, {.min_stages = 16, .max_stages = 28, .max_size = 40});
    CAPTURE(remat::testing::chain_text(c));
    const model md = remat::detail::make_model(c, 1);
    for (const dp_branches branches :
         {dp_branches::tape_and_checkpoint, dp_branches::checkpoint_only}) {
      CAPTURE(static_cast<int>(branches));
      const reference_table ref = remat::detail::reference_dp(md, everything(md), branches);
      const frontier_table f = frontier_of(md, {.branches = branches});
      REQUIRE(well_formed(f));
      REQUIRE(differences(md, ref, f) == 0);
      for (const auto& v : f.frontiers) largest = std::max(largest, v.size());
    }
  }
  CHECK(largest > 4 * remat::detail::frontier::merge_block);
}

TEST_CASE("property: a schedule read back at any memory replays at its value, within it") {
  std::mt19937_64 rng(1502);
  for (int n = 0; n < 400; ++n) {
    const chain c = dp_test_chain(rng, {.min_stages = 1, .max_stages = 12});
    CAPTURE(remat::testing::chain_text(c));
    const model md = remat::detail::make_model(c, 1);
    const frontier_table f = frontier_of(md, {});
    const std::vector<frontier_step>& root = f.root();
    REQUIRE(!root.empty());
    // At every breakpoint and one unit below the next (the far end of its step).
    for (std::size_t k = 0; k < root.size(); ++k) {
      for (const size_type m : {root[k].m, k + 1 < root.size() ? root[k + 1].m - 1 : root[k].m}) {
        const std::vector<remat::op> ops = remat::detail::frontier_ops(md, f, 0, md.L, m);
        const remat::replay_result r = remat::simulate(remat::detail::to_chain(md), ops);
        REQUIRE(r.valid());
        CHECK(r.peak_memory <= md.x[0] + m);
        CHECK(r.makespan == root[k].t);
      }
    }
  }
}

TEST_CASE("frontier: one thread or several, the same frontiers") {
  std::mt19937_64 rng(1503);
  for (int n = 0; n < 20; ++n) {
    const chain c = dp_test_chain(rng, {.min_stages = 20, .max_stages = 40, .max_size = 30});
    const model md = remat::detail::make_model(c, 1);
    const frontier_table one = frontier_of(md, {});
    const frontier_table three = frontier_of(md, {.threads = 3});
    for (std::int32_t i = 0; i <= md.L; ++i)
      for (std::int32_t l = i; l <= md.L; ++l) {
        const auto& a = one.of(i, l);
        const auto& b = three.of(i, l);
        REQUIRE(a.size() == b.size());
        REQUIRE(one.choices_of(i, l) == three.choices_of(i, l));
        for (std::size_t k = 0; k < a.size(); ++k) REQUIRE((a[k].m == b[k].m && a[k].t == b[k].t));
      }
  }
}

TEST_CASE("frontier: intervals of equal stages share one frontier") {
  chain c;
  c.input_size = 2;
  for (int k = 0; k < 30; ++k) c.stages.push_back({1, 2, 3, 5, 1, 2});
  c.loss_time = 1;
  const model md = remat::detail::make_model(c, 1);
  const frontier_table f = frontier_of(md, {});
  // Per length, one class for intervals away from the ends, one for those starting at 0 (the
  // input's size differs), one for those ending at the loss, and one for both.
  CHECK(f.frontiers.size() <= 4 * 31);
  CHECK(f.of(3, 10).data() == f.of(5, 12).data());
  CHECK(f.of(3, 10).data() != f.of(0, 7).data());
}

namespace {

// The largest `interval_cap` among the intervals of each class: what a capped table computes
// that class's shared frontier up to.
std::vector<size_type> class_caps(const model& md, const frontier_table& t, size_type cap) {
  std::vector<size_type> caps(t.frontiers.size(), -1);
  for (std::int32_t i = 0; i <= md.L; ++i)
    for (std::int32_t l = i; l <= md.L; ++l) {
      const auto k = static_cast<std::size_t>(t.kind[remat::detail::interval_index(md.L, i, l)]);
      caps[k] = std::max(caps[k], remat::detail::frontier::interval_cap(md, cap, i));
    }
  return caps;
}

// Intervals whose capped frontier is not the whole one's points up to its class's cap, choices
// included (so that it has every point at or below the interval's own cap, and none above the
// class's); `dropped` counts the whole one's points left out.
long capped_differences(const model& md, const frontier_table& whole, const frontier_table& capped,
                        size_type cap, long& dropped) {
  const std::vector<size_type> caps = class_caps(md, capped, cap);
  long bad = 0;
  for (std::int32_t i = 0; i <= md.L; ++i)
    for (std::int32_t l = i; l <= md.L; ++l) {
      const auto k =
          static_cast<std::size_t>(capped.kind[remat::detail::interval_index(md.L, i, l)]);
      const std::vector<frontier_step>& w = whole.of(i, l);
      const std::vector<frontier_step>& c = capped.of(i, l);
      std::size_t n = 0;
      while (n < w.size() && w[n].m <= caps[k]) ++n;
      bool same = c.size() == n;
      for (std::size_t p = 0; same && p < n; ++p)
        same = c[p].m == w[p].m && c[p].t == w[p].t &&
               capped.choices_of(i, l)[p] == whole.choices_of(i, l)[p];
      if (!same) ++bad;
      if (i == 0 && l == md.L) dropped += static_cast<long>(w.size() - n);
    }
  return bad;
}

}  // namespace

TEST_CASE("frontier: interval_cap, what a capped root leaves an interval starting at i") {
  chain c;
  c.input_size = 4;
  c.stages = {{1, 1, 3, 5, 0, 0}, {1, 1, 0, 2, 0, 0}};
  const model md = remat::detail::make_model(c, 1);
  using remat::detail::frontier::interval_cap;
  CHECK(interval_cap(md, 10, 0) == 10);
  CHECK(interval_cap(md, 10, 1) == 7);   // x[1] = 3 < xb[1] = 5
  CHECK(interval_cap(md, 10, 2) == 10);  // x[2] = 0
  CHECK(interval_cap(md, 2, 1) == -1);
  CHECK(interval_cap(md, -3, 0) == -3);
  CHECK(interval_cap(md, remat::detail::unreachable, 1) == remat::detail::unreachable);
}

// Every interval's capped frontier is the whole one up to its cap, bit for bit (choices too):
// the values a solve at one budget reads are those of the whole curve. Random caps from below the
// least budget to above store-all; zero sizes, shared intervals, one thread or three.
TEST_CASE("property: capped frontiers are the whole ones up to each interval's cap") {
  std::mt19937_64 rng(1506);
  long dropped = 0;
  int empty_roots = 0;
  for (int n = 0; n < 3000; ++n) {
    const bool long_chain = n % 10 == 0;
    const chain c = long_chain
                        ? dp_test_chain(rng, {.min_stages = 15, .max_stages = 30, .max_size = 60})
                        : dp_test_chain(rng, {.min_stages = 1, .max_stages = 10});
    CAPTURE(remat::testing::chain_text(c));
    const model md = remat::detail::make_model(c, 1);
    for (const dp_branches branches :
         {dp_branches::tape_and_checkpoint, dp_branches::checkpoint_only}) {
      CAPTURE(static_cast<int>(branches));
      const frontier_table whole = frontier_of(md, {.branches = branches});
      if (whole.root().empty()) continue;
      const size_type last = whole.root().back().m;
      const size_type cap = std::uniform_int_distribution<size_type>(-2, last + 2)(rng);
      CAPTURE(cap);
      const unsigned threads = n % 7 == 0 ? 3 : 1;
      const frontier_table capped =
          frontier_of(md, {.branches = branches, .threads = threads, .cap = cap});
      REQUIRE(well_formed(capped));
      CHECK(capped.cap == cap);
      REQUIRE(capped_differences(md, whole, capped, cap, dropped) == 0);
      for (size_type m = -1; m <= cap; ++m)
        REQUIRE(capped.value(0, md.L, m) == whole.value(0, md.L, m));
      if (capped.root().empty()) {
        ++empty_roots;
        CHECK(cap < whole.root().front().m);
      } else {
        CHECK(capped.root().front().m == whole.root().front().m);
        // The schedule read back at the cap is the whole table's.
        CHECK(remat::detail::frontier_ops(md, capped, 0, md.L, cap) ==
              remat::detail::frontier_ops(md, whole, 0, md.L, cap));
      }
    }
  }
  CHECK(dropped > 0);
  CHECK(empty_roots > 0);
}

// Where sums round, the dense DP's rule (S from store on) needs the whole frontier: the cap is
// not applied.
TEST_CASE("frontier: no cap where sums round") {
  chain c;
  c.input_size = 1;
  c.stages = {{5e307, 5e307, 2, 3, 0, 0}, {1, 1, 2, 3, 0, 0}};
  const model md = remat::detail::make_model(c, 1);
  REQUIRE_FALSE(md.exact_sums);
  const frontier_table whole = frontier_of(md, {});
  const frontier_table capped = frontier_of(md, {.cap = 0});
  CHECK(capped.cap == remat::detail::unreachable);
  CHECK(capped.root().size() == whole.root().size());
}

}  // namespace unit_detail_dp_engines_frontier_test
