// A multi-layer perceptron on the GPU, written against remat::cuda::executor's callbacks.
//
// Stage k is a dense layer: tanh on even stages, whose tape keeps the pre-activation z (backward
// needs it) and whose workspace holds z when not recording and dz in backward; ReLU on odd
// stages, whose tape is the output alone (backward masks the incoming gradient in place). The
// loss is half the squared distance to a fixed target, averaged over the batch. Parameters,
// their gradients and the target live in one device allocation of the network's own, outside
// the executor's arena: the chain describes activations only.
#pragma once

#include "mlp_kernels.hpp"

#include <remat/chain.hpp>
#include <remat/cuda/error.hpp>
#include <remat/cuda/executor.hpp>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

class device_mlp {
 public:
  device_mlp(int batch, std::vector<int> widths, std::uint32_t seed)
      : batch_(batch), width_(std::move(widths)) {
    std::size_t at = 0;
    for (std::size_t k = 0; k < stages(); ++k) {
      w_at_.push_back(at);
      at += static_cast<std::size_t>(width_[k] * width_[k + 1]);
      b_at_.push_back(at);
      at += static_cast<std::size_t>(width_[k + 1]);
    }
    n_params_ = at;
    const std::size_t n_target = static_cast<std::size_t>(batch_ * width_.back());
    // [parameters | their gradients | target | loss value]
    std::vector<float> host(2 * n_params_ + n_target + 1, 0.0f);
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (std::size_t k = 0; k < stages(); ++k) {
      const float scale = 1.0f / std::sqrt(static_cast<float>(width_[k]));
      for (std::size_t i = w_at_[k]; i < b_at_[k]; ++i) host[i] = normal(rng) * scale;
      for (std::size_t i = b_at_[k]; i < b_at_[k] + static_cast<std::size_t>(width_[k + 1]); ++i)
        host[i] = 0.1f * normal(rng);
    }
    for (std::size_t i = 0; i < n_target; ++i) host[2 * n_params_ + i] = normal(rng);
    void* p = nullptr;
    REMAT_CUDA_CHECK(cudaMalloc(&p, host.size() * sizeof(float)));
    memory_ = static_cast<float*>(p);
    REMAT_CUDA_CHECK(
        cudaMemcpy(memory_, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
    // A copy from pageable memory may still be in flight on return, and the user's stream may
    // be non-blocking: wait, so that no kernel reads the parameters before they arrive.
    REMAT_CUDA_CHECK(cudaDeviceSynchronize());
  }
  device_mlp(const device_mlp&) = delete;
  device_mlp& operator=(const device_mlp&) = delete;
  ~device_mlp() { cudaFree(memory_); }

  [[nodiscard]] std::size_t stages() const { return width_.size() - 1; }
  [[nodiscard]] int batch() const { return batch_; }
  [[nodiscard]] const std::vector<int>& widths() const { return width_; }

  /// The chain remat plans for: sizes in bytes, times proportional to the layer's flops.
  [[nodiscard]] remat::chain chain() const { return chain_of(batch_, width_); }

  /// The same without a network (and without a GPU).
  [[nodiscard]] static remat::chain chain_of(int batch, const std::vector<int>& widths) {
    auto bytes = [&](std::size_t k) {
      return static_cast<remat::size_type>(batch) * widths[k] *
             static_cast<remat::size_type>(sizeof(float));
    };
    remat::chain c;
    c.input_size = bytes(0);
    for (std::size_t k = 0; k + 1 < widths.size(); ++k) {
      const remat::size_type x = bytes(k + 1);
      const bool t = tanh_stage(static_cast<std::int32_t>(k));
      const double flops = static_cast<double>(widths[k]) * static_cast<double>(widths[k + 1]);
      c.stages.push_back({flops, 2 * flops, x, t ? 2 * x : x, t ? x : 0, t ? x : 0});
    }
    return c;
  }

  void forward(const remat::cuda::forward_call& f, cudaStream_t stream) {
    const auto k = static_cast<std::size_t>(f.stage);
    const bool t = tanh_stage(f.stage);
    float* out = f.output.as<float>();
    float* z = t ? (f.recording ? f.saved : f.workspace).as<float>() : out;
    mlp_kernels::affine(f.input.as<float>(), w(k), b(k), z, batch_, width_[k], width_[k + 1],
                        stream);
    mlp_kernels::activate(z, out, batch_ * width_[k + 1], t, stream);
  }

  void backward(const remat::cuda::backward_call& c, cudaStream_t stream) {
    const auto k = static_cast<std::size_t>(c.stage);
    const int n = batch_ * width_[k + 1];
    float* dz = c.output_gradient.as<float>();
    if (tanh_stage(c.stage)) {
      dz = c.workspace.as<float>();
      mlp_kernels::tanh_backward(c.output_gradient.as<float>(), c.saved.as<float>(), dz, n, stream);
    } else {
      mlp_kernels::relu_backward(dz, c.output.as<float>(), n, stream);
    }
    mlp_kernels::input_gradient(dz, w(k), c.input_gradient.as<float>(), batch_, width_[k],
                                width_[k + 1], stream);
    mlp_kernels::weight_gradient(dz, c.input.as<float>(), dw(k), db(k), batch_, width_[k],
                                 width_[k + 1], stream);
  }

  void loss(const remat::cuda::loss_call& c, cudaStream_t stream) {
    const int n = batch_ * width_.back();
    mlp_kernels::loss_value(c.input.as<float>(), target(), loss_value(), n,
                            1.0f / static_cast<float>(batch_), stream);
    mlp_kernels::loss_gradient(c.input.as<float>(), target(), c.input_gradient.as<float>(), n,
                               1.0f / static_cast<float>(batch_), stream);
  }

  void zero_gradients(cudaStream_t stream) {
    REMAT_CUDA_CHECK(cudaMemsetAsync(memory_ + n_params_, 0, n_params_ * sizeof(float), stream));
  }
  void sgd(float rate, cudaStream_t stream) {
    mlp_kernels::sgd(memory_, memory_ + n_params_, static_cast<int>(n_params_), rate, stream);
    REMAT_CUDA_CHECK(cudaGetLastError());
  }

  /// Parameters then gradients, copied to the host (waits for the stream).
  [[nodiscard]] std::vector<float> parameters_and_gradients(cudaStream_t stream) const {
    std::vector<float> host(2 * n_params_);
    REMAT_CUDA_CHECK(cudaMemcpyAsync(host.data(), memory_, host.size() * sizeof(float),
                                     cudaMemcpyDeviceToHost, stream));
    REMAT_CUDA_CHECK(cudaStreamSynchronize(stream));
    return host;
  }
  /// The loss of the last run (waits for the stream).
  [[nodiscard]] float last_loss(cudaStream_t stream) const {
    float v = 0;
    REMAT_CUDA_CHECK(cudaMemcpyAsync(&v, loss_value(), sizeof v, cudaMemcpyDeviceToHost, stream));
    REMAT_CUDA_CHECK(cudaStreamSynchronize(stream));
    return v;
  }

 private:
  static bool tanh_stage(std::int32_t k) { return k % 2 == 0; }
  float* w(std::size_t k) const { return memory_ + w_at_[k]; }
  float* b(std::size_t k) const { return memory_ + b_at_[k]; }
  float* dw(std::size_t k) const { return memory_ + n_params_ + w_at_[k]; }
  float* db(std::size_t k) const { return memory_ + n_params_ + b_at_[k]; }
  float* target() const { return memory_ + 2 * n_params_; }
  float* loss_value() const {
    return memory_ + 2 * n_params_ + static_cast<std::size_t>(batch_ * width_.back());
  }

  int batch_;
  std::vector<int> width_;
  std::vector<std::size_t> w_at_, b_at_;  // offsets in floats of each stage's w and b
  std::size_t n_params_ = 0;
  float* memory_ = nullptr;
};
