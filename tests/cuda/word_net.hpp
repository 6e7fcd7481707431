// The word-hash network of word_kernels.hpp as callbacks: `host_word_net` for remat's host
// executor, `device_word_net` for the CUDA executor. Trained on the same plan and inputs, they
// end with the same parameters, gradients, loss and g_0, bit for bit.
#pragma once

#include "word_kernels.hpp"

#include <remat/chain.hpp>
#include <remat/cuda/error.hpp>
#include <remat/cuda/executor.hpp>
#include <remat/host_executor.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace word_net {

using word_math::u32;

/// The chain of a network of `words[k]` words per activation: a tape of the output and z, a
/// workspace of z when not recording and of dz in backward; times in word hashes.
inline remat::chain chain_of(const std::vector<u32>& words, u32 rounds) {
  if (words.size() < 2) throw std::invalid_argument("word_net: at least one stage");
  for (const u32 n : words)
    if (n == 0) throw std::invalid_argument("word_net: every activation needs a word");
  remat::chain c;
  c.input_size = 4 * static_cast<remat::size_type>(words[0]);
  for (std::size_t k = 0; k + 1 < words.size(); ++k) {
    const auto x = 4 * static_cast<remat::size_type>(words[k + 1]);
    const double t = static_cast<double>(words[k + 1]) * (rounds + 2.0);
    c.stages.push_back({.forward_time = t,
                        .backward_time = 2 * t,
                        .output_size = x,
                        .tape_size = 2 * x,
                        .forward_overhead = x,
                        .backward_overhead = x,
                        .recording_overhead = 0});
  }
  return c;
}

/// What training leaves.
struct outcome {
  std::vector<u32> w, dw, input_gradient;
  u32 loss = 0;
  friend bool operator==(const outcome&, const outcome&) = default;
};

/// The parameters a network starts from.
inline std::vector<u32> initial_parameters(std::size_t stages) {
  std::vector<u32> w(stages);
  for (std::size_t k = 0; k < stages; ++k) w[k] = word_math::mix(0x1234567u, static_cast<u32>(k));
  return w;
}

/// Step `step`'s input a_0: `n` words.
inline std::vector<u32> input_of(std::size_t n, u32 step) {
  std::vector<u32> x(n);
  for (std::size_t j = 0; j < n; ++j) x[j] = word_math::mix(step + 77u, static_cast<u32>(j));
  return x;
}

template <class Byte>
auto words_of(std::span<Byte> b) {
  using W = std::conditional_t<std::is_const_v<Byte>, const u32, u32>;
  return std::span<W>(reinterpret_cast<W*>(b.data()), b.size() / sizeof(u32));
}

class host_word_net {
 public:
  host_word_net(std::size_t stages, u32 rounds)
      : w_(initial_parameters(stages)), dw_(stages, 0), rounds_(rounds) {}

  void forward(const remat::forward_call& f) {
    const auto in = words_of(f.input);
    const auto out = words_of(f.output);
    const auto z = words_of(f.recording ? f.saved : f.workspace);
    const auto k = static_cast<std::size_t>(f.stage);
    for (u32 j = 0; j < out.size(); ++j) {
      z[j] = word_math::forward_z(in.data(), n(in), n(out), j, w_[k], rounds_);
      out[j] = word_math::activate(z[j]);
    }
  }
  void backward(const remat::backward_call& c) {
    const auto in = words_of(c.input);
    const auto out = words_of(c.output);
    const auto z = words_of(c.saved);
    const auto g = words_of(c.output_gradient);
    const auto dz = words_of(c.workspace);
    const auto gin = words_of(c.input_gradient);
    const auto k = static_cast<std::size_t>(c.stage);
    for (u32 j = 0; j < g.size(); ++j) {
      dz[j] = word_math::output_gradient(g[j], z[j], out[j], w_[k], rounds_);
      dw_[k] += word_math::weight_term(dz[j], j);
    }
    for (u32 i = 0; i < gin.size(); ++i)
      gin[i] = word_math::input_gradient(in.data(), n(in), dz.data(), n(g), i);
  }
  void loss(const remat::loss_call& c) {
    const auto a = words_of(c.input);
    const auto g = words_of(c.input_gradient);
    loss_ = 0;
    for (u32 j = 0; j < a.size(); ++j) {
      g[j] = word_math::loss_gradient(a[j], j);
      loss_ += a[j];
    }
  }
  void zero_gradients() { std::fill(dw_.begin(), dw_.end(), 0u); }
  void update() {
    for (std::size_t k = 0; k < w_.size(); ++k) w_[k] = word_math::update(w_[k], dw_[k]);
  }
  [[nodiscard]] outcome result(std::span<const std::byte> g0) const {
    const auto g = words_of(g0);
    return {w_, dw_, {g.begin(), g.end()}, loss_};
  }

 private:
  template <class W>
  static u32 n(std::span<W> s) {
    return static_cast<u32>(s.size());
  }
  std::vector<u32> w_, dw_;
  u32 rounds_;
  u32 loss_ = 0;
};

class device_word_net {
 public:
  device_word_net(std::size_t stages, u32 rounds) : stages_(stages), rounds_(rounds) {
    // [w | dw | loss]
    std::vector<u32> host = initial_parameters(stages);
    host.resize(2 * stages + 1, 0);
    void* p = nullptr;
    REMAT_CUDA_CHECK(cudaMalloc(&p, host.size() * sizeof(u32)));
    memory_ = static_cast<u32*>(p);
    REMAT_CUDA_CHECK(
        cudaMemcpy(memory_, host.data(), host.size() * sizeof(u32), cudaMemcpyHostToDevice));
    REMAT_CUDA_CHECK(cudaDeviceSynchronize());
  }
  device_word_net(const device_word_net&) = delete;
  device_word_net& operator=(const device_word_net&) = delete;
  ~device_word_net() { cudaFree(memory_); }

  void forward(const remat::cuda::forward_call& f, cudaStream_t s) {
    const auto k = static_cast<std::size_t>(f.stage);
    word_kernels::forward(f.input.as<u32>(), n(f.input),
                          (f.recording ? f.saved : f.workspace).as<u32>(), f.output.as<u32>(),
                          n(f.output), memory_ + k, rounds_, s);
  }
  void backward(const remat::cuda::backward_call& c, cudaStream_t s) {
    const auto k = static_cast<std::size_t>(c.stage);
    word_kernels::backward(c.input.as<u32>(), n(c.input), c.output.as<u32>(), c.saved.as<u32>(),
                           c.output_gradient.as<u32>(), c.workspace.as<u32>(),
                           c.input_gradient.as<u32>(), n(c.output_gradient), memory_ + k,
                           memory_ + stages_ + k, rounds_, s);
  }
  void loss(const remat::cuda::loss_call& c, cudaStream_t s) {
    REMAT_CUDA_CHECK(cudaMemsetAsync(loss_value(), 0, sizeof(u32), s));
    word_kernels::loss(c.input.as<u32>(), c.input_gradient.as<u32>(), n(c.input), loss_value(), s);
  }
  void zero_gradients(cudaStream_t s) {
    REMAT_CUDA_CHECK(cudaMemsetAsync(memory_ + stages_, 0, stages_ * sizeof(u32), s));
  }
  void update(cudaStream_t s) {
    word_kernels::update(memory_, memory_ + stages_, static_cast<u32>(stages_), s);
    REMAT_CUDA_CHECK(cudaGetLastError());
  }
  /// Parameters, gradients, loss and `g0` (device bytes), once the stream has run (waits).
  [[nodiscard]] outcome result(remat::cuda::const_device_bytes g0, cudaStream_t s) const {
    std::vector<u32> host(2 * stages_ + 1);
    outcome out;
    out.input_gradient.resize(g0.size / sizeof(u32));
    REMAT_CUDA_CHECK(cudaMemcpyAsync(host.data(), memory_, host.size() * sizeof(u32),
                                     cudaMemcpyDeviceToHost, s));
    REMAT_CUDA_CHECK(
        cudaMemcpyAsync(out.input_gradient.data(), g0.data, g0.size, cudaMemcpyDeviceToHost, s));
    REMAT_CUDA_CHECK(cudaStreamSynchronize(s));
    const auto stages = static_cast<std::ptrdiff_t>(stages_);
    out.w.assign(host.begin(), host.begin() + stages);
    out.dw.assign(host.begin() + stages, host.begin() + 2 * stages);
    out.loss = host.back();
    return out;
  }

 private:
  template <class B>
  static u32 n(const remat::cuda::basic_device_bytes<B>& b) {
    return static_cast<u32>(b.size / sizeof(u32));
  }
  [[nodiscard]] u32* loss_value() const { return memory_ + 2 * stages_; }
  std::size_t stages_;
  u32 rounds_;
  u32* memory_ = nullptr;
};

/// Trains a host network for `steps` steps on `plan` with the host executor.
inline outcome train_on_host(const remat::memory_plan& plan, std::size_t stages, u32 rounds,
                             int steps = 2) {
  host_word_net net(stages, rounds);
  remat::host_executor ex(plan);
  for (int step = 0; step < steps; ++step) {
    const std::vector<u32> x = input_of(ex.input().size() / sizeof(u32), static_cast<u32>(step));
    std::memcpy(ex.input().data(), x.data(), ex.input().size());
    net.zero_gradients();
    ex.run(net);
    net.update();
  }
  return net.result(ex.input_gradient());
}

enum class mode { eager, poison, graph };
inline const char* name(mode m) {
  return m == mode::eager ? "eager" : m == mode::poison ? "poison" : "graph";
}

/// The same on the GPU with the CUDA executor: eagerly, with poisoned frees, or as a CUDA graph
/// captured once and replayed each step.
inline outcome train_on_device(const remat::memory_plan& plan, std::size_t stages, u32 rounds,
                               mode m, cudaStream_t stream, int steps = 2) {
  device_word_net net(stages, rounds);
  remat::cuda::executor ex(plan, stream, {.poison = m == mode::poison});
  std::vector<std::vector<u32>> inputs;  // alive until their copies are done
  for (int step = 0; step < steps; ++step) {
    inputs.push_back(input_of(ex.input().size / sizeof(u32), static_cast<u32>(step)));
    REMAT_CUDA_CHECK(cudaMemcpyAsync(ex.input().data, inputs.back().data(), ex.input().size,
                                     cudaMemcpyHostToDevice, stream));
    net.zero_gradients(stream);
    if (m == mode::graph) {
      if (!ex.captured()) ex.capture(net);
      ex.replay();
    } else {
      ex.run(net);
    }
    net.update(stream);
  }
  return net.result(ex.input_gradient(), stream);
}

}  // namespace word_net
