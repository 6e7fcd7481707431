// A network of 32-bit word hashes whose every op is integer arithmetic, so that the same bits
// come out on the CPU and on the GPU: the CUDA executor's results can be compared bit for bit
// with the host executor's. `rounds` sets how long each element's hash runs, and so how long a
// kernel takes beside the copies of an offloading schedule.
//
// Stage k maps n_in words to n_out: z[j] hashes the stage's parameter w, j and the inputs
// i = j, j + n_out, ... (or in[j % n_in] when n_out >= n_in, so every input is read), through
// `rounds` rounds; the output is a hash of z, and z is what the tape keeps (or the workspace,
// when not recording). Backward: dz[j] from g[j], z[j], out[j] and w through `rounds` rounds; the
// input gradient from a_k and dz (every dz read); the parameter's gradient accumulates the sum of
// dz[j] (2j + 1), modulo 2^32, so the order of the sum does not matter. The loss: g_L[j] a hash of
// a_L[j]; its value, the sum of a_L.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#if defined(__CUDACC__)
#define REMAT_WORD_HD __host__ __device__
#else
#define REMAT_WORD_HD
#endif

namespace word_math {

using u32 = std::uint32_t;

REMAT_WORD_HD inline u32 mix(u32 h, u32 v) {
  h ^= v + 0x9E3779B9u + (h << 6) + (h >> 2);
  h ^= h >> 16;
  h *= 0x7FEB352Du;
  h ^= h >> 15;
  h *= 0x846CA68Bu;
  return h ^ (h >> 16);
}
REMAT_WORD_HD inline u32 churn(u32 h, u32 rounds) {
  for (u32 r = 0; r < rounds; ++r) h = mix(h, r);
  return h;
}
REMAT_WORD_HD inline u32 forward_z(const u32* in, u32 n_in, u32 n_out, u32 j, u32 w, u32 rounds) {
  u32 h = mix(w, j);
  if (n_out >= n_in)
    h = mix(h, in[j % n_in]);
  else
    for (u32 i = j; i < n_in; i += n_out) h = mix(h, in[i]);
  return churn(h, rounds);
}
REMAT_WORD_HD inline u32 activate(u32 z) {
  return mix(z, 0x51ED27u);
}
REMAT_WORD_HD inline u32 output_gradient(u32 g, u32 z, u32 out, u32 w, u32 rounds) {
  return churn(mix(mix(g, z), out) ^ w, rounds);
}
REMAT_WORD_HD inline u32 input_gradient(const u32* in, u32 n_in, const u32* dz, u32 n_out, u32 i) {
  u32 h = mix(in[i], i);
  if (n_in >= n_out)
    h = mix(h, dz[i % n_out]);
  else
    for (u32 j = i; j < n_out; j += n_in) h = mix(h, dz[j]);
  return h;
}
REMAT_WORD_HD inline u32 weight_term(u32 dz, u32 j) {
  return dz * (2u * j + 1u);
}
REMAT_WORD_HD inline u32 loss_gradient(u32 a, u32 j) {
  return mix(a, j ^ 0xA5A5A5A5u);
}
REMAT_WORD_HD inline u32 update(u32 w, u32 dw) {
  return mix(w, dw);
}

}  // namespace word_math

// The same on the GPU: each function enqueues its kernels on `stream`. `w`, `dw` and `loss` are
// device pointers, read when the kernel runs (so a replayed graph sees updated parameters).
namespace word_kernels {

using word_math::u32;

// z and out of a stage (z: the tape's saved part or the workspace).
void forward(const u32* in, u32 n_in, u32* z, u32* out, u32 n_out, const u32* w, u32 rounds,
             cudaStream_t stream);
// dz into `dz` (the workspace), *dw += the weight terms, then the input gradient `gin`.
void backward(const u32* in, u32 n_in, const u32* out, const u32* z, const u32* g, u32* dz,
              u32* gin, u32 n_out, const u32* w, u32* dw, u32 rounds, cudaStream_t stream);
// g = loss gradients of a; *loss += the sum of a (the caller zeroes it).
void loss(const u32* a, u32* g, u32 n, u32* loss, cudaStream_t stream);
// w[k] = update(w[k], dw[k]) for k < n.
void update(u32* w, const u32* dw, u32 n, cudaStream_t stream);

}  // namespace word_kernels
