// Elementwise kernels over rows of float32, and block reductions, shared by
// the GPU MoE layer (device_moe.cu), the GPU decoder layers
// (device_layers.cu), their attention (device_attention.cu) and gated delta
// net (device_delta_net.cu).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "model/activation.h"
#include "quant/cuda/gemv_common.cuh"

namespace eq::exec::cuda {
namespace {

// Blocks of 256 threads for a grid-stride loop over n elements.
inline unsigned elementwise_blocks(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + 255) / 256, 1, 65535));
}

// The sum of v over the block (every thread gets it); `red` holds a value per warp.
template <typename T>
__device__ T block_sum(T v, T* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  __syncthreads();  // red may still be read from the previous call
  if (lane == 0) red[warp] = v;
  __syncthreads();
  T s = 0;
  for (int w = 0; w < warps; ++w) s += red[w];
  return s;
}

__device__ float block_max(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float m = -INFINITY;
  for (int w = 0; w < warps; ++w) m = fmaxf(m, red[w]);
  return m;
}

// h = act(g + gate_bias, u + up_bias) over `rows` rows of `width` (the
// biases per column; null: none), model/activation.h's expressions as the
// CPU's glu_block writes them.
__global__ void glu_rows_kernel(const float* g, const float* u, float* h, int64_t rows, int64_t width,
                                const float* gate_bias, const float* up_bias, int kind, float alpha, float limit) {
  const int64_t n = rows * width;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = i % width;
    float a = gate_bias ? g[i] + gate_bias[c] : g[i];
    float b = up_bias ? u[i] + up_bias[c] : u[i];
    if (kind == static_cast<int>(model::ActivationKind::kSwiGlu)) {
      h[i] = quant::cuda::swiglu_device(a, b);
    } else {
      a = fminf(a, limit);
      b = fminf(fmaxf(b, -limit), limit);
      h[i] = (b + 1.0f) * (a / (1.0f + expf(a * -alpha)));
    }
  }
}

// y[r, :] += bias over `rows` rows of `width`.
__global__ void add_bias_rows_kernel(float* y, int64_t rows, int64_t width, const float* bias) {
  const int64_t n = rows * width;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] += bias[i % width];
}

}  // namespace
}  // namespace eq::exec::cuda
