// Device kernels of a dense layer with tanh or ReLU, for the CUDA MLP example. Plain functions
// that enqueue one kernel each on `stream`; row-major matrices, `batch` rows. Every sum runs in a
// fixed order in one thread (no atomics), so the same inputs give the same bits: a recomputed
// forward matches the first, as re-materialization requires.
#pragma once

#include <cuda_runtime_api.h>

namespace mlp_kernels {

// z[r][o] = b[o] + sum_i w[o][i] * in[r][i]
void affine(const float* in, const float* w, const float* b, float* z, int batch, int n_in,
            int n_out, cudaStream_t stream);
// out = tanh(z) or max(z, 0); `out` may be `z`
void activate(const float* z, float* out, int n, bool tanh, cudaStream_t stream);
// dz = g * (1 - tanh(z)^2)
void tanh_backward(const float* g, const float* z, float* dz, int n, cudaStream_t stream);
// g = 0 where out <= 0, in place
void relu_backward(float* g, const float* out, int n, cudaStream_t stream);
// gin[r][i] = sum_o dz[r][o] * w[o][i]
void input_gradient(const float* dz, const float* w, float* gin, int batch, int n_in, int n_out,
                    cudaStream_t stream);
// dw[o][i] += sum_r dz[r][o] * in[r][i]; db[o] += sum_r dz[r][o]
void weight_gradient(const float* dz, const float* in, float* dw, float* db, int batch, int n_in,
                     int n_out, cudaStream_t stream);
// *loss = scale * sum_j (a[j] - target[j])^2 / 2, summed in order by one thread
void loss_value(const float* a, const float* target, float* loss, int n, float scale,
                cudaStream_t stream);
// g = (a - target) * scale
void loss_gradient(const float* a, const float* target, float* g, int n, float scale,
                   cudaStream_t stream);
// w -= rate * dw
void sgd(float* w, const float* dw, int n, float rate, cudaStream_t stream);

}  // namespace mlp_kernels
