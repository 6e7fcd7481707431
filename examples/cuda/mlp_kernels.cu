#include "mlp_kernels.hpp"

namespace mlp_kernels {
namespace {

constexpr int threads = 256;
int blocks(int n) {
  return (n + threads - 1) / threads;
}

__global__ void affine_kernel(const float* in, const float* w, const float* b, float* z, int batch,
                              int n_in, int n_out) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= batch * n_out) return;
  const int r = t / n_out, o = t % n_out;
  float acc = b[o];
  for (int i = 0; i < n_in; ++i) acc += w[o * n_in + i] * in[r * n_in + i];
  z[t] = acc;
}

__global__ void activate_kernel(const float* z, float* out, int n, bool use_tanh) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  out[t] = use_tanh ? tanhf(z[t]) : fmaxf(z[t], 0.0f);
}

__global__ void tanh_backward_kernel(const float* g, const float* z, float* dz, int n) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  const float y = tanhf(z[t]);
  dz[t] = g[t] * (1.0f - y * y);
}

__global__ void relu_backward_kernel(float* g, const float* out, int n) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  if (!(out[t] > 0.0f)) g[t] = 0.0f;
}

__global__ void input_gradient_kernel(const float* dz, const float* w, float* gin, int batch,
                                      int n_in, int n_out) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= batch * n_in) return;
  const int r = t / n_in, i = t % n_in;
  float acc = 0.0f;
  for (int o = 0; o < n_out; ++o) acc += dz[r * n_out + o] * w[o * n_in + i];
  gin[t] = acc;
}

__global__ void weight_gradient_kernel(const float* dz, const float* in, float* dw, float* db,
                                       int batch, int n_in, int n_out) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n_out * (n_in + 1)) return;
  const int o = t / (n_in + 1), i = t % (n_in + 1);
  float acc = 0.0f;
  if (i == n_in) {
    for (int r = 0; r < batch; ++r) acc += dz[r * n_out + o];
    db[o] += acc;
  } else {
    for (int r = 0; r < batch; ++r) acc += dz[r * n_out + o] * in[r * n_in + i];
    dw[o * n_in + i] += acc;
  }
}

__global__ void loss_gradient_kernel(const float* a, const float* target, float* g, int n,
                                     float scale) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  g[t] = (a[t] - target[t]) * scale;
}

__global__ void loss_value_kernel(const float* a, const float* target, float* loss, int n,
                                  float scale) {
  float acc = 0.0f;
  for (int j = 0; j < n; ++j) acc += (a[j] - target[j]) * (a[j] - target[j]);
  *loss = 0.5f * scale * acc;
}

__global__ void sgd_kernel(float* w, const float* dw, int n, float rate) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  w[t] -= rate * dw[t];
}

}  // namespace

// A grid of zero blocks is a launch error: empty tensors launch nothing.
void affine(const float* in, const float* w, const float* b, float* z, int batch, int n_in,
            int n_out, cudaStream_t stream) {
  if (batch * n_out > 0)
    affine_kernel<<<blocks(batch * n_out), threads, 0, stream>>>(in, w, b, z, batch, n_in, n_out);
}
void activate(const float* z, float* out, int n, bool use_tanh, cudaStream_t stream) {
  if (n > 0) activate_kernel<<<blocks(n), threads, 0, stream>>>(z, out, n, use_tanh);
}
void tanh_backward(const float* g, const float* z, float* dz, int n, cudaStream_t stream) {
  if (n > 0) tanh_backward_kernel<<<blocks(n), threads, 0, stream>>>(g, z, dz, n);
}
void relu_backward(float* g, const float* out, int n, cudaStream_t stream) {
  if (n > 0) relu_backward_kernel<<<blocks(n), threads, 0, stream>>>(g, out, n);
}
void input_gradient(const float* dz, const float* w, float* gin, int batch, int n_in, int n_out,
                    cudaStream_t stream) {
  if (batch * n_in > 0)
    input_gradient_kernel<<<blocks(batch * n_in), threads, 0, stream>>>(dz, w, gin, batch, n_in,
                                                                        n_out);
}
void weight_gradient(const float* dz, const float* in, float* dw, float* db, int batch, int n_in,
                     int n_out, cudaStream_t stream) {
  const int n = n_out * (n_in + 1);
  if (n > 0)
    weight_gradient_kernel<<<blocks(n), threads, 0, stream>>>(dz, in, dw, db, batch, n_in, n_out);
}
void loss_gradient(const float* a, const float* target, float* g, int n, float scale,
                   cudaStream_t stream) {
  if (n > 0) loss_gradient_kernel<<<blocks(n), threads, 0, stream>>>(a, target, g, n, scale);
}
void loss_value(const float* a, const float* target, float* loss, int n, float scale,
                cudaStream_t stream) {
  loss_value_kernel<<<1, 1, 0, stream>>>(a, target, loss, n, scale);
}
void sgd(float* w, const float* dw, int n, float rate, cudaStream_t stream) {
  if (n > 0) sgd_kernel<<<blocks(n), threads, 0, stream>>>(w, dw, n, rate);
}

}  // namespace mlp_kernels
