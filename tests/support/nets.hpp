// Two networks for executor tests, each with its oracle. `mlp`: a real perceptron (dense
// layers, tanh and ReLU, squared loss) whose training must end with store-all's weights bit for
// bit under any schedule. `hash_net`: byte hashes for arbitrary chains (zero and odd sizes) whose
// parameters and input gradient `reference` computes holding everything.
#pragma once

#include <remat/host_executor.hpp>
#include <remat/memory_plan.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

namespace remat::testing::nets {

using remat::size_type;

template <class Byte>
inline auto floats(std::span<Byte> bytes) {
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

inline trained train(const std::vector<int>& widths, const remat::memory_plan& plan,
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

inline bool same_bits(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t k = 0; k < a.size(); ++k)
    if (a[k].size() != b[k].size() ||
        std::memcmp(a[k].data(), b[k].data(), a[k].size() * sizeof(float)) != 0)
      return false;
  return true;
}

inline void require_identical(const trained& got, const trained& want) {
  REQUIRE(same_bits(got.dw, want.dw));
  REQUIRE(same_bits(got.db, want.db));
  REQUIRE(same_bits(got.w, want.w));
  REQUIRE(same_bits(got.b, want.b));
  REQUIRE(got.input_gradient == want.input_gradient);
}


// A network of byte hashes for arbitrary chains (zero sizes, odd sizes): every output byte
// depends on every input byte, backward reads all of a_k, the tape and g_{k+1}, and each op
// fills its workspace and checks after writing its outputs that the workspace was untouched.
constexpr std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  h ^= h >> 31;
  h *= 0xBF58476D1CE4E5B9ull;
  return h ^ (h >> 29);
}
inline std::uint64_t fold(std::span<const std::byte> bytes, std::uint64_t seed) {
  std::uint64_t h = mix(seed, bytes.size());
  for (const std::byte b : bytes) h = mix(h, static_cast<std::uint64_t>(b));
  return h;
}
inline void fill(std::span<std::byte> bytes, std::uint64_t seed) {
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

inline hash_result reference(const remat::chain& c, std::span<const std::byte> input) {
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

inline hash_result execute(const remat::chain& c, const remat::memory_plan& plan,
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


}  // namespace remat::testing::nets
