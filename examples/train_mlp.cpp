// Training a 12-layer perceptron on the host under several memory budgets.
//
// remat plans each budget (solve, then place every buffer in one arena that fits the budget);
// the host executor runs the schedule, calling this file's forward, backward and loss on ranges
// of the arena. Recomputation changes the time, never the result: every budget ends with the
// weights of storing everything, bit for bit.
#include <remat/host_executor.hpp>
#include <remat/plan.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <random>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

template <class Byte>
auto floats(std::span<Byte> bytes) {
  using F = std::conditional_t<std::is_const_v<Byte>, const float, float>;
  return std::span<F>(reinterpret_cast<F*>(bytes.data()), bytes.size() / sizeof(float));
}

// Dense layers on a batch: tanh on even stages, ReLU on odd ones. A tanh stage records its
// pre-activation z in the tape (backward needs it); when it does not record, z goes to the
// workspace. A ReLU stage's tape is its output alone: backward masks the gradient with it.
class mlp {
 public:
  mlp(int batch, std::vector<int> widths) : batch_(batch), width_(std::move(widths)) {
    std::mt19937 rng(42);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (std::size_t k = 0; k + 1 < width_.size(); ++k) {
      const auto in = static_cast<std::size_t>(width_[k]);
      const auto out = static_cast<std::size_t>(width_[k + 1]);
      w_.emplace_back(in * out);
      for (float& v : w_.back()) v = normal(rng) / std::sqrt(static_cast<float>(in));
      b_.emplace_back(out, 0.0f);
      dw_.emplace_back(in * out, 0.0f);
      db_.emplace_back(out, 0.0f);
    }
    target_.resize(rows() * n(width_.size() - 1));
  }

  // The task: output sin of the first inputs of each row.
  void set_targets(std::span<const float> input) {
    for (std::size_t r = 0; r < rows(); ++r)
      for (std::size_t j = 0; j < n(width_.size() - 1); ++j)
        target_[r * n(width_.size() - 1) + j] = std::sin(input[r * n(0) + j]);
  }

  // What remat needs to know: per stage, the bytes of its output, of its tape, of the scratch
  // space of its forward and backward, and a relative cost.
  [[nodiscard]] remat::chain chain() const {
    remat::chain c;
    c.input_size = bytes(0);
    for (std::size_t k = 0; k + 1 < width_.size(); ++k) {
      const remat::size_type x = bytes(k + 1);
      const bool t = is_tanh(k);
      const double flops = static_cast<double>(width_[k]) * width_[k + 1];
      c.stages.push_back({.forward_time = flops,
                          .backward_time = 2 * flops,
                          .output_size = x,
                          .tape_size = t ? 2 * x : x,
                          .forward_overhead = t ? x : 0,
                          .backward_overhead = t ? x : 0});
    }
    return c;
  }

  void forward(const remat::forward_call& f) {
    const auto k = static_cast<std::size_t>(f.stage);
    const auto in = floats(f.input);
    const auto out = floats(f.output);
    const auto z = is_tanh(k) ? floats(f.recording ? f.saved : f.workspace) : out;
    for (std::size_t r = 0; r < rows(); ++r)
      for (std::size_t o = 0; o < n(k + 1); ++o) {
        float acc = b_[k][o];
        for (std::size_t i = 0; i < n(k); ++i) acc += w_[k][o * n(k) + i] * in[r * n(k) + i];
        z[r * n(k + 1) + o] = acc;
      }
    for (std::size_t j = 0; j < out.size(); ++j)
      out[j] = is_tanh(k) ? std::tanh(z[j]) : std::max(z[j], 0.0f);
  }

  void backward(const remat::backward_call& c) {
    const auto k = static_cast<std::size_t>(c.stage);
    const auto g = floats(c.output_gradient);
    const auto dz = is_tanh(k) ? floats(c.workspace) : g;
    for (std::size_t j = 0; j < g.size(); ++j) {
      if (is_tanh(k)) {
        const float t = std::tanh(floats(c.saved)[j]);
        dz[j] = g[j] * (1.0f - t * t);
      } else if (!(floats(c.output)[j] > 0.0f)) {
        dz[j] = 0.0f;
      }
    }
    const auto in = floats(c.input);
    const auto gin = floats(c.input_gradient);
    for (std::size_t r = 0; r < rows(); ++r) {
      for (std::size_t i = 0; i < n(k); ++i) {
        float acc = 0.0f;
        for (std::size_t o = 0; o < n(k + 1); ++o)
          acc += dz[r * n(k + 1) + o] * w_[k][o * n(k) + i];
        gin[r * n(k) + i] = acc;
      }
      for (std::size_t o = 0; o < n(k + 1); ++o) {
        db_[k][o] += dz[r * n(k + 1) + o];
        for (std::size_t i = 0; i < n(k); ++i)
          dw_[k][o * n(k) + i] += dz[r * n(k + 1) + o] * in[r * n(k) + i];
      }
    }
  }

  // Half the squared distance to the target, averaged over the batch.
  void loss(const remat::loss_call& c) {
    const auto a = floats(c.input);
    const auto g = floats(c.input_gradient);
    loss_ = 0.0f;
    for (std::size_t j = 0; j < g.size(); ++j) {
      const float d = a[j] - target_[j];
      loss_ += 0.5f * d * d / static_cast<float>(batch_);
      g[j] = d / static_cast<float>(batch_);
    }
  }

  void step(float rate) {
    for (std::size_t k = 0; k < w_.size(); ++k) {
      for (std::size_t i = 0; i < w_[k].size(); ++i)
        w_[k][i] -= rate * std::exchange(dw_[k][i], 0.0f);
      for (std::size_t i = 0; i < b_[k].size(); ++i)
        b_[k][i] -= rate * std::exchange(db_[k][i], 0.0f);
    }
  }

  [[nodiscard]] float last_loss() const { return loss_; }
  [[nodiscard]] bool same_weights(const mlp& other) const {
    auto same = [](const auto& a, const auto& b) {
      for (std::size_t k = 0; k < a.size(); ++k)
        if (std::memcmp(a[k].data(), b[k].data(), a[k].size() * sizeof(float)) != 0) return false;
      return true;
    };
    return same(w_, other.w_) && same(b_, other.b_);
  }

 private:
  static bool is_tanh(std::size_t k) { return k % 2 == 0; }
  [[nodiscard]] std::size_t n(std::size_t k) const { return static_cast<std::size_t>(width_[k]); }
  [[nodiscard]] std::size_t rows() const { return static_cast<std::size_t>(batch_); }
  [[nodiscard]] remat::size_type bytes(std::size_t k) const {
    return static_cast<remat::size_type>(batch_) * width_[k] *
           static_cast<remat::size_type>(sizeof(float));
  }

  int batch_;
  std::vector<int> width_;
  std::vector<std::vector<float>> w_, b_, dw_, db_;
  std::vector<float> target_;
  float loss_ = 0.0f;
};

// Trains `net` for `steps` steps within `budget` bytes, by the schedule `solver` finds for
// `chain` (the net's, perhaps with a link to host memory); false if no schedule fits once placed.
bool train(remat::size_type budget, int steps, mlp& net, const remat::chain& chain,
           remat::solver solver = remat::solver::optimal) {
  const remat::plan_result p = remat::plan(chain, budget, {.solve = {.solver = solver}});
  if (!p.feasible) {
    std::printf("%9lld bytes: %s\n", static_cast<long long>(budget), p.reason.c_str());
    return false;
  }
  remat::host_executor ex(p.memory);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  float first_loss = 0.0f;
  const auto start = std::chrono::steady_clock::now();
  for (int s = 0; s < steps; ++s) {
    for (float& v : floats(ex.input())) v = normal(rng);  // a new batch
    net.set_targets(floats(ex.input()));
    ex.run(net);
    net.step(0.1f);
    if (s == 0) first_loss = net.last_loss();
  }
  const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
  std::printf(
      "%9lld bytes: arena %7lld (lower bound %7lld, x%.3f), %3zu ops, %6.2f ms/step, "
      "loss %.4f -> %.4f",
      static_cast<long long>(budget), static_cast<long long>(p.memory.arena_bytes),
      static_cast<long long>(p.memory.lower_bound), p.memory.ratio(),
      p.solution.schedule.ops.size(), took.count() / steps, first_loss, net.last_loss());
  if (p.memory.has_transfers())
    std::printf(", host pool %lld, %zu waits between streams",
                static_cast<long long>(p.memory.host_bytes), p.memory.waits.size());
  std::printf("\n");
  return true;
}

int train_under_budgets() {
  const std::vector<int> widths = {32, 64, 48, 64, 32, 64, 48, 64, 32, 64, 48, 32, 8};
  constexpr int batch = 16, steps = 20;
  mlp reference(batch, widths);
  const remat::chain chain = reference.chain();
  const remat::size_type store_all =
      remat::solve(chain, remat::max_size, {.solver = remat::solver::store_all})
          .min_feasible_budget;
  const remat::size_type least = remat::solve(chain, store_all).min_feasible_budget;
  std::printf(
      "%zu layers: store-all needs %lld bytes of activations, the least any schedule "
      "needs is %lld\n",
      widths.size() - 1, static_cast<long long>(store_all), static_cast<long long>(least));
  train(store_all + 4096, steps, reference, chain);
  int identical = 0, runs = 0;
  for (const remat::size_type budget : {store_all * 3 / 4, store_all / 2, least + least / 10}) {
    mlp net(batch, widths);
    if (!train(budget, steps, net, chain)) continue;
    ++runs;
    identical += net.same_weights(reference);
  }
  // With a link to host memory that moves an activation in about a quarter of a layer's forward
  // (bytes per time unit of the chain), activations may go to the host and back instead: the
  // copies run on two threads beside the compute.
  remat::chain linked = chain;
  linked.transfer = {4.0, 4.0};
  std::printf("offloading to host memory as well:\n");
  for (const remat::size_type budget : {store_all / 2, least + least / 10}) {
    mlp net(batch, widths);
    if (!train(budget, steps, net, linked, remat::solver::offload)) continue;
    ++runs;
    identical += net.same_weights(reference);
  }
  std::printf("weights after %d steps identical to store-all's in %d of %d budgets\n", steps,
              identical, runs);
  return identical == runs ? 0 : 1;
}

}  // namespace

int main() {
  try {
    return train_under_budgets();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
