// The description of the DP's branches that every engine reads: each branch's own memory, parts
// and time are docs/model.md's, the walk visits exactly the branches that fit, in the DP's order,
// and the tables built from it agree with it.
#include <remat/detail/dp/branches.hpp>
#include <remat/detail/dp/intervals.hpp>

#include <doctest/doctest.h>

#include "chain_text.hpp"
#include "random_chain.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace unit_detail_dp_branches_test {

namespace {

using remat::chain;
using remat::size_type;
using remat::detail::checkpoint_branch;
using remat::detail::checkpoint_walk;
using remat::detail::dp_branches;
using remat::detail::model;
using remat::detail::tape_branch;

// Random chains, a third with options, some with zero sizes.
std::vector<model> random_models(std::uint64_t seed, int count) {
  std::mt19937_64 rng(seed);
  std::vector<model> out;
  for (int n = 0; n < count; ++n) {
    remat::testing::random_chain_options o;
    o.max_stages = 10;
    o.max_size = n % 3 == 0 ? 2 : 10;
    chain c = remat::testing::random_chain(rng, o);
    if (n % 3 == 1) remat::testing::add_random_options(rng, c, 3);
    out.push_back(remat::detail::make_model(c, 1));
  }
  return out;
}

// docs/model.md's checkpoint branch of (i, l) at j, written out.
checkpoint_branch plain_checkpoint(const model& md, std::int32_t i, std::int32_t l,
                                   std::int32_t j) {
  auto at = [](std::int32_t k) { return static_cast<std::size_t>(k); };
  checkpoint_branch b{i, l, j, 0, md.x[at(i + 1)] + md.ft[at(i)], 0, md.x[at(j)]};
  for (std::int32_t k = i; k < j; ++k) b.forward += md.fw[at(k)];
  for (std::int32_t k = i + 1; k < j; ++k)
    b.forwards = std::max(b.forwards, md.x[at(k)] + md.x[at(k + 1)] + md.ft[at(k)]);
  b.own = md.x[at(l + 1)] + b.forwards;
  return b;
}

// The walk of a three-stage chain, at compile time.
constexpr bool walk_of_three_stages() {
  // (not const: g++ 12 refuses const locals that own a vector in constant evaluation)
  model md = remat::detail::make_model(
      chain{{{1, 0, 2, 2, 1, 0}, {2, 0, 5, 5, 0, 0}, {4, 0, 1, 1, 3, 0}}, 1, 0, 0}, 1);
  checkpoint_walk w(md, 0, 3);
  // j = 1: F_ck(0) peaks at x[1] + ft[0] = 3; j = 2: F_none(1) at x[1] + x[2] + ft[1] = 7;
  // j = 3: F_none(2) at x[2] + x[3] + ft[2] = 9.
  const bool first = w->j == 1 && w->forward == 1 && w->own == 3 && w->held == 2;
  w.next();
  const bool second = w->j == 2 && w->forward == 3 && w->own == 7 && w->held == 5;
  w.next();
  const bool third = w->j == 3 && w->forward == 7 && w->own == 9 && w->held == 1 &&
                     w->right() == remat::detail::branch_part{3, 3, 1} &&
                     w->left() == remat::detail::branch_part{0, 2, 0};
  w.next();
  return first && second && third && w.done();
}
static_assert(walk_of_three_stages());

}  // namespace

TEST_CASE("property: the checkpoint walk gives docs/model.md's branches, and the table agrees") {
  for (const model& md : random_models(4101, 300)) {
    const std::vector<size_type> forwards = remat::detail::checkpoint_forward_table(md);
    for (std::int32_t i = 0; i < md.L; ++i)
      for (std::int32_t l = i; l <= md.L; ++l) {
        std::int32_t j = i + 1;
        for (checkpoint_walk w(md, i, l); !w.done(); w.next(), ++j) {
          CAPTURE(i);
          CAPTURE(l);
          CAPTURE(j);
          REQUIRE(w->j == j);
          CHECK(*w == plain_checkpoint(md, i, l, j));
          CHECK(w->own >= w->held);
          CHECK(*w == remat::detail::checkpoint_branch_at(md, forwards, i, l, j, w->forward));
        }
        CHECK(j == l + 1);
      }
  }
}

TEST_CASE("property: a tape branch's own memory covers its tape, and its need its rest's") {
  for (const model& md : random_models(4102, 300))
    for (std::int32_t i = 0; i < md.L; ++i)
      for (std::int32_t l = i; l <= md.L; ++l)
        for (const remat::detail::tape_option& o : md.options(i)) {
          const tape_branch b = remat::detail::tape_branch_of(md, i, l, o);
          CHECK(b.own >= b.held);
          CHECK(b.held == o.xb);
          CHECK(b.time == o.fw + o.bw);
          CHECK(b.rest() == remat::detail::branch_part{i + 1, l, o.xb});
          CHECK(b.need(3) == std::max(b.own, o.xb + 3));
        }
}

TEST_CASE("property: for_each_branch_within visits what fits, in the DP's order, and stops") {
  std::mt19937_64 rng(4103);
  for (const model& md : random_models(4104, 200))
    for (std::int32_t i = 0; i < md.L; ++i)
      for (std::int32_t l = i + 1; l <= md.L; ++l)
        for (const dp_branches branches :
             {dp_branches::tape_and_checkpoint, dp_branches::checkpoint_only}) {
          const size_type m = std::uniform_int_distribution<size_type>(0, 60)(rng);
          // What fits, in order: tape choices then split points, as the cells encode them.
          std::vector<std::int32_t> expected;
          const std::span<const remat::detail::tape_option> options = md.options(i);
          if (branches == dp_branches::tape_and_checkpoint)
            for (std::size_t p = 0; p < options.size(); ++p)
              if (m >= remat::detail::tape_ops_memory(md, i, l, options[p]))
                expected.push_back(remat::detail::tape_choice(p));
          for (std::int32_t j = i + 1; j <= l; ++j)
            if (m >= plain_checkpoint(md, i, l, j).own) expected.push_back(j);
          std::vector<std::int32_t> seen;
          auto visit = [&](std::size_t stop_after) {
            seen.clear();
            remat::detail::for_each_branch_within(
                md, branches, i, l, m,
                [&](std::size_t p, const tape_branch&) {
                  seen.push_back(remat::detail::tape_choice(p));
                  return seen.size() < stop_after;
                },
                [&](const checkpoint_branch& b) {
                  seen.push_back(b.j);
                  return seen.size() < stop_after;
                });
          };
          visit(expected.size() + 1);
          CAPTURE(remat::testing::chain_text(remat::detail::to_chain(md)));
          CHECK(seen == expected);
          if (expected.size() > 1) {
            visit(1);
            CHECK(seen.size() == 1);
          }
        }
}

}  // namespace unit_detail_dp_branches_test
