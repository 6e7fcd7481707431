// The dense DP against the reference DP: the same value and the same choice in every cell, bit for
// bit, hence the same schedules, with one thread or several; and the table-memory guard.
#include <remat/detail/dp/engines/dense.hpp>
#include <remat/detail/dp/engines/reference.hpp>

#include <remat/simulate.hpp>
#include <remat/solvers/optimal.hpp>

#include <doctest/doctest.h>

#include "chain_text.hpp"
#include "random_chain.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <new>
#include <random>
#include <string>
#include <vector>

namespace unit_detail_dp_engines_dense_test {

namespace {

using remat::chain;
using remat::size_type;
using remat::detail::dense_table;
using remat::detail::dp_branches;
using remat::detail::interval_index;
using remat::detail::model;
using remat::detail::reference_table;

// Times that are not dyadic (so the order of additions matters to the last bit), with repeats
// (so that ties happen) and zeros.
void roughen_times(chain& c, std::mt19937_64& rng) {
  const double pool[] = {0.0, 0.1, 0.3, 0.7, 1.1, 2.9, 1.0 / 3.0, 3.7};
  auto pick = [&] { return pool[std::uniform_int_distribution<std::size_t>(0, 7)(rng)]; };
  for (remat::stage& s : c.stages) {
    s.forward_time = pick();
    s.backward_time = pick();
  }
  c.loss_time = pick();
}

// `side`: the tiles' side, 0 for the automatic one (8 for these short chains: two tiles a side
// for 9 stages; smaller sides reach more of the split points shared by a tile's cells).
dense_table dense_of(const model& md, size_type M, dp_branches branches, unsigned threads,
                     std::int32_t side = 0) {
  remat::detail::interval_bounds bounds = remat::detail::make_interval_bounds(
      md, remat::detail::persistent_need(md, branches), branches);
  remat::detail::dense_layout layout = remat::detail::make_dense_layout(bounds, md.L, M);
  if (side <= 0) side = remat::detail::dense::tile_side(md.L, M);
  return remat::detail::dense_dp_tiled(md, std::move(bounds), std::move(layout), M, branches,
                                       threads, side);
}

std::vector<remat::op> dense_ops_at(const model& md, const dense_table& t, size_type m) {
  return remat::detail::persistent_ops(
      md, 0, md.L, m,
      [&](std::int32_t i, std::int32_t l, size_type cm) { return t.choice_at(md, i, l, cm); });
}

// Every cell of the two tables; returns the number of cells that differ.
long differences(const model& md, const reference_table& ref, const dense_table& dense) {
  long bad = 0;
  for (std::int32_t i = 0; i <= md.L; ++i)
    for (std::int32_t l = i; l <= md.L; ++l)
      for (size_type m = 0; m <= ref.M; ++m) {
        const double r = ref.value[ref.at(i, l, m)];
        const double f = dense.get(i, l, m);
        if (r != f) {
          ++bad;
          continue;
        }
        if (r < remat::detail::infinite_time &&
            ref.choice[ref.at(i, l, m)] != dense.choice_at(md, i, l, m))
          ++bad;
      }
  return bad;
}

}  // namespace

TEST_CASE("property: the dense DP equals the reference in every cell, 1 to 3 threads, any tile") {
  std::mt19937_64 rng(51);
  long cells = 0;
  int cases = 0;
  int checkpoint_only = 0;
  for (; cases < 2400; ++cases) {
    remat::testing::random_chain_options o;
    o.max_stages = 9;
    chain c = remat::testing::random_chain(rng, o);
    if (cases % 2 == 1) roughen_times(c, rng);
    INFO(remat::testing::chain_text(c));
    // Units 1 (exact) and 2, 3 (sizes rounded up, as with slots).
    const size_type unit = 1 + cases % 3;
    const model md = remat::detail::make_model(c, unit);
    const dp_branches branches =
        cases % 5 == 4 ? dp_branches::checkpoint_only : dp_branches::tape_and_checkpoint;
    checkpoint_only += branches == dp_branches::checkpoint_only ? 1 : 0;
    const std::size_t root = interval_index(md.L, 0, md.L);
    const remat::detail::interval_bounds b = remat::detail::make_interval_bounds(
        md, remat::detail::persistent_need(md, branches), branches);
    // Past store (where the tape branch ends the search) or, without it, somewhere around it.
    const size_type M =
        (branches == dp_branches::tape_and_checkpoint ? b.store[root] : 2 * b.need[root]) +
        cases % 4;
    const unsigned threads = 1 + static_cast<unsigned>(cases % 3);
    const std::int32_t side = cases % 4 == 0 ? 0 : 1 + cases % 4;  // automatic, 2, 3, 4
    CAPTURE(unit);
    CAPTURE(M);
    CAPTURE(threads);
    CAPTURE(side);
    const reference_table ref = remat::detail::reference_dp(md, M, branches);
    const dense_table got = dense_of(md, M, branches, threads, side);
    REQUIRE(differences(md, ref, got) == 0);
    cells += static_cast<long>(remat::detail::interval_count(md.L)) * (M + 1);
    // The schedules read back at every budget are the same, and replay to the predicted time.
    for (size_type m = b.need[root]; m <= M; ++m) {
      const std::vector<remat::op> ops = dense_ops_at(md, got, m);
      CHECK(ops == remat::detail::reference_ops(md, ref, 0, md.L, m));
    }
  }
  CHECK(cases == 2400);
  CHECK(checkpoint_only == 480);
  CHECK(cells > 500000);
}

// Times so large that their sums are not exact (`model::exact_sums` false): the dense DP does
// without its window and still matches the reference bit for bit.
TEST_CASE("property: times near the largest double, where sums round, 1 and 3 threads") {
  std::mt19937_64 rng(54);
  int tested = 0;
  for (int cases = 0; cases < 200; ++cases) {
    remat::testing::random_chain_options o;
    o.min_stages = 3;
    o.max_stages = 5;
    chain c = remat::testing::random_chain(rng, o);
    roughen_times(c, rng);
    for (remat::stage& s : c.stages) {
      s.forward_time *= 1e306;
      s.backward_time *= 1e306;
    }
    c.loss_time *= 1e306;
    INFO(remat::testing::chain_text(c));
    REQUIRE_NOTHROW(remat::validate(c));
    const model md = remat::detail::make_model(c, 1);
    if (md.exact_sums) continue;  // small draws: sums exact after all
    ++tested;
    const dp_branches branches = dp_branches::tape_and_checkpoint;
    const remat::detail::interval_bounds b = remat::detail::make_interval_bounds(
        md, remat::detail::persistent_need(md, branches), branches);
    const size_type M = b.store[interval_index(md.L, 0, md.L)];
    const reference_table ref = remat::detail::reference_dp(md, M, branches);
    for (const unsigned threads : {1U, 3U})
      CHECK(differences(md, ref, dense_of(md, M, branches, threads, 2)) == 0);
  }
  CHECK(tested > 150);
}

TEST_CASE("property: solve_optimal's schedule is the reference's, whatever the thread count") {
  std::mt19937_64 rng(52);
  int feasible = 0;
  for (int n = 0; n < 300; ++n) {
    remat::testing::random_chain_options o;
    o.max_stages = 12;
    o.max_size = 1000;
    chain c = remat::testing::random_chain(rng, o);
    roughen_times(c, rng);
    INFO(remat::testing::chain_text(c));
    const size_type top =
        remat::simulate(c, remat::detail::store_all_ops(static_cast<std::int32_t>(c.length())))
            .peak_memory;
    const size_type budget = std::uniform_int_distribution<size_type>(top / 3, top + 10)(rng);
    const size_type slots = std::uniform_int_distribution<size_type>(20, 80)(rng);
    CAPTURE(budget);
    CAPTURE(slots);
    const remat::solve_result one = remat::solve_optimal(c, budget, {.slots = slots});
    const remat::solve_result many =
        remat::solve_optimal(c, budget, {.slots = slots, .threads = 3});
    CHECK(one.feasible == many.feasible);
    CHECK(one.schedule == many.schedule);
    if (!one.feasible) continue;
    ++feasible;
    if (top <= budget) {
      // Store-all fits in bytes: the solve returns it, whether or not the rounded DP fits it.
      CHECK(one.schedule.ops ==
            remat::detail::store_all_ops(static_cast<std::int32_t>(c.length())));
      continue;
    }
    const model md = remat::detail::make_model(c, one.unit);
    const size_type M =
        std::min(
            budget / one.unit,
            remat::simulate(remat::detail::to_chain(md),
                            remat::detail::store_all_ops(static_cast<std::int32_t>(c.length())))
                .peak_memory) -
        md.x[0];
    const reference_table ref = remat::detail::reference_dp(md, std::max<size_type>(M, 0));
    const double dp = M < 0 ? remat::detail::infinite_time : ref.value[ref.at(0, md.L, M)];
    // With slots the solve is the dense DP's, nothing else: the reference's schedule.
    REQUIRE(dp < remat::detail::infinite_time);
    CHECK(one.schedule.ops == remat::detail::reference_ops(md, ref, 0, md.L, M));
    CHECK(one.schedule.makespan == dp);
  }
  CHECK(feasible > 100);
}

TEST_CASE("longer chains: 1 and 4 threads fill the same table") {
  std::mt19937_64 rng(53);
  for (int n = 0; n < 6; ++n) {
    remat::testing::random_chain_options o;
    o.min_stages = 40;
    o.max_stages = 60;
    chain c = remat::testing::random_chain(rng, o);
    roughen_times(c, rng);
    const model md = remat::detail::make_model(c, 1);
    const dp_branches branches =
        n % 2 == 0 ? dp_branches::tape_and_checkpoint : dp_branches::checkpoint_only;
    const size_type M = 40 + 20 * n;
    const dense_table one = dense_of(md, M, branches, 1);
    const dense_table four = dense_of(md, M, branches, 4);
    CHECK(one.value == four.value);
    if (n < 2) {  // and the reference agrees (the slowest part of this file)
      const reference_table ref = remat::detail::reference_dp(md, M, branches);
      CHECK(differences(md, ref, one) == 0);
    }
  }
}

TEST_CASE("property: many blocks of m and many tiles: every cell equals the reference's") {
  // Budgets of hundreds of units (the pruning works on blocks of 32), chains of 12 to 30 stages
  // cut into tiles of 2 to 7: most split points are shared by a tile's cells.
  std::mt19937_64 rng(55);
  int compared = 0;
  for (int n = 0; n < 40; ++n) {
    remat::testing::random_chain_options o;
    o.min_stages = 12;
    o.max_stages = 30;
    o.max_size = 60;
    chain c = remat::testing::random_chain(rng, o);
    if (n % 2 == 1) roughen_times(c, rng);
    INFO(remat::testing::chain_text(c));
    const model md = remat::detail::make_model(c, 1);
    const dp_branches branches =
        n % 4 == 3 ? dp_branches::checkpoint_only : dp_branches::tape_and_checkpoint;
    const remat::detail::interval_bounds b = remat::detail::make_interval_bounds(
        md, remat::detail::persistent_need(md, branches), branches);
    const size_type need = b.need[interval_index(md.L, 0, md.L)];
    if (need == remat::detail::unreachable) continue;
    // From a tight budget to well above it.
    const size_type M = need + (need * static_cast<size_type>(n % 5)) / 2 + 40;
    const std::int32_t side = 2 + n % 6;
    const unsigned threads = 1 + static_cast<unsigned>(n % 2);
    CAPTURE(M);
    CAPTURE(side);
    CAPTURE(threads);
    const reference_table ref = remat::detail::reference_dp(md, M, branches);
    CHECK(differences(md, ref, dense_of(md, M, branches, threads, side)) == 0);
    ++compared;
  }
  CHECK(compared >= 30);
}

TEST_CASE("the table-memory guard refuses before allocating, with a clear message") {
  std::mt19937_64 rng(54);
  remat::testing::random_chain_options o;
  o.min_stages = 30;
  o.max_stages = 30;
  o.max_size = 1000;
  const chain c = remat::testing::random_chain(rng, o);
  // Below store-all's peak, where the DP runs (at it, store-all is returned without a table).
  const size_type budget = remat::simulate(c, remat::detail::store_all_ops(30)).peak_memory * 3 / 4;
  const remat::solve_result fits = remat::solve_optimal(c, budget, {.slots = 300});
  REQUIRE(fits.feasible);
  // The estimate is exact: the table of this solve takes exactly `bytes`.
  const model md = remat::detail::make_model(c, fits.unit);
  const size_type store_all =
      remat::simulate(remat::detail::to_chain(md), remat::detail::store_all_ops(30)).peak_memory;
  const size_type M = std::min(budget / fits.unit, store_all) - md.x[0];
  const remat::detail::interval_bounds b = remat::detail::make_interval_bounds(
      md, remat::detail::persistent_need(md), dp_branches::tape_and_checkpoint);
  const remat::detail::dense_layout layout = remat::detail::make_dense_layout(b, md.L, M);
  const auto bytes = static_cast<std::size_t>(remat::detail::dense_table_bytes(layout, md.L, M, 2));
  CHECK(bytes > layout.entries * sizeof(double));
  CHECK(remat::solve_optimal(c, budget, {.slots = 300, .max_table_bytes = bytes, .threads = 2})
            .schedule == fits.schedule);
  try {
    (void)remat::solve_optimal(c, budget,
                               {.slots = 300, .max_table_bytes = bytes - 1, .threads = 2});
    FAIL("no solver_error");
  } catch (const remat::solver_error& e) {
    const std::string what = e.what();
    CHECK(what.starts_with("optimal: the DP table for 30 stages"));
    CHECK(what.find("fewer slots") != std::string::npos);
  }
  // Without a limit: half the physical memory, where it can be read.
  const std::size_t physical = remat::detail::physical_memory_bytes();
  CHECK(remat::detail::default_table_limit() ==
        (physical == 0 ? std::size_t{4} << 30 : physical / 2));
  CHECK(remat::detail::dp_threads(0) >= 1);
  CHECK(remat::detail::dp_threads(3) == 3);
}

TEST_CASE("the table allocator: huge-page alignment from 32 MiB to 1 GiB, values kept") {
  using alloc = remat::detail::table_allocator<double>;
  const std::size_t mib = std::size_t{1} << 20;
#if defined(__linux__)
  CHECK_FALSE(alloc::huge(32 * mib - 1));
  CHECK(alloc::huge(32 * mib));
  CHECK(alloc::huge(1024 * mib));
  CHECK_FALSE(alloc::huge(1024 * mib + 1));
#endif
  remat::detail::table_vector big(5 * mib);  // 40 MiB
  if (alloc::huge(big.size() * sizeof(double)))
    CHECK(reinterpret_cast<std::uintptr_t>(big.data()) % (2 * mib) == 0);
  for (std::size_t k = 0; k < big.size(); k += 4096) big[k] = static_cast<double>(k);
  remat::detail::table_vector copy = big;
  CHECK(copy == big);
  remat::detail::table_vector small(10, 2.5);  // a value given is a value kept
  CHECK(small == remat::detail::table_vector(10, 2.5));
  CHECK_THROWS_AS((void)alloc{}.allocate(std::numeric_limits<std::size_t>::max() / 4),
                  std::bad_array_new_length);
}

TEST_CASE("tile sides: 24, 32 from 768 slots, 13 tiles a side, never past the chain or 64 MiB") {
  using remat::detail::dense::tile_side;
  CHECK(tile_side(500, 500) == 24);
  CHECK(tile_side(200, 500) == 16);  // 13 tiles a side
  CHECK(tile_side(50, 500) == 8);    // but not below 8
  CHECK(tile_side(1000, 1000) == 32);
  CHECK(tile_side(5, 1000) == 6);
  CHECK(tile_side(0, 10) == 1);
  for (const size_type M : {size_type{8000}, size_type{100000}, size_type{10000000}}) {
    const std::int32_t side = tile_side(1000, M);
    CHECK(side >= 2);
    CHECK((side == 2 ||
           static_cast<double>(side * side) * static_cast<double>(M + 1) * 8 <= 67108864.0));
  }
}

}  // namespace unit_detail_dp_engines_dense_test
