#include "word_kernels.hpp"

namespace word_kernels {
namespace {

constexpr u32 threads = 256;
unsigned blocks(u32 n) {
  const u32 b = (n + threads - 1) / threads;
  return b == 0 ? 1u : b > 65535u ? 65535u : b;
}
__device__ u32 first() {
  return blockIdx.x * blockDim.x + threadIdx.x;
}
__device__ u32 stride() {
  return gridDim.x * blockDim.x;
}

// Adds each thread's `v` to *sum: a warp's first, then one atomic per warp.
__device__ void add_to(u32* sum, u32 v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xFFFFFFFFu, v, offset);
  if (threadIdx.x % 32 == 0) atomicAdd(sum, v);
}

__global__ void forward_kernel(const u32* in, u32 n_in, u32* z, u32* out, u32 n_out, const u32* w,
                               u32 rounds) {
  const u32 wk = *w;
  for (u32 j = first(); j < n_out; j += stride()) {
    const u32 zj = word_math::forward_z(in, n_in, n_out, j, wk, rounds);
    z[j] = zj;
    out[j] = word_math::activate(zj);
  }
}

__global__ void output_gradient_kernel(const u32* out, const u32* z, const u32* g, u32* dz,
                                       u32 n_out, const u32* w, u32* dw, u32 rounds) {
  const u32 wk = *w;
  u32 sum = 0;
  for (u32 j = first(); j < n_out; j += stride()) {
    const u32 d = word_math::output_gradient(g[j], z[j], out[j], wk, rounds);
    dz[j] = d;
    sum += word_math::weight_term(d, j);
  }
  add_to(dw, sum);
}

__global__ void input_gradient_kernel(const u32* in, u32 n_in, const u32* dz, u32 n_out, u32* gin) {
  for (u32 i = first(); i < n_in; i += stride())
    gin[i] = word_math::input_gradient(in, n_in, dz, n_out, i);
}

__global__ void loss_kernel(const u32* a, u32* g, u32 n, u32* loss) {
  u32 sum = 0;
  for (u32 j = first(); j < n; j += stride()) {
    g[j] = word_math::loss_gradient(a[j], j);
    sum += a[j];
  }
  add_to(loss, sum);
}

__global__ void update_kernel(u32* w, const u32* dw, u32 n) {
  for (u32 k = first(); k < n; k += stride()) w[k] = word_math::update(w[k], dw[k]);
}

}  // namespace

void forward(const u32* in, u32 n_in, u32* z, u32* out, u32 n_out, const u32* w, u32 rounds,
             cudaStream_t stream) {
  forward_kernel<<<blocks(n_out), threads, 0, stream>>>(in, n_in, z, out, n_out, w, rounds);
}

void backward(const u32* in, u32 n_in, const u32* out, const u32* z, const u32* g, u32* dz,
              u32* gin, u32 n_out, const u32* w, u32* dw, u32 rounds, cudaStream_t stream) {
  output_gradient_kernel<<<blocks(n_out), threads, 0, stream>>>(out, z, g, dz, n_out, w, dw,
                                                                rounds);
  input_gradient_kernel<<<blocks(n_in), threads, 0, stream>>>(in, n_in, dz, n_out, gin);
}

void loss(const u32* a, u32* g, u32 n, u32* loss, cudaStream_t stream) {
  loss_kernel<<<blocks(n), threads, 0, stream>>>(a, g, n, loss);
}

void update(u32* w, const u32* dw, u32 n, cudaStream_t stream) {
  update_kernel<<<blocks(n), threads, 0, stream>>>(w, dw, n);
}

}  // namespace word_kernels
