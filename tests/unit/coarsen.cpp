// remat/coarsen.hpp: merged costs are safe (expanded coarse schedules replay on the fine chain
// within the coarse peaks and time), L blocks are the identity, the least-loss cuts are the
// optimum they claim, bad requests are errors; and solve's coarsen option.
#include <remat/coarsen.hpp>
#include <remat/solve.hpp>

#include <doctest/doctest.h>

#include "random_chain.hpp"
#include "random_schedule.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace unit_coarsen_test {

namespace {

using remat::chain;
using remat::coarse_chain;
using remat::op;
using remat::size_type;

std::size_t uniform(std::mt19937_64& rng, std::size_t lo, std::size_t hi) {
  return std::uniform_int_distribution<std::size_t>(lo, hi)(rng);
}

// Replays `coarse_ops` on the coarse chain and their expansion on the fine one, and checks the
// claim of detail/coarsen/block.hpp op by op: every fine op of a coarse op's expansion peaks no
// higher than it, memory between coarse ops is the same, times add up (dyadic: exactly).
void check_expansion(const chain& fine, const coarse_chain& cc, const std::vector<op>& coarse_ops) {
  const remat::replay_result coarse = remat::simulate(cc.chain, coarse_ops);
  REQUIRE(coarse.valid());
  const std::vector<op> ops = remat::expand(cc, coarse_ops);
  const remat::replay_result r = remat::simulate(fine, ops);
  REQUIRE_MESSAGE(r.valid(), remat::describe(r, ops));
  CHECK(r.peak_memory <= coarse.peak_memory);
  CHECK(r.makespan == coarse.makespan);
  std::size_t f = 0;
  for (std::size_t i = 0; i < coarse_ops.size(); ++i) {
    const op o = coarse_ops[i];
    std::size_t n = 1;
    if (o.kind != remat::op_kind::loss)
      n = static_cast<std::size_t>(cc.starts[static_cast<std::size_t>(o.stage) + 1] -
                                   cc.starts[static_cast<std::size_t>(o.stage)]);
    for (std::size_t j = 0; j < n; ++j, ++f) REQUIRE(r.op_peak[f] <= coarse.op_peak[i]);
    REQUIRE(r.memory_after[f - 1] == coarse.memory_after[i]);
  }
  CHECK(f == ops.size());
}

std::vector<std::int32_t> random_cuts(std::mt19937_64& rng, std::size_t L) {
  std::vector<std::int32_t> cuts;
  for (std::size_t k = 1; k < L; ++k)
    if (uniform(rng, 0, 2) == 0) cuts.push_back(static_cast<std::int32_t>(k));
  return cuts;
}

// The largest need (detail::block_builder's) and the sum of the cut activations of a partition
// (x[0] included).
std::pair<size_type, double> needs(const chain& c, const std::vector<std::int32_t>& starts) {
  size_type most = 0;
  double sum = 0;
  for (std::size_t b = 0; b + 1 < starts.size(); ++b) {
    remat::detail::block_builder builder(c, starts[b + 1]);
    while (builder.start() > starts[b]) builder.prepend();
    most = std::max(most, builder.need());
    sum += static_cast<double>(builder.input_size());
  }
  return {most, sum};
}

}  // namespace

TEST_CASE("coarse schedules expand to fine ones within the coarse peaks and time") {
  std::mt19937_64 rng(16);
  int checked = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const chain c = remat::testing::random_chain(rng, {.min_stages = 1, .max_stages = 12});
    const std::size_t L = c.length();
    coarse_chain cc;
    switch (trial % 3) {
      case 0: cc = remat::coarsen(c, uniform(rng, 1, L)); break;
      case 1: cc = remat::coarsen(c, uniform(rng, 1, L), remat::boundary_rule::even); break;
      default: cc = remat::coarsen(c, random_cuts(rng, L)); break;
    }
    REQUIRE(cc.starts.front() == 0);
    REQUIRE(static_cast<std::size_t>(cc.starts.back()) == L);
    // Any valid schedule of the coarse chain: random walks (not persistent: tapes and
    // activations of a block held together, recomputations), and the DP's at random budgets.
    for (int walk = 0; walk < 2; ++walk)
      if (const auto ops = remat::testing::random_schedule(cc.chain, rng, 400)) {
        check_expansion(c, cc, *ops);
        ++checked;
      }
    const size_type peak =
        remat::simulate(cc.chain,
                        remat::detail::store_all_ops(static_cast<std::int32_t>(cc.length())))
            .peak_memory;
    const auto budget = static_cast<size_type>(uniform(rng, 0, static_cast<std::size_t>(peak)));
    const remat::solve_result r = remat::solve(cc.chain, budget, {.slots = remat::exact_units});
    if (r.feasible) {
      check_expansion(c, cc, r.schedule.ops);
      CHECK(remat::simulate(c, remat::expand(cc, r.schedule.ops)).peak_memory <= budget);
      ++checked;
    }
  }
  CHECK(checked > 5000);
}

TEST_CASE("coarsening to L stages is the identity") {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 1000; ++trial) {
    const chain c = remat::testing::random_chain(rng, {.min_stages = 1, .max_stages = 16});
    const std::size_t L = c.length();
    std::vector<std::int32_t> every;
    for (std::size_t k = 1; k < L; ++k) every.push_back(static_cast<std::int32_t>(k));
    for (const coarse_chain& cc :
         {remat::coarsen(c, L), remat::coarsen(c, L, remat::boundary_rule::even),
          remat::coarsen(c, every)}) {
      REQUIRE(cc.chain == c);
      CHECK(cc.largest_block() == 1);
      const std::vector<op> all = remat::detail::store_all_ops(static_cast<std::int32_t>(L));
      CHECK(remat::expand(cc, all) == all);
    }
  }
}

TEST_CASE("one block: a chain's whole costs") {
  chain c;
  c.input_size = 2;
  // outputs 3, 10, 1; tapes 4, 12, 2; a forward overhead of 5 on stage 1
  c.stages = {{1, 2, 3, 4, 0, 1}, {0.5, 1, 10, 12, 5, 0}, {2, 4, 1, 2, 0, 0}};
  const coarse_chain cc = remat::coarsen(c, 1);
  REQUIRE(cc.length() == 1);
  const remat::stage& s = cc.chain.stages[0];
  CHECK(s.forward_time == 3.5);
  CHECK(s.backward_time == 7);
  CHECK(s.output_size == 1);
  CHECK(s.tape_size == 18);
  // F(1) peaks at x1 + x2 + ft1 = 3 + 10 + 5 over what is held; the block's output is 1.
  CHECK(s.forward_overhead == 17);
  // B(1): g_1 + g_2 + bt1 with the tape of stage 2 gone: 3 + 10 + 0 - 2 - x0 - x3 = 8.
  CHECK(s.backward_overhead == 8);
  CHECK(cc.largest_block() == 3);
}

TEST_CASE(
    "least-loss cuts: the least largest need, then the least cut activations, blocks <= 2L/K") {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 400; ++trial) {
    const chain c = remat::testing::random_chain(rng, {.min_stages = 2, .max_stages = 11});
    const auto L = static_cast<std::int32_t>(c.length());
    const auto K = static_cast<std::int32_t>(uniform(rng, 1, static_cast<std::size_t>(L)));
    const std::int32_t W = K == 1 ? L : 2 * ((L + K - 1) / K);
    // Every partition into K blocks of at most W stages, by brute force.
    std::pair<size_type, double> best{std::numeric_limits<size_type>::max(), 0};
    std::vector<std::int32_t> starts{0};
    std::function<void()> walk = [&] {
      const auto blocks = static_cast<std::int32_t>(starts.size()) - 1;
      if (blocks == K - 1) {
        if (L - starts.back() > W || L - starts.back() < 1) return;
        starts.push_back(L);
        best = std::min(best, needs(c, starts));
        starts.pop_back();
        return;
      }
      for (std::int32_t next = starts.back() + 1; next <= std::min(L - 1, starts.back() + W);
           ++next) {
        starts.push_back(next);
        walk();
        starts.pop_back();
      }
    };
    walk();
    const coarse_chain cc = remat::coarsen(c, static_cast<std::size_t>(K));
    REQUIRE(cc.length() == static_cast<std::size_t>(K));
    CHECK(static_cast<std::int32_t>(cc.largest_block()) <= W);
    CHECK(needs(c, cc.starts) == best);
    const coarse_chain even =
        remat::coarsen(c, static_cast<std::size_t>(K), remat::boundary_rule::even);
    CHECK(needs(c, cc.starts).first <= needs(c, even.starts).first);
  }
}

TEST_CASE("least-loss cuts: the same with the table of block needs and without it") {
  std::mt19937_64 rng(9);
  for (int trial = 0; trial < 300; ++trial) {
    const chain c = remat::testing::random_chain(rng, {.min_stages = 2, .max_stages = 60});
    const auto L = static_cast<std::int32_t>(c.length());
    const auto K = static_cast<std::int32_t>(uniform(rng, 1, static_cast<std::size_t>(L)));
    CHECK(remat::detail::least_loss_starts(c, K) == remat::detail::least_loss_starts(c, K, 0));
  }
}

TEST_CASE("bad requests are errors that say what is wrong") {
  chain c;
  c.input_size = 1;
  c.stages.assign(5, {1, 1, 1, 1, 0, 0});
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const remat::coarsen_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(message([&] { (void)remat::coarsen(c, 0); }) ==
        "coarsen: the stage count must be between 1 and the chain's length 5 (got 0)");
  CHECK(message([&] { (void)remat::coarsen(c, 6); }) ==
        "coarsen: the stage count must be between 1 and the chain's length 5 (got 6)");
  CHECK(message([&] { (void)remat::coarsen(c, std::vector<std::int32_t>{0}); }) ==
        "coarsen: cuts[0] = 0 is outside 1..4 (a cut is the first stage of a block other than "
        "the first)");
  CHECK(message([&] {
          (void)remat::coarsen(c, std::vector<std::int32_t>{2, 5});
        }).starts_with("coarsen: cuts[1] = 5 is outside 1..4"));
  CHECK(message([&] {
          (void)remat::coarsen(c, std::vector<std::int32_t>{3, 3});
        }) == "coarsen: cuts must be strictly increasing (cuts[1] = 3 after 3)");
  CHECK(message([&] {
          (void)remat::coarsen(c, std::vector<std::int32_t>{3, 2});
        }) == "coarsen: cuts must be strictly increasing (cuts[1] = 2 after 3)");
  const coarse_chain cc = remat::coarsen(c, 2);
  const std::vector<op> bad = {remat::f_all(2)};
  CHECK(message([&] { (void)remat::expand(cc, bad); }) ==
        "coarsen: expand: op 0 (F_all(2)) is not an op of the 2-stage coarse chain");
  const std::vector<op> bad_loss = {remat::loss_op(5)};
  CHECK(message([&] { (void)remat::expand(cc, bad_loss); }) ==
        "coarsen: expand: op 0 (loss) does not carry the coarse length 2");
  chain bad_chain = c;
  bad_chain.stages[1].tape_size = 0;
  CHECK_THROWS_AS((void)remat::coarsen(bad_chain, 2), remat::chain_error);
  // Merged sizes past 2^62: two tapes of 2^61 + 1.
  chain big;
  big.stages.assign(2, {1, 1, 0, (size_type{1} << 61) + 1, 0, 0});
  CHECK(message([&] { (void)remat::coarsen(big, 1); }) ==
        "coarsen: block 0 (stages 0..1) would have a merged size above 2^62; use more blocks");
}

TEST_CASE("solve with coarsen: fine-stage schedules, replayed on the chain") {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    const chain c = remat::testing::random_chain(rng, {.min_stages = 2, .max_stages = 14});
    const std::size_t L = c.length();
    const size_type peak =
        remat::simulate(c, remat::detail::store_all_ops(static_cast<std::int32_t>(L))).peak_memory;
    const auto budget = static_cast<size_type>(uniform(rng, 0, static_cast<std::size_t>(peak)));
    const std::size_t N = uniform(rng, 1, L);
    for (const remat::solver s : {remat::solver::optimal, remat::solver::revolve}) {
      const remat::solve_options options{.solver = s, .slots = remat::exact_units, .coarsen = N};
      const remat::solve_result r = remat::solve(c, budget, options);
      if (N == L) {
        CHECK(r.coarse_length == 0);
        CHECK(r == remat::solve(c, budget, {.solver = s, .slots = remat::exact_units}));
        continue;
      }
      CHECK(r.coarse_length == N);
      const coarse_chain cc = remat::coarsen(c, N);
      CHECK(r.largest_block == cc.largest_block());
      const remat::solve_result coarse =
          remat::solve(cc.chain, budget, {.solver = s, .slots = remat::exact_units});
      REQUIRE(r.feasible == coarse.feasible);
      CHECK(r.min_feasible_budget == coarse.min_feasible_budget);
      if (!r.feasible) continue;
      const remat::replay_result fine = remat::simulate(c, r.schedule);
      REQUIRE(fine.valid());
      CHECK(fine.peak_memory <= budget);
      CHECK(r.schedule.makespan == fine.makespan);
      CHECK(r.schedule.peak_memory == fine.peak_memory);
      CHECK(fine.makespan <= coarse.schedule.makespan);
      // Never faster than solving the fine chain itself (the coarse schedules are fine ones).
      if (s == remat::solver::optimal)
        CHECK(remat::solve(c, budget, {.slots = remat::exact_units}).schedule.makespan <=
              fine.makespan);
    }
  }
}

TEST_CASE("solve with automatic coarsening: only what the solver would refuse") {
  std::mt19937_64 rng(5);
  const chain c = remat::testing::random_chain(rng, {.min_stages = 300, .max_stages = 300});
  const size_type peak = remat::simulate(c, remat::detail::store_all_ops(300)).peak_memory;
  const size_type budget = peak / 2;
  // Accepted as given: the result of the plain solve.
  const remat::solve_result plain = remat::solve(c, budget, {.slots = 500});
  const remat::solve_result as_given =
      remat::solve(c, budget, {.slots = 500, .coarsen = remat::auto_coarsening});
  CHECK(as_given.coarse_length == 0);
  CHECK(as_given == plain);
  // Refused as given (a limit of a millisecond for the DP over 500 slots): coarsened until
  // accepted.
  remat::solve_options tight{.slots = 500, .max_estimated_seconds = 0.001};
  CHECK_THROWS_AS((void)remat::solve(c, budget, tight), remat::solver_error);
  tight.coarsen = remat::auto_coarsening;
  const remat::solve_result r = remat::solve(c, budget, tight);
  CHECK(r.coarse_length > 0);
  CHECK(r.coarse_length < 300);
  REQUIRE(r.feasible);
  CHECK(remat::simulate(c, r.schedule).fits(budget));
  CHECK(r.schedule.makespan >= plain.schedule.makespan);
  // A table limit is a limit too: 64 KiB leaves a few blocks.
  const remat::solve_result small_table = remat::solve(
      c, budget, {.slots = 500, .max_table_bytes = 65536, .coarsen = remat::auto_coarsening});
  CHECK(small_table.coarse_length > 0);
  CHECK(small_table.coarse_length < r.coarse_length);
  if (small_table.feasible) CHECK(remat::simulate(c, small_table.schedule).fits(budget));
  // Solvers that never refuse a long chain get it as given.
  tight.solver = remat::solver::revolve;
  CHECK(remat::solve(c, budget, tight).coarse_length == 0);
  // Bad budgets stay errors.
  CHECK_THROWS_AS((void)remat::solve(c, -1, tight), remat::solver_error);
}

TEST_CASE("automatic coarsening asks the estimate at the budget, not the whole curve's") {
  std::mt19937_64 rng(77);
  const chain c =
      remat::testing::random_chain(rng, {.min_stages = 120, .max_stages = 120, .max_size = 1000});
  const auto L = static_cast<std::int32_t>(c.length());
  const size_type peak =
      remat::simulate(c, remat::detail::store_all_ops(static_cast<std::int32_t>(c.length())))
          .peak_memory;
  const size_type least = remat::solve(c, 0).min_feasible_budget;
  const size_type budget = least + (peak - least) / 10;  // where the cap saves the most
  const remat::solve_options o{.slots = remat::exact_units, .max_table_bytes = 1000000};
  auto blocks = [&](std::int32_t K) {
    return remat::detail::merge_blocks(c, remat::detail::even_starts(L, K)).chain;
  };
  const auto K = static_cast<std::int32_t>(remat::detail::auto_coarse_length(c, budget, o));
  REQUIRE(K > 1);
  REQUIRE(K + 1 < L);
  // The most blocks whose solve at this budget is exact, as the solve itself says.
  CHECK(remat::estimate_solve_at(blocks(K), budget, o).within_limits);
  CHECK_FALSE(remat::estimate_solve_at(blocks(K + 1), budget, o).within_limits);
  const remat::solve_result r = remat::solve(blocks(K), budget, o);
  CHECK(r.exact);
  // The same bisection on the whole curve's estimate would keep fewer blocks.
  std::int32_t lo = 1, hi = L;
  while (hi - lo > 1) {
    const std::int32_t mid = lo + (hi - lo) / 2;
    (remat::estimate_solve(blocks(mid), o).within_limits ? lo : hi) = mid;
  }
  CHECK(lo < K);
}

}  // namespace unit_coarsen_test
