// The stepping walk: a walker steps one op at a time, refuses an op without changing, walks the
// same ops as `walk`, accepts exactly the ops docs/model.md allows in each state (written out by
// hand here, apart from the table), and goes on from held tensors as from the walk that made them.
#include <remat/walk.hpp>

#include "../support/offload_chains.hpp"
#include "../support/random_chain.hpp"
#include "../support/random_schedule.hpp"

#include <remat/simulate.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <stdexcept>
#include <tuple>
#include <vector>

namespace unit_walk_test {

namespace {

using remat::op;
using remat::op_kind;
using remat::tensor_kind;
using remat::walker;

// Every op a schedule of `c` could name, and some it could not (indices one past each end,
// options past the stage's).
std::vector<op> candidates(const remat::chain& c) {
  const auto L = static_cast<std::int32_t>(c.length());
  std::vector<op> out;
  for (const remat::op_rule& r : remat::op_table)
    for (std::int32_t k = -1; k <= L + 1; ++k)
      for (const tensor_kind t : {tensor_kind::activation, tensor_kind::tape}) {
        if (!r.transfer && t == tensor_kind::tape) continue;
        for (std::uint16_t o = 0; o < (r.takes_option ? 3 : 1); ++o)
          out.push_back({r.kind, k, t, o});
      }
  return out;
}

// What a walker holds, for comparing two.
struct snapshot {
  std::size_t walked = 0, values = 0;
  remat::size_type bytes = 0;
  bool done = false;
  std::vector<remat::value_id> held;
  friend bool operator==(const snapshot&, const snapshot&) = default;
};
snapshot take(const walker& w) {
  snapshot s{w.walked(), w.values().size(), w.device_bytes(), w.done(), {}};
  const auto L = static_cast<std::int32_t>(w.walked_chain().length());
  for (const char kind : {'a', 't', 'g'})
    for (std::int32_t k = 0; k <= L; ++k)
      for (const bool host : {false, true}) s.held.push_back(w.held({kind, k}, host));
  return s;
}

remat::testing::random_chain_options short_chains() {
  remat::testing::random_chain_options o;
  o.max_stages = 4;
  return o;
}

}  // namespace

TEST_CASE("stepping a walker walks what walk walks, and its device bytes are the replay's") {
  std::mt19937_64 rng(4711);
  for (int trial = 0; trial < 200; ++trial) {
    remat::chain c = remat::testing::random_chain(rng);
    if (trial % 2 == 0) remat::testing::add_random_options(rng, c, 3);
    const auto ops = remat::testing::random_schedule(c, rng);
    if (!ops) continue;
    CAPTURE(trial);
    std::vector<remat::walked_op> walked;
    const remat::walk_failure f =
        remat::walk(c, std::span<const op>(*ops),
                    [&](const remat::walked_op& w, const std::vector<remat::walked_value>&) {
                      walked.push_back(w);
                    });
    REQUIRE(f.error == remat::replay_error::none);
    const remat::replay_result r = remat::simulate(c, std::span<const op>(*ops));
    walker w(c);
    for (std::size_t i = 0; i < ops->size(); ++i) {
      const remat::walk_step s = w.step((*ops)[i]);
      REQUIRE(s.ok());
      CHECK(s.op.o == walked[i].o);
      CHECK(s.op.made == walked[i].made);
      CHECK(s.op.reads == walked[i].reads);
      CHECK(s.op.frees == walked[i].frees);
      CHECK(s.op.option == walked[i].option);
      CHECK(s.op.time == walked[i].time);
      CHECK(w.device_bytes() == r.memory_after[i]);
    }
    CHECK(w.done());
    CHECK(w.finish().error == remat::replay_error::none);
    // After g_0, every op is refused as after the end.
    CHECK(w.step(remat::f_ck(0)).failure.error == remat::replay_error::after_end);
  }
}

TEST_CASE("a refused op leaves the walker as it was, with the error the replay gives") {
  std::mt19937_64 rng(99);
  for (int trial = 0; trial < 60; ++trial) {
    remat::chain c = remat::testing::random_chain(rng, short_chains());
    if (trial % 3 == 0) remat::testing::add_random_options(rng, c, 2);
    const bool transfers = trial % 2 == 1;
    if (transfers) c.transfer = {3, 5};
    const auto ops = remat::testing::random_schedule(c, rng, 200, 4, transfers);
    if (!ops) continue;
    CAPTURE(trial);
    walker w(c);
    for (std::size_t i = 0; i <= ops->size(); ++i) {
      const snapshot before = take(w);
      for (const op& o : candidates(c)) {
        walker copy = w;
        const remat::walk_step s = copy.step(o);
        // The replay of the prefix and the op says the same.
        std::vector<op> seq(ops->begin(), ops->begin() + static_cast<std::ptrdiff_t>(i));
        seq.push_back(o);
        const remat::replay_result r = remat::simulate(c, std::span<const op>(seq));
        const bool replay_ok = r.valid() || r.error == remat::replay_error::incomplete;
        CHECK(s.ok() == replay_ok);
        if (!s.ok()) {
          CHECK(s.failure.error == r.error);
          CHECK(s.failure.at == i);
          CHECK(take(copy) == before);
        } else {
          CHECK(copy.walked() == i + 1);
        }
      }
      if (i < ops->size()) REQUIRE(w.step((*ops)[i]).ok());
    }
  }
}

// docs/model.md's rules for the compute ops, written out by hand over what is held: the ops
// valid with a_k (held[0]), t_k (held[1], its option + 1) and g_k (held[2]) held.
struct held_sets {
  std::vector<int> a, t, g;
};
held_sets held_by(const walker& w) {
  const auto L = static_cast<std::int32_t>(w.walked_chain().length());
  held_sets h{std::vector<int>(static_cast<std::size_t>(L) + 1, 0),
              std::vector<int>(static_cast<std::size_t>(L) + 1, 0),
              std::vector<int>(static_cast<std::size_t>(L) + 1, 0)};
  for (std::int32_t k = 0; k <= L; ++k) {
    const auto i = static_cast<std::size_t>(k);
    h.a[i] = w.held({'a', k}) != remat::no_value;
    h.g[i] = w.held({'g', k}) != remat::no_value;
    if (const remat::value_id t = w.held({'t', k}); k > 0 && t != remat::no_value)
      h.t[i] = 1 + w.values()[t].option;
  }
  return h;
}
std::vector<op> allowed_ops(const remat::chain& c, const held_sets& h) {
  const auto L = static_cast<std::int32_t>(c.length());
  const auto at = [](std::int32_t k) { return static_cast<std::size_t>(k); };
  std::vector<op> out;
  if (h.g[0]) return out;
  for (std::int32_t k = 0; k < L; ++k) {
    if (!h.a[at(k)] && !(k > 0 && h.t[at(k)])) continue;
    if (!h.a[at(k + 1)]) {
      out.push_back(remat::f_ck(k));
      out.push_back(remat::f_none(k));
    }
    if (!h.t[at(k + 1)])
      for (std::size_t o = 0; o < remat::option_count(c.stages[at(k)]); ++o)
        out.push_back(remat::f_all(k, static_cast<std::uint16_t>(o)));
    if (h.g[at(k + 1)] && h.t[at(k + 1)] && !h.g[at(k)]) out.push_back(remat::backward(k));
  }
  if ((h.a[at(L)] || (L > 0 && h.t[at(L)])) && !h.g[at(L)]) out.push_back(remat::loss_op(L));
  return out;
}
remat::size_type bytes_held(const remat::chain& c, const held_sets& h) {
  remat::size_type m = 0;
  for (std::size_t k = 0; k < h.a.size(); ++k) {
    const remat::size_type x = k == 0 ? c.input_size : c.stages[k - 1].output_size;
    m += (h.a[k] + h.g[k]) * x;
    if (h.t[k])
      m += remat::option_at(c.stages[k - 1], static_cast<std::size_t>(h.t[k] - 1)).tape_size;
  }
  return m;
}

TEST_CASE("a walker accepts exactly the compute ops docs/model.md allows in each state") {
  std::mt19937_64 rng(2024);
  for (int trial = 0; trial < 60; ++trial) {
    remat::chain c = remat::testing::random_chain(rng, short_chains());
    if (trial % 2 == 0) remat::testing::add_random_options(rng, c, 3);
    const auto ops = remat::testing::random_schedule(c, rng);
    if (!ops) continue;
    CAPTURE(trial);
    walker w(c);
    for (std::size_t i = 0; i <= ops->size(); ++i) {
      const held_sets h = held_by(w);
      CHECK(w.device_bytes() == bytes_held(c, h));
      std::vector<op> allowed = allowed_ops(c, h);
      std::vector<op> accepted;
      for (const op& o : candidates(c)) {
        if (remat::is_transfer(o.kind)) continue;
        walker copy = w;
        if (copy.step(o).ok()) accepted.push_back(o);
      }
      const auto by_value = [](const op& x, const op& y) {
        return std::tie(x.kind, x.stage, x.tensor, x.option) <
               std::tie(y.kind, y.stage, y.tensor, y.option);
      };
      std::sort(allowed.begin(), allowed.end(), by_value);
      std::sort(accepted.begin(), accepted.end(), by_value);
      CHECK(accepted == allowed);
      if (i < ops->size()) REQUIRE(w.step((*ops)[i]).ok());
    }
  }
}

TEST_CASE("a walker started from held tensors goes on as the walk that made them") {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 100; ++trial) {
    remat::chain c = remat::testing::random_chain(rng, short_chains());
    if (trial % 2 == 0) remat::testing::add_random_options(rng, c, 3);
    const auto ops = remat::testing::random_schedule(c, rng);
    if (!ops) continue;
    CAPTURE(trial);
    const std::size_t cut = static_cast<std::size_t>(rng() % ops->size());
    walker w(c);
    for (std::size_t i = 0; i < cut; ++i) REQUIRE(w.step((*ops)[i]).ok());
    std::vector<remat::held_tensor> held;
    const auto L = static_cast<std::int32_t>(c.length());
    for (const char kind : {'a', 't', 'g'})
      for (std::int32_t k = 0; k <= L; ++k)
        if (const remat::value_id v = w.held({kind, k}); v != remat::no_value)
          held.push_back({{kind, k}, false, w.values()[v].option});
    walker resumed(c, held);
    CHECK(resumed.device_bytes() == w.device_bytes());
    for (std::size_t i = cut; i < ops->size(); ++i) {
      const remat::walk_step a = w.step((*ops)[i]);
      const remat::walk_step b = resumed.step((*ops)[i]);
      REQUIRE(b.ok() == a.ok());
      CHECK(b.op.time == a.op.time);
      CHECK(b.op.option == a.op.option);
      CHECK(resumed.device_bytes() == w.device_bytes());
    }
    CHECK(resumed.done());
  }
  const remat::chain c = remat::testing::chain_a();
  const auto refused = [&](remat::held_tensor t) {
    const remat::held_tensor list[] = {t};
    CHECK_THROWS_AS(walker(c, list), std::invalid_argument);
  };
  refused({{'t', 0}, false, 0});
  refused({{'a', 3}, false, 0});
  refused({{'g', 1}, true, 0});
  refused({{'t', 1}, false, 1});
  refused({{'a', 1}, false, 1});
  const remat::held_tensor twice[] = {{{'a', 1}, false, 0}, {{'a', 1}, false, 0}};
  CHECK_THROWS_AS(walker(c, twice), std::invalid_argument);
}

TEST_CASE("a walker names what it holds and what an op lacks") {
  const remat::chain c = remat::testing::chain_a();
  walker w(c);
  CHECK(w.held({'a', 0}) == 0);
  CHECK(w.held({'a', 1}) == remat::no_value);
  CHECK(w.held({'q', 0}) == remat::no_value);
  CHECK(w.held({'a', 7}) == remat::no_value);
  CHECK(w.held({'g', 0}, true) == remat::no_value);  // a gradient has no host copy
  CHECK(w.device_bytes() == c.input_size);
  const remat::walk_step b = w.step(remat::backward(1));
  CHECK(b.failure.error == remat::replay_error::gradient_missing);
  CHECK(b.failure.tensor == remat::tensor_ref{'g', 2});
  CHECK(w.step(remat::offload(0)).ok());
  CHECK(w.held({'a', 0}) == remat::no_value);
  CHECK(w.held({'a', 0}, true) == 1);
  CHECK(w.device_bytes() == 0);
  CHECK(w.finish().error == remat::replay_error::incomplete);
  CHECK(w.finish().at == 1);
}

}  // namespace unit_walk_test
