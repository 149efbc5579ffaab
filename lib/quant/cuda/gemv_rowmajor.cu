// The GPU decode product of the row-major formats: int8_row (qweight I8
// [N, K], scales F32 [N]: W = q * scale[n]) and bf16 (weight BF16 [N, K]),
// read as stored (docs/formats.md, "int8 / bf16 passthrough").
//
// One warp per output row: the lanes read the row in 16-byte pieces
// (coalesced), multiply by x in float32 and meet in a butterfly sum (fixed
// order). K need not be a multiple of anything (these rows take any shape):
// when a row does not start on 16 bytes the lanes read it element by element.
#include <cuda_runtime.h>

#include <cstring>
#include <string>

#include "core/error.h"
#include "quant/cuda/gemv_common.cuh"

namespace eq::quant::cuda {

namespace {

constexpr int kWarps = 8;  // output rows per block
constexpr int kBatch = 8;  // 16-byte pieces a lane loads before using any

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

// E: int8_t (scaled by parts[1][n]) or uint16_t (bf16, unscaled).
template <typename E, bool kScaled, int MB>
__global__ void __launch_bounds__(32 * kWarps) rowmajor_gemv_kernel(const RowParams p,
                                                                       const __grid_constant__ LaunchJobs jobs) {
  constexpr int kPer = 16 / sizeof(E);  // elements per 16-byte piece
  const DeviceGemvJob& job = jobs.job[blockIdx.y];
  const int64_t N = p.rows, K = p.cols;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.y;
  if (n >= N) return;
  const int lane = threadIdx.x;
  const E* row = static_cast<const E*>(job.parts[0]) + n * K;
  const float* xrow[MB];
  for (int m = 0; m < MB; ++m) xrow[m] = job.x + static_cast<int64_t>(m < p.m_rows ? m : p.m_rows - 1) * K;
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
            const float4 x = __ldg(reinterpret_cast<const float4*>(xrow[m] + i * kPer) + q);
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
    for (int m = 0; m < MB; ++m) acc[m] = fmaf(w, __ldg(xrow[m] + k), acc[m]);
  }
  const float scale = kScaled ? __ldg(static_cast<const float*>(job.parts[1]) + n) : 1.0f;
  for (int m = 0; m < MB; ++m) {
    const float sum = warp_sum(acc[m]);
    if (lane == 0 && m < p.m_rows) job.y[static_cast<int64_t>(m) * N + n] = kScaled ? sum * scale : sum;
  }
}

template <typename E, bool kScaled>
void run_rowmajor(const FormatTraits& format, int64_t rows, int64_t cols, const DeviceGemvJob* jobs, int n_jobs,
                  int m_rows, void*, void* stream) {
  check_call(format, m_rows, "GPU decode");
  RowParams p;
  p.rows = rows;
  p.cols = cols;
  p.m_rows = m_rows;
  p.batch = load_batch(kBatch);
  EQ_CHECK(!gated_call(format, jobs, n_jobs, m_rows, cols),
           "GPU decode: " + std::string(format.name) + " takes no gated input (DeviceGemv::gated_input)");
  const cudaStream_t s = stream_of(stream);
  for_each_launch(jobs, n_jobs, [&](const LaunchJobs& batch, int n) {
    const dim3 grid(static_cast<unsigned>((rows + kWarps - 1) / kWarps), static_cast<unsigned>(n));
    const dim3 block(32, kWarps);
    switch (rows_bucket(m_rows)) {
      case 1: rowmajor_gemv_kernel<E, kScaled, 1><<<grid, block, 0, s>>>(p, batch); break;
      case 2: rowmajor_gemv_kernel<E, kScaled, 2><<<grid, block, 0, s>>>(p, batch); break;
      case 4: rowmajor_gemv_kernel<E, kScaled, 4><<<grid, block, 0, s>>>(p, batch); break;
      default: rowmajor_gemv_kernel<E, kScaled, 8><<<grid, block, 0, s>>>(p, batch); break;
    }
    check_launch("row-major decode kernel");
  });
}

}  // namespace

// No gated input (DeviceGemvJob::x_up): a block of 8 output rows would form
// the whole input again for every 8 outputs (measured: bf16 29.1 -> 32.6 us a
// step, int8_row 32.1 -> 35.9; docs/benchmarks.md, "GPU decode").
const DeviceGemv kInt8RowDeviceGemv{run_rowmajor<int8_t, true>};
const DeviceGemv kBf16DeviceGemv{run_rowmajor<uint16_t, false>};

}  // namespace eq::quant::cuda
