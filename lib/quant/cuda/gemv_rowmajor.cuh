// The body of the GPU decode product of the row-major formats (the method:
// gemv_rowmajor.cu), as a block's work, so that a launch of several formats
// (gemv_mixed.cu) runs the same code as the format's own launch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "quant/cuda/gemv_common.cuh"

namespace eq::quant::cuda::rowmajor {

inline constexpr int kWarps = 8;  // output rows per block
inline constexpr int kBatch = 8;  // 16-byte pieces a lane loads before using any

struct RowParams {
  int64_t rows = 0, cols = 0;
  int m_rows = 1;
  int batch = 1;  // <= kBatch
};

// Element i of a 16-byte piece, as float (before the row scale).
template <typename E>
__device__ inline float element(const uint4& piece, int i);
template <>
__device__ inline float element<int8_t>(const uint4& piece, int i) {
  const uint32_t w = (&piece.x)[i >> 2];
  return static_cast<float>(static_cast<int8_t>(w >> (8 * (i & 3))));
}
template <>
__device__ inline float element<uint16_t>(const uint4& piece, int i) {
  const uint32_t w = (&piece.x)[i >> 1];
  return __uint_as_float((i & 1) ? (w & 0xffff0000u) : (w << 16));  // bf16: the high half of a float32
}
template <typename E>
__device__ inline float element_at(const E* row, int64_t k);
template <>
__device__ inline float element_at<int8_t>(const int8_t* row, int64_t k) {
  return static_cast<float>(row[k]);
}
template <>
__device__ inline float element_at<uint16_t>(const uint16_t* row, int64_t k) {
  return __uint_as_float(static_cast<uint32_t>(row[k]) << 16);
}

// Read-only global memory through the non-coherent cache, or (STAGED: the
// input may be in shared memory) a plain load.
template <bool STAGED>
__device__ inline float4 load_x4(const float* at) {
  if constexpr (STAGED) return *reinterpret_cast<const float4*>(at);
  else return __ldg(reinterpret_cast<const float4*>(at));
}
template <bool STAGED>
__device__ inline float load_x(const float* at) {
  if constexpr (STAGED) return *at;
  else return __ldg(at);
}

// Rows block * kWarps .. of `job`, a warp each, every thread of the block
// (kWarps warps, threads numbered x-fastest) calling. E: int8_t (scaled by
// parts[1][n]) or uint16_t (bf16, unscaled). STAGED: the job may carry a
// gated input, staged in `stage` (dynamic shared memory, m_rows * K floats)
// by the whole block first.
template <typename E, bool kScaled, int MB, bool STAGED>
__device__ __forceinline__ void rowmajor_gemv_block(const RowParams& p, const DeviceGemvJob& job, uint32_t block,
                                                    float* stage) {
  constexpr int kPer = 16 / sizeof(E);  // elements per 16-byte piece
  const int64_t N = p.rows, K = p.cols;
  const int tid = threadIdx.x + blockDim.x * threadIdx.y, lane = tid & 31;
  const int64_t n = static_cast<int64_t>(block) * kWarps + (tid >> 5);
  const float* x = job.x;
  if constexpr (STAGED) x = block_input(job, stage, p.m_rows, static_cast<uint32_t>(K));
  if (n >= N) return;
  const E* row = static_cast<const E*>(job.parts[0]) + n * K;
  const float* xrow[MB];
  for (int m = 0; m < MB; ++m) xrow[m] = x + static_cast<int64_t>(m < p.m_rows ? m : p.m_rows - 1) * K;
  float acc[MB];
  for (int m = 0; m < MB; ++m) acc[m] = 0.0f;

  int64_t k_done = 0;
  // Vector part: the row (and x) 16-byte aligned; p.batch pieces per lane
  // loaded before any is used.
  if ((n * K * static_cast<int64_t>(sizeof(E))) % 16 == 0 && K % 4 == 0) {
    const int64_t pieces = K / kPer;
    const uint4* src = reinterpret_cast<const uint4*>(row);
    for (int64_t i0 = lane; i0 < pieces; i0 += 32 * p.batch) {
      uint4 piece[kBatch];
#pragma unroll
      for (int b = 0; b < kBatch; ++b)
        if (b < p.batch && i0 + 32 * b < pieces) piece[b] = __ldg(src + i0 + 32 * b);
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int64_t i = i0 + 32 * b;
        if (b >= p.batch || i >= pieces) break;
        float w[kPer];
#pragma unroll
        for (int e = 0; e < kPer; ++e) w[e] = element<E>(piece[b], e);
#pragma unroll
        for (int m = 0; m < MB; ++m) {
#pragma unroll
          for (int q = 0; q < kPer / 4; ++q) {
            const float4 x = load_x4<STAGED>(xrow[m] + i * kPer + 4 * q);
            acc[m] = fmaf(w[4 * q], x.x, acc[m]);
            acc[m] = fmaf(w[4 * q + 1], x.y, acc[m]);
            acc[m] = fmaf(w[4 * q + 2], x.z, acc[m]);
            acc[m] = fmaf(w[4 * q + 3], x.w, acc[m]);
          }
        }
      }
    }
    k_done = pieces * kPer;
  }
  for (int64_t k = k_done + lane; k < K; k += 32) {
    const float w = element_at<E>(row, k);
    for (int m = 0; m < MB; ++m) acc[m] = fmaf(w, load_x<STAGED>(xrow[m] + k), acc[m]);
  }
  const float scale = kScaled ? __ldg(static_cast<const float*>(job.parts[1]) + n) : 1.0f;
  for (int m = 0; m < MB; ++m) {
    const float sum = warp_sum(acc[m]);
    if (lane == 0 && m < p.m_rows) job.y[static_cast<int64_t>(m) * N + n] = kScaled ? sum * scale : sum;
  }
}

// The bodies: int8_row and bf16.
enum class Body : int { kInt8, kBf16 };

}  // namespace eq::quant::cuda::rowmajor
