#include <remat/host_executor.hpp>

#include <remat/plan.hpp>

#include <doctest/doctest.h>
#include <count_allocations.hpp>
#include <random_chain.hpp>
#include <random_schedule.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using remat::size_type;
using remat::testing::allocations_during;

template <class Byte>
auto floats(std::span<Byte> bytes) {
  using F = std::conditional_t<std::is_const_v<Byte>, const float, float>;
  return std::span<F>(reinterpret_cast<F*>(bytes.data()), bytes.size() / sizeof(float));
}

// A real network: `L` dense layers on a batch, tanh on even stages (the tape keeps the
// pre-activation z, the workspace holds z when not recording and dz in backward), ReLU on odd
// ones (the tape is the output alone; backward works in place on the incoming gradient). Loss:
// half the squared distance to a fixed target, averaged over the batch.
struct mlp {
  int batch = 4;
  std::vector<int> width;
  std::vector<std::vector<float>> w, b, dw, db;
  std::vector<float> target;

  mlp(int batch_size, std::vector<int> widths) : batch(batch_size), width(std::move(widths)) {
    std::mt19937 rng(42);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (std::size_t k = 0; k + 1 < width.size(); ++k) {
      const auto in = static_cast<std::size_t>(width[k]);
      const auto out = static_cast<std::size_t>(width[k + 1]);
      w.emplace_back(in * out);
      for (float& v : w.back()) v = normal(rng) / std::sqrt(static_cast<float>(in));
      b.emplace_back(out);
      for (float& v : b.back()) v = 0.1f * normal(rng);
      dw.emplace_back(in * out, 0.0f);
      db.emplace_back(out, 0.0f);
    }
    target.resize(static_cast<std::size_t>(batch) * static_cast<std::size_t>(width.back()));
    for (float& v : target) v = normal(rng);
  }

  [[nodiscard]] std::size_t stages() const { return width.size() - 1; }
  static bool tanh_stage(std::int32_t k) { return k % 2 == 0; }
  [[nodiscard]] size_type bytes(std::size_t k) const {
    return static_cast<size_type>(batch * width[k]) * static_cast<size_type>(sizeof(float));
  }

  [[nodiscard]] remat::chain chain() const {
    remat::chain c;
    c.input_size = bytes(0);
    for (std::size_t k = 0; k < stages(); ++k) {
      const size_type x = bytes(k + 1);
      const bool t = tanh_stage(static_cast<std::int32_t>(k));
      const double flops = width[k] * width[k + 1];
      c.stages.push_back({flops, 2 * flops, x, t ? 2 * x : x, t ? x : 0, t ? x : 0});
    }
    return c;
  }

  void forward(const remat::forward_call& f) {
    const auto k = static_cast<std::size_t>(f.stage);
    const auto in = floats(f.input);
    const auto out = floats(f.output);
    const auto z = tanh_stage(f.stage) ? floats(f.recording ? f.saved : f.workspace) : out;
    affine(k, in, z);
    for (std::size_t j = 0; j < out.size(); ++j)
      out[j] = tanh_stage(f.stage) ? std::tanh(z[j]) : std::max(z[j], 0.0f);
  }

  void backward(const remat::backward_call& c) {
    const auto k = static_cast<std::size_t>(c.stage);
    const auto in = floats(c.input);
    const auto g = floats(c.output_gradient);
    const auto dz = tanh_stage(c.stage) ? floats(c.workspace) : g;
    if (tanh_stage(c.stage)) {
      const auto z = floats(c.saved);
      for (std::size_t j = 0; j < g.size(); ++j) {
        const float t = std::tanh(z[j]);
        dz[j] = g[j] * (1.0f - t * t);
      }
    } else {
      const auto out = floats(c.output);
      for (std::size_t j = 0; j < g.size(); ++j)
        if (!(out[j] > 0.0f)) dz[j] = 0.0f;
    }
    const auto n_in = static_cast<std::size_t>(width[k]);
    const auto n_out = static_cast<std::size_t>(width[k + 1]);
    const auto gin = floats(c.input_gradient);
    for (std::size_t r = 0; r < static_cast<std::size_t>(batch); ++r) {
      for (std::size_t i = 0; i < n_in; ++i) {
        float acc = 0.0f;
        for (std::size_t o = 0; o < n_out; ++o) acc += dz[r * n_out + o] * w[k][o * n_in + i];
        gin[r * n_in + i] = acc;
      }
      for (std::size_t o = 0; o < n_out; ++o) {
        db[k][o] += dz[r * n_out + o];
        for (std::size_t i = 0; i < n_in; ++i)
          dw[k][o * n_in + i] += dz[r * n_out + o] * in[r * n_in + i];
      }
    }
  }

  void loss(const remat::loss_call& c) {
    const auto a = floats(c.input);
    const auto g = floats(c.input_gradient);
    for (std::size_t j = 0; j < g.size(); ++j)
      g[j] = (a[j] - target[j]) / static_cast<float>(batch);
  }

  void affine(std::size_t k, std::span<const float> in, std::span<float> z) const {
    const auto n_in = static_cast<std::size_t>(width[k]);
    const auto n_out = static_cast<std::size_t>(width[k + 1]);
    for (std::size_t r = 0; r < static_cast<std::size_t>(batch); ++r)
      for (std::size_t o = 0; o < n_out; ++o) {
        float acc = b[k][o];
        for (std::size_t i = 0; i < n_in; ++i) acc += w[k][o * n_in + i] * in[r * n_in + i];
        z[r * n_out + o] = acc;
      }
  }

  void zero_gradients() {
    for (auto& v : dw) std::fill(v.begin(), v.end(), 0.0f);
    for (auto& v : db) std::fill(v.begin(), v.end(), 0.0f);
  }
  void sgd(float rate) {
    for (std::size_t k = 0; k < stages(); ++k) {
      for (std::size_t i = 0; i < w[k].size(); ++i) w[k][i] -= rate * dw[k][i];
      for (std::size_t i = 0; i < b[k].size(); ++i) b[k][i] -= rate * db[k][i];
    }
  }
};

// What a training run leaves: every parameter and gradient, and g_0 of the last step.
struct trained {
  std::vector<std::vector<float>> w, b, dw, db;
  std::vector<std::byte> input_gradient;
};

trained train(const std::vector<int>& widths, const remat::memory_plan& plan,
              remat::host_executor_options options, int steps = 2) {
  mlp net(4, widths);
  remat::host_executor ex(plan, options);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int step = 0; step < steps; ++step) {
    for (float& v : floats(ex.input())) v = normal(rng);
    net.zero_gradients();
    ex.run(net);
    net.sgd(0.05f);
  }
  const auto g0 = ex.input_gradient();
  return {net.w, net.b, net.dw, net.db, {g0.begin(), g0.end()}};
}

bool same_bits(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t k = 0; k < a.size(); ++k)
    if (a[k].size() != b[k].size() ||
        std::memcmp(a[k].data(), b[k].data(), a[k].size() * sizeof(float)) != 0)
      return false;
  return true;
}

void require_identical(const trained& got, const trained& want) {
  REQUIRE(same_bits(got.dw, want.dw));
  REQUIRE(same_bits(got.db, want.db));
  REQUIRE(same_bits(got.w, want.w));
  REQUIRE(same_bits(got.b, want.b));
  REQUIRE(got.input_gradient == want.input_gradient);
}

void gradients_match_store_all(const std::vector<int>& widths, int min_schedules) {
  const remat::chain c = mlp(4, widths).chain();
  const remat::plan_result reference_plan =
      remat::plan(c, remat::max_size, {.solve = {.solver = remat::solver::store_all}});
  REQUIRE(reference_plan.feasible);
  const trained reference = train(widths, reference_plan.memory, {});
  // The gradients are finite and not all zero: the comparison means something.
  bool nonzero = false;
  for (const auto& g : reference.dw)
    for (const float v : g) {
      REQUIRE(std::isfinite(v));
      nonzero = nonzero || v != 0.0f;
    }
  REQUIRE(nonzero);

  const size_type top = reference_plan.solution.plan.peak_memory;
  const size_type least = remat::solve(c, top).min_feasible_budget;
  int schedules = 0, recomputing = 0;
  std::string ran;
  for (const remat::solver s : remat::all_solvers) {
    if (s == remat::solver::exhaustive && c.length() > remat::exhaustive_max_stages) continue;
    const int before = schedules;
    for (const double f : {0.0, 0.25, 0.5, 0.75, 1.0}) {
      const auto budget = least + static_cast<size_type>(f * static_cast<double>(top - least)) +
                          static_cast<size_type>(c.length() * 128);  // room for alignment
      CAPTURE(remat::name(s));
      CAPTURE(budget);
      remat::plan_result p;
      try {
        p = remat::plan(c, budget, {.solve = {.solver = s}, .alignment = 64});
      } catch (const remat::solver_error& e) {
        MESSAGE("solver " << remat::name(s) << " skipped: " << e.what());
        continue;
      }
      if (!p.feasible) continue;
      ++schedules;
      recomputing += p.solution.plan.ops.size() > reference_plan.solution.plan.ops.size();
      REQUIRE(p.memory.arena_bytes <= budget);
      require_identical(train(widths, p.memory, {.poison = true}), reference);
      require_identical(train(widths, p.memory, {.separate_allocations = true}), reference);
    }
    ran += " " + std::string(remat::name(s)) + ":" + std::to_string(schedules - before);
  }
  MESSAGE(schedules << " schedules, " << recomputing << " with recomputation; per solver" << ran);
  CHECK(schedules >= min_schedules);
  CHECK(recomputing >= min_schedules / 2);
}

}  // namespace

TEST_CASE("training an MLP gives the gradients of store-all, bit for bit, under every solver") {
  SUBCASE("12 stages") {
    gradients_match_store_all({6, 8, 5, 9, 7, 8, 6, 10, 5, 7, 8, 6, 3}, 8);
  }
  SUBCASE("5 stages, short enough for the exhaustive solver") {
    gradients_match_store_all({5, 7, 4, 8, 6, 3}, 12);
  }
}

namespace {

// A network of byte hashes for arbitrary chains (zero sizes, odd sizes): every output byte
// depends on every input byte, backward reads all of a_k, the tape and g_{k+1}, and each op
// fills its workspace and checks after writing its outputs that the workspace was untouched.
constexpr std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  h ^= h >> 31;
  h *= 0xBF58476D1CE4E5B9ull;
  return h ^ (h >> 29);
}
std::uint64_t fold(std::span<const std::byte> bytes, std::uint64_t seed) {
  std::uint64_t h = mix(seed, bytes.size());
  for (const std::byte b : bytes) h = mix(h, static_cast<std::uint64_t>(b));
  return h;
}
void fill(std::span<std::byte> bytes, std::uint64_t seed) {
  for (std::size_t j = 0; j < bytes.size(); ++j)
    bytes[j] = static_cast<std::byte>(mix(seed, j) & 0xFF);
}

struct hash_net {
  std::vector<std::uint64_t> params;  // one accumulator per stage, updated by backward
  bool workspace_intact = true;

  explicit hash_net(std::size_t stages) : params(stages, 0) {}

  void use_workspace(std::span<std::byte> ws, std::uint64_t seed, auto&& write_outputs) {
    fill(ws, seed);
    const std::uint64_t before = fold(ws, 0);
    write_outputs();
    workspace_intact = workspace_intact && fold(ws, 0) == before;
  }
  void forward(const remat::forward_call& f) {
    const std::uint64_t h = fold(f.input, 100 + static_cast<std::uint64_t>(f.stage));
    use_workspace(f.workspace, h ^ 1, [&] {
      fill(f.output, h);
      if (f.recording) fill(f.saved, h ^ 2);
    });
  }
  void backward(const remat::backward_call& c) {
    std::uint64_t h = mix(fold(c.input, 1), fold(c.output, 2));
    h = mix(h, mix(fold(c.saved, 3), fold(c.output_gradient, 4)));
    h = mix(h, static_cast<std::uint64_t>(c.stage));
    use_workspace(c.workspace, h ^ 5, [&] { fill(c.input_gradient, h); });
    auto& p = params[static_cast<std::size_t>(c.stage)];
    p = mix(p, h);
  }
  void loss(const remat::loss_call& c) {
    const std::uint64_t h = fold(c.input, 77);
    use_workspace(c.workspace, h ^ 6, [&] { fill(c.input_gradient, h); });
  }
};

// The same network computed directly, holding everything: the oracle.
struct hash_result {
  std::vector<std::uint64_t> params;
  std::vector<std::byte> input_gradient;
  friend bool operator==(const hash_result&, const hash_result&) = default;
};

hash_result reference(const remat::chain& c, std::span<const std::byte> input) {
  const std::size_t L = c.length();
  auto x = [&](std::size_t k) {
    return static_cast<std::size_t>(k == 0 ? c.input_size : c.stages[k - 1].output_size);
  };
  std::vector<std::vector<std::byte>> a(L + 1), saved(L + 1), g(L + 1);
  a[0].assign(input.begin(), input.end());
  for (std::size_t k = 0; k < L; ++k) {
    const std::uint64_t h = fold(a[k], 100 + k);
    a[k + 1].resize(x(k + 1));
    fill(a[k + 1], h);
    saved[k + 1].resize(static_cast<std::size_t>(c.stages[k].tape_size) - x(k + 1));
    fill(saved[k + 1], h ^ 2);
  }
  g[L].resize(x(L));
  fill(g[L], fold(a[L], 77));
  hash_result out{std::vector<std::uint64_t>(L, 0), {}};
  for (std::size_t k = L; k-- > 0;) {
    std::uint64_t h = mix(fold(a[k], 1), fold(a[k + 1], 2));
    h = mix(h, mix(fold(saved[k + 1], 3), fold(g[k + 1], 4)));
    h = mix(h, k);
    g[k].resize(x(k));
    fill(g[k], h);
    out.params[k] = mix(0, h);
  }
  out.input_gradient = g[0];
  return out;
}

hash_result execute(const remat::chain& c, const remat::memory_plan& plan,
                    remat::host_executor_options options, std::span<const std::byte> input) {
  remat::host_executor ex(plan, options);
  REQUIRE(ex.input().size() == input.size());
  std::copy(input.begin(), input.end(), ex.input().begin());
  hash_net net(c.length());
  ex.run(net);
  REQUIRE(net.workspace_intact);
  const auto g0 = ex.input_gradient();
  return {net.params, {g0.begin(), g0.end()}};
}

}  // namespace

TEST_CASE("random chains and schedules: the executor computes what holding everything computes") {
  std::mt19937_64 rng(1234);
  int runs = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const remat::chain c = remat::testing::random_chain(rng, {.max_size = 20});
    std::vector<std::byte> input(static_cast<std::size_t>(c.input_size));
    fill(input, rng());
    const hash_result want = reference(c, input);

    std::vector<std::vector<remat::op>> schedules;
    const size_type top =
        remat::solve(c, remat::max_size, {.solver = remat::solver::store_all}).min_feasible_budget;
    const size_type least = remat::solve(c, 0, {.slots = remat::exact_units}).min_feasible_budget;
    for (const size_type budget : {least, (least + top) / 2, top}) {
      const auto r = remat::solve(c, budget, {.slots = remat::exact_units});
      if (r.feasible) schedules.push_back(r.plan.ops);
    }
    if (c.length() <= 3) {
      const auto e = remat::solve(c, least, {.solver = remat::solver::exhaustive});
      if (e.feasible) schedules.push_back(e.plan.ops);
    }
    if (auto walk = remat::testing::random_schedule(c, rng)) schedules.push_back(*walk);

    for (const auto& ops : schedules) {
      CAPTURE(remat::to_string(remat::schedule{ops, 0, 0}));
      for (const size_type alignment : {1, 16}) {
        const remat::memory_plan plan =
            remat::make_memory_plan(c, std::span<const remat::op>(ops), {.alignment = alignment});
        REQUIRE(execute(c, plan, {.poison = true}, input) == want);
        REQUIRE(execute(c, plan, {.separate_allocations = true}, input) == want);
        ++runs;
      }
    }
  }
  MESSAGE(runs << " runs");
  CHECK(runs > 2000);
}

TEST_CASE("a run allocates nothing") {
  const std::vector<int> widths = {6, 8, 5, 9, 7, 8, 6, 10, 5};
  mlp net(4, widths);
  const remat::chain c = net.chain();
  const size_type top =
      remat::solve(c, remat::max_size, {.solver = remat::solver::store_all}).min_feasible_budget;
  const remat::plan_result p = remat::plan(c, top * 2 / 3);
  REQUIRE(p.feasible);
  for (const bool poison : {false, true}) {
    remat::host_executor ex(p.memory, {.poison = poison});
    CHECK(allocations_during([&] {
            ex.run(net);
            ex.run(net);
          }) == 0);
  }
  // The debug mode does allocate: one block per buffer created.
  remat::host_executor debug(p.memory, {.separate_allocations = true});
  CHECK(allocations_during([&] { debug.run(net); }) ==
        static_cast<long>(p.memory.buffers.size() - 1));
}

TEST_CASE("poisoning shows a use after free") {
  // F_ck(0) F_none(1) ...: a_1 is dropped after op 1. A stage-2 forward that still reads it
  // through a pointer kept from op 0 finds 0xFF bytes, a NaN as float.
  remat::chain c;
  c.input_size = 16;
  c.stages.assign(3, remat::stage{1, 1, 16, 16, 0, 0});
  const std::vector<remat::op> ops = {remat::f_ck(0),    remat::f_none(1),   remat::f_all(2),
                                      remat::loss_op(3), remat::backward(2), remat::f_all(0),
                                      remat::f_all(1),   remat::backward(1), remat::backward(0)};
  const remat::memory_plan plan = remat::make_memory_plan(c, std::span<const remat::op>(ops));
  struct stale_reader {
    std::span<const std::byte> kept;
    float seen = 0;
    void forward(const remat::forward_call& f) {
      if (f.stage == 0 && kept.empty()) kept = f.output;
      if (f.stage == 2) seen = floats(kept)[0];
      std::fill(f.output.begin(), f.output.end(), std::byte{0});
      std::fill(f.saved.begin(), f.saved.end(), std::byte{0});
    }
    void backward(const remat::backward_call& b) {
      std::fill(b.input_gradient.begin(), b.input_gradient.end(), std::byte{0});
    }
    void loss(const remat::loss_call& l) {
      std::fill(l.input_gradient.begin(), l.input_gradient.end(), std::byte{0});
    }
  };
  remat::host_executor ex(plan, {.poison = true});
  stale_reader reader;
  ex.run(reader);
  CHECK(std::isnan(reader.seen));
}

TEST_CASE("the input keeps its bytes across runs; a throwing callback leaves the executor usable") {
  std::mt19937_64 rng(3);
  const remat::chain c = remat::testing::random_chain(rng, {.min_stages = 4, .max_size = 20});
  std::vector<std::byte> input(static_cast<std::size_t>(c.input_size));
  fill(input, 11);
  const hash_result want = reference(c, input);
  const remat::plan_result p = remat::plan(c, remat::max_size);
  REQUIRE(p.feasible);
  for (const remat::host_executor_options options :
       {remat::host_executor_options{.poison = true},
        remat::host_executor_options{.separate_allocations = true}}) {
    remat::host_executor ex(p.memory, options);
    std::copy(input.begin(), input.end(), ex.input().begin());
    struct failing : hash_net {
      using hash_net::hash_net;
      void loss(const remat::loss_call&) { throw std::runtime_error("loss failed"); }
    };
    failing bad(c.length());
    CHECK_THROWS_WITH(ex.run(bad), "loss failed");
    for (int run = 0; run < 2; ++run) {
      hash_net net(c.length());
      ex.run(net);
      const auto g0 = ex.input_gradient();
      CHECK(hash_result{net.params, {g0.begin(), g0.end()}} == want);
    }
  }
}

TEST_CASE("an unsound plan is refused") {
  remat::chain c;
  c.input_size = 8;
  c.stages.assign(2, remat::stage{1, 1, 8, 8, 0, 0});
  remat::memory_plan plan = remat::make_memory_plan(c, remat::solve(c, remat::max_size).plan);
  plan.buffers[1].offset = plan.buffers[0].offset;  // t_1 onto a_0
  CHECK_THROWS_WITH_AS(remat::host_executor{plan}, doctest::Contains("overlap"),
                       std::invalid_argument);
}

TEST_CASE("a schedule that runs the loss or a backward twice is refused") {
  remat::chain c;
  c.input_size = 8;
  c.stages.assign(3, remat::stage{1, 1, 8, 8, 0, 0});
  // Valid in the model (g_3, t_3 and g_2 are made again), but gradients would accumulate twice.
  const std::vector<remat::op> ops = {remat::f_all(0),    remat::f_all(1),    remat::f_all(2),
                                      remat::loss_op(3),  remat::backward(2), remat::backward(1),
                                      remat::f_all(1),    remat::f_all(2),    remat::loss_op(3),
                                      remat::backward(2), remat::backward(0)};
  REQUIRE(remat::simulate(c, std::span<const remat::op>(ops)).valid());
  CHECK_THROWS_WITH_AS(
      remat::host_executor{remat::make_memory_plan(c, std::span<const remat::op>(ops))},
      doctest::Contains("runs loss twice"), std::invalid_argument);
}
