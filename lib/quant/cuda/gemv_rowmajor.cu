// The GPU decode product of the row-major formats: int8_row (qweight I8
// [N, K], scales F32 [N]: W = q * scale[n]) and bf16 (weight BF16 [N, K]),
// read as stored (docs/formats.md, "int8 / bf16 passthrough").
//
// A warp takes 4 output rows (kRowsPerWarp): its lanes read the
// rows in 16-byte pieces (coalesced), the pieces of the 4 rows at one place
// of K together, so that each piece of x serves 4 rows; products in float32,
// each row's sums meet in a butterfly sum (fixed order). K need not be a
// multiple of anything (these rows take any shape): when rows do not all
// start on 16 bytes a warp takes one row, read element by element where it
// is not aligned.
#include <cuda_runtime.h>

#include <cstring>
#include <string>

#include "core/error.h"
#include "quant/cuda/gemv_common.cuh"

namespace eq::quant::cuda {

namespace {

constexpr int kWarps = 8;        // warps per block
constexpr int kRowsPerWarp = 4;  // output rows per warp
constexpr int kBatch = 8;        // 16-byte pieces a lane loads before using any

struct RowParams {
  int64_t rows = 0, cols = 0;
  int m_rows = 1;
  int batch = 1;          // <= kBatch
  int rows_per_warp = 1;  // kRowsPerWarp when every row starts on 16 bytes, else 1
};

// Element i of a 16-byte piece, as float (before the row scale).
template <typename E>
__device__ inline float element(const uint4& piece, int i);
template <>
__device__ inline float element<int8_t>(const uint4& piece, int i) {
  // The byte b as the float 2^23 + (b + 128), minus 2^23 + 128: exact, a
  // permute and an addition (no integer conversion).
  const uint32_t w = (&piece.x)[i >> 2] ^ 0x80808080u;
  return __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7650 + (i & 3))) - 8388736.0f;
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

// The dot products of one row with MB rows of x, one lane's share, added to
// acc (lane `lane` takes the 16-byte pieces lane, lane + 32, ... when the row
// starts on 16 bytes, else the elements lane, lane + 32, ...).
template <typename E, int MB>
__device__ inline void row_partial(const RowParams& p, const E* row, int64_t n, const float* const (&xrow)[MB],
                                   int lane, float (&acc)[MB]) {
  constexpr int kPer = 16 / sizeof(E);  // elements per 16-byte piece
  const int64_t K = p.cols;
  int64_t k_done = 0;
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
            const float4 x = __ldg(reinterpret_cast<const float4*>(xrow[m] + i * kPer + 4 * q));
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
}

// E: int8_t (scaled by parts[1][n]) or uint16_t (bf16, unscaled). A warp
// takes rows n0 .. n0 + p.rows_per_warp - 1. When every row starts on 16
// bytes (K * sizeof(E) a multiple of 16; then 4 rows a warp), a lane loads the
// pieces of its warp's rows at one place of K together, and each float4 of x
// it reads serves all of them (x's loads were 4 a piece of 16 weights with a
// row a warp); a row's sums keep the order of row_partial, so the bits do not
// depend on how many rows a warp takes. Otherwise a warp takes one row.
template <typename E, bool kScaled, int MB>
__global__ void __launch_bounds__(32 * kWarps) rowmajor_gemv_kernel(const RowParams p,
                                                                       const __grid_constant__ LaunchJobs jobs) {
  constexpr int kR = kRowsPerWarp;
  constexpr int kPer = 16 / sizeof(E);   // elements per 16-byte piece
  constexpr int kRowBatch = kBatch / kR;  // pieces of a row a lane loads before using any
  const int64_t N = p.rows, K = p.cols;
  const DeviceGemvJob& job = jobs.job[blockIdx.y];
  const int lane = threadIdx.x;
  const int64_t n0 = (static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.y) * p.rows_per_warp;
  const float* x = job.x;
  if (n0 >= N) return;
  const int here = static_cast<int>(N - n0 < p.rows_per_warp ? N - n0 : p.rows_per_warp);
  const E* rows = static_cast<const E*>(job.parts[0]) + n0 * K;
  const float* xrow[MB];
  for (int m = 0; m < MB; ++m) xrow[m] = x + static_cast<int64_t>(m < p.m_rows ? m : p.m_rows - 1) * K;
  // Row n0 + r's sums of the lanes, met and stored.
  auto store = [&](int r, const float (&a)[MB]) {
    const float scale = kScaled ? __ldg(static_cast<const float*>(job.parts[1]) + n0 + r) : 1.0f;
    for (int m = 0; m < MB; ++m) {
      const float sum = warp_sum(a[m]);
      if (lane == 0 && m < p.m_rows) job.y[static_cast<int64_t>(m) * N + n0 + r] = kScaled ? sum * scale : sum;
    }
  };
  if ((K * static_cast<int64_t>(sizeof(E))) % 16 != 0) {  // rows not all aligned: one at a time
    for (int r = 0; r < here; ++r) {
      float a[MB];
      for (int m = 0; m < MB; ++m) a[m] = 0.0f;
      row_partial<E, MB>(p, rows + r * K, n0 + r, xrow, lane, a);
      store(r, a);
    }
    return;
  }
  float acc[kR][MB];
  for (int r = 0; r < kR; ++r)
    for (int m = 0; m < MB; ++m) acc[r][m] = 0.0f;
  const int64_t pieces = K / kPer;
  const uint4* src = reinterpret_cast<const uint4*>(rows);
  const int batch = p.batch < kR ? 1 : p.batch / kR;
  for (int64_t i0 = lane; i0 < pieces; i0 += 32 * batch) {
    uint4 piece[kR][kRowBatch];
#pragma unroll
    for (int r = 0; r < kR; ++r)
#pragma unroll
      for (int b = 0; b < kRowBatch; ++b)
        if (r < here && b < batch && i0 + 32 * b < pieces) piece[r][b] = __ldg(src + r * pieces + i0 + 32 * b);
#pragma unroll
    for (int b = 0; b < kRowBatch; ++b) {
      const int64_t i = i0 + 32 * b;
      if (b >= batch || i >= pieces) break;
#pragma unroll
      for (int m = 0; m < MB; ++m)
#pragma unroll
        for (int q = 0; q < kPer / 4; ++q) {
          const float4 xv = __ldg(reinterpret_cast<const float4*>(xrow[m] + i * kPer + 4 * q));
#pragma unroll
          for (int r = 0; r < kR; ++r) {
            if (r >= here) break;
            acc[r][m] = fmaf(element<E>(piece[r][b], 4 * q), xv.x, acc[r][m]);
            acc[r][m] = fmaf(element<E>(piece[r][b], 4 * q + 1), xv.y, acc[r][m]);
            acc[r][m] = fmaf(element<E>(piece[r][b], 4 * q + 2), xv.z, acc[r][m]);
            acc[r][m] = fmaf(element<E>(piece[r][b], 4 * q + 3), xv.w, acc[r][m]);
          }
        }
    }
  }
#pragma unroll
  for (int r = 0; r < kR; ++r) {
    if (r >= here) break;
    store(r, acc[r]);
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
  p.rows_per_warp = (cols * static_cast<int64_t>(sizeof(E))) % 16 == 0 ? kRowsPerWarp : 1;
  EQ_CHECK(!gated_call(format, jobs, n_jobs, m_rows, cols),
           "GPU decode: " + std::string(format.name) + " takes no gated input (DeviceGemv::gated_input)");
  const cudaStream_t s = stream_of(stream);
  for_each_launch(jobs, n_jobs, [&](const LaunchJobs& batch, int n) {
    const int64_t per_block = kWarps * p.rows_per_warp;
    const dim3 grid(static_cast<unsigned>((rows + per_block - 1) / per_block), static_cast<unsigned>(n));
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

// No gated input (DeviceGemvJob::x_up): each block would form the whole
// input again for its rows (measured when a block took 8 rows: bf16 29.1 ->
// 32.6 us a step, int8_row 32.1 -> 35.9; docs/benchmarks.md, "GPU decode").
// No part in launches of several formats: at the 80 registers a thread of
// that kernel a warp could take one row only, and the layer ran slower than
// with these rows' own launches beside the others' (docs/benchmarks.md, "GPU
// MoE layer").
const DeviceGemv kInt8RowDeviceGemv{run_rowmajor<int8_t, true>};
const DeviceGemv kBf16DeviceGemv{run_rowmajor<uint16_t, false>};

}  // namespace eq::quant::cuda
