// x quantized to int8 on the GPU exactly as the CPU's decode kernels quantize
// it (block_int8.h, gemv.h: blocks of 32, an fp32 scale each), so that a GPU
// product and the CPU's multiply the same integers: once a call into scratch
// (int8_input.cu; every call of several rows, and one-row calls, routed ones
// too, of more than a wave of blocks, quantize_once), or one row by each
// block of a decode kernel in its dynamic shared memory (the other one-row
// calls and the launches of several formats). The stream bodies
// (gemv_stream.cuh) and the int8_row body (gemv_rowmajor.cuh), in their own
// kernels and in launches of several formats, read it with dp4a.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "quant/cuda/gemv_common.cuh"

namespace eq::quant::cuda {

// The order of a staged row, so that the bytes a kernel pulls out of one code
// word meet their x in one 32-bit word (as the CPU's q_nib and q_crumb):
//   kNatural:    x[k] at k;
//   kNib:        4-bit affine words give codes 0 2 4 6 | 1 3 5 7 of each 8;
//   kCrumb:      2-bit words give codes 0 4 8 12 | 1 5 9 13 | ... of each 16;
//   kSplitTable: 4-bit table codes, whose two halves (codes 0-7, 8-15) each
//                hold values of one sign: per 4 x, sign_lo * q then sign_hi * q
//                (gemv_stream.cuh, code_bytes), 2 bytes an x.
enum class XLayout : int { kNatural, kNib, kCrumb, kSplitTable };

__host__ __device__ constexpr uint32_t padded_k(uint32_t K) { return (K + 31u) / 32u * 32u; }
__host__ __device__ constexpr uint32_t staged_row_bytes(XLayout layout, uint32_t K) {
  return padded_k(K) * (layout == XLayout::kSplitTable ? 2u : 1u);
}

// Bytes of m_rows staged rows of K: the rows, then each block's scale,
// then the sums of q over each 16.
__host__ __device__ inline size_t int8_stage_bytes(XLayout layout, int m_rows, int64_t K) {
  const size_t kp = padded_k(static_cast<uint32_t>(K));
  return static_cast<size_t>(m_rows) *
         (staged_row_bytes(layout, static_cast<uint32_t>(K)) + kp / 32 * sizeof(float) + kp / 16 * sizeof(int32_t));
}

template <XLayout L>
__device__ inline uint32_t staged_at(uint32_t k) {
  if constexpr (L == XLayout::kNib) return (k & ~7u) | ((k & 1u) << 2) | ((k & 7u) >> 1);
  else if constexpr (L == XLayout::kCrumb) return (k & ~15u) | ((k & 3u) << 2) | ((k & 15u) >> 2);
  else if constexpr (L == XLayout::kSplitTable) return (k >> 2) * 8u + (k & 3u);  // the sign_hi copy 4 bytes on
  else return k;
}

struct Int8Input {
  const int8_t* q = nullptr;         // [m_rows][row_bytes]
  const float* scale = nullptr;      // [m_rows][kp / 32] max |x| / 127 of each block of 32
  const int32_t* sum16 = nullptr;    // [m_rows][kp / 16] sum of q over each 16
  uint32_t row_bytes = 0, kp = 0;

  __device__ const int8_t* row(int m) const { return q + static_cast<size_t>(m) * row_bytes; }
  __device__ float block_scale(int m, uint32_t k) const { return scale[static_cast<size_t>(m) * (kp / 32) + k / 32]; }
  __device__ const int32_t* sums(int m, uint32_t k) const { return sum16 + static_cast<size_t>(m) * (kp / 16) + k / 16; }
};

// Where the parts of a staged input of m_rows rows of K lie, from its start.
template <XLayout L>
__device__ inline Int8Input int8_input_at(const unsigned char* area, int m_rows, uint32_t K) {
  const uint32_t kp = padded_k(K), row_bytes = staged_row_bytes(L, K);
  const float* scale = reinterpret_cast<const float*>(area + static_cast<size_t>(m_rows) * row_bytes);
  const int32_t* sum16 = reinterpret_cast<const int32_t*>(scale + static_cast<size_t>(m_rows) * (kp / 32));
  return {reinterpret_cast<const int8_t*>(area), scale, sum16, row_bytes, kp};
}

// Unit u of a staged input at `area` (int8_input_at's layout): x[m][k0 ..
// k0 + 8) of the job's x (or its gated input), quantized as block_int8.h's
// generic kernel does: amax, scale = amax / 127, q = round-half-even(clamp(x *
// (127 / amax), +-127)), zeros past K; the same bits for every finite x (a
// NaN makes its block's scale NaN here). 4 adjacent lanes take a block of 32
// (units 4b .. 4b + 3), so every lane of the warp must call, `live` or not.
template <XLayout L>
__device__ inline void quantize_unit(const DeviceGemvJob& job, unsigned char* area, int m_rows, uint32_t K, uint32_t u,
                                     bool live, int sign_lo, int sign_hi) {
  const uint32_t kp = padded_k(K), blocks = kp / 32, row_bytes = staged_row_bytes(L, K);
  int8_t* q = reinterpret_cast<int8_t*>(area);
  float* scale = reinterpret_cast<float*>(area + static_cast<size_t>(m_rows) * row_bytes);
  int32_t* sum16 = reinterpret_cast<int32_t*>(scale + static_cast<size_t>(m_rows) * blocks);
  const uint32_t m = live ? u / (blocks * 4) : 0, b = (u >> 2) % blocks, k0 = b * 32 + (u & 3u) * 8;
  const size_t at = static_cast<size_t>(m) * K + k0;
  float v[8] = {};
  if (live && k0 + 8 <= K && K % 8 == 0) {
    for (int h = 0; h < 2; ++h) {
      const float4 x4 = *reinterpret_cast<const float4*>(job.x + at + 4 * h);
      v[4 * h] = x4.x, v[4 * h + 1] = x4.y, v[4 * h + 2] = x4.z, v[4 * h + 3] = x4.w;
      if (job.x_up != nullptr) {
        const float4 u4 = *reinterpret_cast<const float4*>(job.x_up + at + 4 * h);
        v[4 * h] = swiglu_device(v[4 * h], u4.x), v[4 * h + 1] = swiglu_device(v[4 * h + 1], u4.y);
        v[4 * h + 2] = swiglu_device(v[4 * h + 2], u4.z), v[4 * h + 3] = swiglu_device(v[4 * h + 3], u4.w);
      }
    }
  } else if (live) {
    for (uint32_t e = 0; e < 8; ++e)
      if (k0 + e < K)
        v[e] = job.x_up != nullptr ? swiglu_device(job.x[at + e], job.x_up[at + e]) : job.x[at + e];
  }
  // A NaN in the block makes its scale NaN, so that the products it enters are
  // NaN (fmaxf alone would drop it and clamp it to -127).
  float amax = 0.0f;
  bool nan = false;
  for (int e = 0; e < 8; ++e) amax = fmaxf(amax, fabsf(v[e])), nan = nan || isnan(v[e]);
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
  nan = ((__ballot_sync(0xffffffffu, nan) >> (threadIdx.x & 28u)) & 15u) != 0;  // the 4 lanes of the block
  const float inv = amax > 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
  int32_t s8 = 0;
  int8_t* row = q + static_cast<size_t>(m) * row_bytes;
  for (uint32_t e = 0; e < 8; ++e) {
    const float c = fminf(fmaxf(__fmul_rn(v[e], inv), -127.0f), 127.0f);
    const int32_t qi = static_cast<int32_t>(__fsub_rn(__fadd_rn(c, 12582912.0f), 12582912.0f));
    s8 += qi;
    if (live) {
      const uint32_t to = staged_at<L>(k0 + e);
      if constexpr (L == XLayout::kSplitTable) {
        row[to] = static_cast<int8_t>(sign_lo * qi);
        row[to + 4] = static_cast<int8_t>(sign_hi * qi);
      } else {
        row[to] = static_cast<int8_t>(qi);
      }
    }
  }
  const int32_t s16 = s8 + __shfl_xor_sync(0xffffffffu, s8, 1);
  if (live && (u & 1u) == 0) sum16[static_cast<size_t>(m) * (kp / 16) + k0 / 16] = s16;
  if (live && (u & 3u) == 0) scale[static_cast<size_t>(m) * blocks + b] = nan ? __int_as_float(0x7fc00000) : __fdiv_rn(amax, 127.0f);
}

// Units of m_rows rows of K: 8 x each.
__host__ __device__ constexpr uint32_t int8_units(int m_rows, uint32_t K) {
  return static_cast<uint32_t>(m_rows) * (padded_k(K) / 32) * 4;
}

// The block's rows of x quantized into `stage` by the whole block (every
// thread calls; it ends with a barrier): for one-row launches of one wave
// and the launches of several formats. Otherwise a call quantizes its x once
// (quantize_jobs, quantize_routed): one row is then copied into each block's shared memory
// (copy_int8_row), 2 to 8 rows read where they lie (int8_input_at; at 8 rows
// of K = 7168 the blocks' own staging took longer than the products). Which
// one is a compile-time choice of the kernels (X_ONCE, their rows of x MB),
// so that one row is read as shared memory.
template <XLayout L>
__device__ inline Int8Input stage_int8(const DeviceGemvJob& job, unsigned char* stage, int m_rows, uint32_t K,
                                       int sign_lo = 1, int sign_hi = 1) {
  const uint32_t units = int8_units(m_rows, K);
  const uint32_t threads = blockDim.x * blockDim.y, tid = threadIdx.y * blockDim.x + threadIdx.x;
  for (uint32_t base = 0; base < units; base += threads)  // the same trips for every thread (shuffles)
    quantize_unit<L>(job, stage, m_rows, K, base + tid, base + tid < units, sign_lo, sign_hi);
  __syncthreads();
  return int8_input_at<L>(stage, m_rows, K);
}

// One row of x quantized once a call (quantize_jobs or quantize_routed; `area`: its job's row)
// copied into the block's shared memory by the whole block (every thread
// calls; it ends with a barrier). Quantizing the row again in every block
// was most of a decode step's time at M = 1: skipping it took the 30B
// layer's fp4_g32 step from 13.4 to 10.0 us, DeepSeek-V3's from 75.8 to
// 53.8 (docs/benchmarks.md, "GPU decode").
template <XLayout L>
__device__ inline Int8Input copy_int8_row(const unsigned char* area, unsigned char* stage, uint32_t K) {
  const uint32_t bytes = static_cast<uint32_t>(int8_stage_bytes(L, 1, K));  // a multiple of 4; area: 256-aligned
  const uint32_t threads = blockDim.x * blockDim.y, tid = threadIdx.y * blockDim.x + threadIdx.x;
  for (uint32_t i = tid; i < bytes / 16; i += threads)
    reinterpret_cast<uint4*>(stage)[i] = reinterpret_cast<const uint4*>(area)[i];
  for (uint32_t i = bytes / 16 * 4 + tid; i < bytes / 4; i += threads)
    reinterpret_cast<uint32_t*>(stage)[i] = reinterpret_cast<const uint32_t*>(area)[i];
  __syncthreads();
  return int8_input_at<L>(stage, 1, K);
}

// The int8 x a decode body reads, by the whole block (every thread calls):
// X_ONCE, quantized once a call at `area` (the job's row of the call's
// scratch), one row copied into `stage` (copy_int8_row), more read where they
// lie (int8_input_at); else the block's one row staged in `stage`
// (stage_int8). The one choice of the stream and int8_row bodies.
template <XLayout L, int MB, bool X_ONCE>
__device__ __forceinline__ Int8Input block_int8_x(const unsigned char* area, const DeviceGemvJob& job,
                                                  unsigned char* stage, int m_rows, uint32_t K, int sign_lo = 1,
                                                  int sign_hi = 1) {
  if constexpr (X_ONCE) {
    if constexpr (MB == 1) return copy_int8_row<L>(area, stage, K);
    else return int8_input_at<L>(area, m_rows, K);
  } else {
    static_assert(MB == 1, "several rows of x are quantized once a call");
    return stage_int8<L>(job, stage, m_rows, K, sign_lo, sign_hi);
  }
}

// Whether a decode call quantizes x once (quantize_jobs; a routed one,
// quantize_routed, when its caller gave it room) rather than in each block
// (stage_int8): always for several
// rows; for one row when a launch of its jobs (up to kJobsPerLaunch, of
// blocks_per_job blocks each) has more blocks than the GPU holds at once
// (blocks_per_multiprocessor a multiprocessor: the kernel's launch bounds),
// since each wave of blocks would quantize x again. A launch of one wave is
// quicker without the quantization's launch ahead of it (docs/benchmarks.md,
// "GPU decode"). set_quantize_once (cuda_gpus.h) can force either way.
bool quantize_once(int m_rows, int n_jobs, int64_t blocks_per_job, int blocks_per_multiprocessor);

// Host side (int8_input.cu): the bytes of one job's area in quantize_jobs'
// scratch (a multiple of 256), and the launch that quantizes the m_rows rows
// of each of the n_jobs jobs into scratch + j * that.
size_t int8_job_stride(XLayout layout, int m_rows, int64_t K);
// A routed call's x of K quantized once into r.x_scratch (the rows of its
// tokens, kGateUp, or of its n_pairs pairs, kDown, with their gated input):
// sets r.xq and r.xq_stride. The launch begins by waiting for the grid before
// it, so the products launched after it may read the router's ids at once.
void quantize_routed(XLayout layout, RoutedPairs& r, int n_pairs, int64_t K, int sign_lo, int sign_hi,
                     cudaStream_t stream);
void quantize_jobs(XLayout layout, const DeviceGemvJob* jobs, int n_jobs, int m_rows, int64_t K, int sign_lo,
                   int sign_hi, void* scratch, cudaStream_t stream);

}  // namespace eq::quant::cuda
