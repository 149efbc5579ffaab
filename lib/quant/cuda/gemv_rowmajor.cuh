// The body of the GPU decode product of the row-major formats (the method:
// gemv_rowmajor.cu), as a block's work, so that a launch of several formats
// (gemv_mixed.cu) runs the same code as the format's own launch and gives the
// same bits.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "quant/cuda/gemv_common.cuh"
#include "quant/cuda/int8_input.cuh"

namespace eq::quant::cuda::rowmajor {

inline constexpr int kWarps = 8;        // warps per block
inline constexpr int kThreads = 32 * kWarps;
inline constexpr int kRowsPerWarp = 4;  // output rows per warp
inline constexpr int kBatch = 8;        // 16-byte pieces a lane loads before using any

struct RowParams {
  int64_t rows = 0, cols = 0;
  int m_rows = 1;
  int batch = 1;          // <= kBatch
  int rows_per_warp = 1;  // kRowsPerWarp when every row starts on 16 bytes, else 1
  const unsigned char* xq = nullptr;  // int8_row: host-known jobs' x quantized once (quantize_jobs), or null
  size_t xq_stride = 0;               // bytes a job there
};

// Element i of a 16-byte piece of bf16, as float.
template <typename E>
__device__ inline float element(const uint4& piece, int i);
template <>
__device__ inline float element<uint16_t>(const uint4& piece, int i) {
  const uint32_t w = (&piece.x)[i >> 1];
  return __uint_as_float((i & 1) ? (w & 0xffff0000u) : (w << 16));  // bf16: the high half of a float32
}
template <typename E>
__device__ inline float element_at(const E* row, int64_t k);
template <>
__device__ inline float element_at<uint16_t>(const uint16_t* row, int64_t k) {
  return __uint_as_float(static_cast<uint32_t>(row[k]) << 16);
}

// The exact sum of the 16 products of an int8 piece and 16 bytes of int8 x.
__device__ inline int32_t dot16(const uint4& piece, const uint4& x) {
  int32_t d = __dp4a(static_cast<int>(piece.x), static_cast<int>(x.x), 0);
  d = __dp4a(static_cast<int>(piece.y), static_cast<int>(x.y), d);
  d = __dp4a(static_cast<int>(piece.z), static_cast<int>(x.z), d);
  return __dp4a(static_cast<int>(piece.w), static_cast<int>(x.w), d);
}

// acc plus one 16-byte piece i of a row times its x: int8 (the staged row mm
// of xq; a piece lies in one block of 32) as 4 exact dp4a then its block's x
// scale, bf16 in float32 against x (xrow).
template <typename E>
__device__ inline float piece_product(const uint4& piece, int64_t i, const float* xrow, const Int8Input& xq, int mm,
                                      float acc) {
  if constexpr (std::is_same_v<E, int8_t>) {
    const uint4 xv = *reinterpret_cast<const uint4*>(xq.row(mm) + 16 * i);
    return fmaf(xq.block_scale(mm, static_cast<uint32_t>(16 * i)), static_cast<float>(dot16(piece, xv)), acc);
  } else {
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      const float4 x = __ldg(reinterpret_cast<const float4*>(xrow + i * 8 + 4 * q));
      acc = fmaf(element<E>(piece, 4 * q), x.x, acc);
      acc = fmaf(element<E>(piece, 4 * q + 1), x.y, acc);
      acc = fmaf(element<E>(piece, 4 * q + 2), x.z, acc);
      acc = fmaf(element<E>(piece, 4 * q + 3), x.w, acc);
    }
    return acc;
  }
}

// The dot products of one row with MB rows of x, one lane's share, added to
// acc (lane `lane` takes the 16-byte pieces lane, lane + 32, ... when the row
// starts on 16 bytes, else the elements lane, lane + 32, ...).
template <typename E, int MB>
__device__ inline void row_partial(const RowParams& p, const E* row, int64_t n, const float* const (&xrow)[MB],
                                   const Int8Input& xq, int lane, float (&acc)[MB]) {
  constexpr bool kInt8 = std::is_same_v<E, int8_t>;
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
#pragma unroll
        for (int m = 0; m < MB; ++m) acc[m] = piece_product<E>(piece[b], i, xrow[m], xq, m < p.m_rows ? m : p.m_rows - 1, acc[m]);
      }
    }
    k_done = pieces * kPer;
  }
  for (int64_t k = k_done + lane; k < K; k += 32) {
    for (int m = 0; m < MB; ++m) {
      if constexpr (kInt8) {
        const int mm = m < p.m_rows ? m : p.m_rows - 1;
        const float prod = static_cast<float>(int32_t{row[k]} * int32_t{xq.row(mm)[k]});  // exact
        acc[m] = fmaf(xq.block_scale(mm, static_cast<uint32_t>(k)), prod, acc[m]);
      } else {
        acc[m] = fmaf(element_at<E>(row, k), __ldg(xrow[m] + k), acc[m]);
      }
    }
  }
}

// E: int8_t (scaled by parts[1][n]) or uint16_t (bf16, unscaled). A warp
// takes rows n0 .. n0 + p.rows_per_warp - 1. When every row starts on 16
// bytes (K * sizeof(E) a multiple of 16; then 4 rows a warp), a lane loads the
// pieces of its warp's rows at one place of K together, and each piece of x
// it reads serves all of them (x's loads were 4 a piece of 16 weights with a
// row a warp); a row's sums keep the order of row_partial, so the bits do not
// depend on how many rows a warp takes. Otherwise a warp takes one row.
// int8 x (or its gated input, DeviceGemvJob::x_up) is quantized once a call
// (p.xq), one row then copied into the block's shared memory (`stage`), or
// staged there by the whole block (X_ONCE: int8_input.cuh says when); when every row
// starts on 16 bytes, the first round of the rows' loads is issued before,
// so it is in flight meanwhile. This is the work of block `block` (its kWarps
// * rows_per_warp rows) of `job`, in a launch of kThreads threads a
// block (lane: threadIdx.x % 32, warp: threadIdx.x / 32).
// X_ONCE, xq_area: as stream_gemv_block's (gemv_stream.cuh), for int8_row.
template <typename E, bool kScaled, int MB, bool X_ONCE = false>
__device__ __forceinline__ void rowmajor_gemv_block(const RowParams& p, const DeviceGemvJob& job, uint32_t block,
                                                    unsigned char* stage, const unsigned char* xq_area = nullptr) {
  constexpr int kR = kRowsPerWarp;
  constexpr int kPer = 16 / sizeof(E);   // elements per 16-byte piece
  constexpr int kRowBatch = kBatch / kR;  // pieces of a row a lane loads before using any
  const int64_t N = p.rows, K = p.cols;
  const int lane = static_cast<int>(threadIdx.x & 31u);
  const int64_t n0 = (static_cast<int64_t>(block) * kWarps + (threadIdx.x >> 5)) * p.rows_per_warp;
  const float* x = job.x;
  const int here = n0 >= N ? 0 : static_cast<int>(N - n0 < p.rows_per_warp ? N - n0 : p.rows_per_warp);
  const E* rows = static_cast<const E*>(job.parts[0]) + (n0 < N ? n0 : 0) * K;
  const bool aligned = (K * static_cast<int64_t>(sizeof(E))) % 16 == 0;  // then rows_per_warp == kR
  const int64_t pieces = K / kPer;
  const uint4* src = reinterpret_cast<const uint4*>(rows);
  const int batch = p.batch < kR ? 1 : p.batch / kR;
  // The pieces of the warp's rows from i0 on (batch of each), in flight together.
  uint4 piece[kR][kRowBatch];
  auto load = [&](int64_t i0) {
#pragma unroll
    for (int r = 0; r < kR; ++r)
#pragma unroll
      for (int b = 0; b < kRowBatch; ++b)
        if (r < here && b < batch && i0 + 32 * b < pieces) piece[r][b] = __ldg(src + r * pieces + i0 + 32 * b);
  };
  // The first round's loads are in flight while the block stages x, as the
  // stream body's.
  if (aligned) load(lane);
  if constexpr (X_ONCE) wait_for_previous_grid();
  Int8Input xq;
  if constexpr (std::is_same_v<E, int8_t>)
    xq = block_int8_x<XLayout::kNatural, MB, X_ONCE>(xq_area, job, stage, p.m_rows, static_cast<uint32_t>(K));
  if (n0 >= N) return;
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
  if (!aligned) {  // rows not all aligned: one at a time
    for (int r = 0; r < here; ++r) {
      float a[MB];
      for (int m = 0; m < MB; ++m) a[m] = 0.0f;
      row_partial<E, MB>(p, rows + r * K, n0 + r, xrow, xq, lane, a);
      store(r, a);
    }
    return;
  }
  float acc[kR][MB];
  for (int r = 0; r < kR; ++r)
    for (int m = 0; m < MB; ++m) acc[r][m] = 0.0f;
  for (int64_t i0 = lane; i0 < pieces; i0 += 32 * batch) {
    if (i0 != lane) load(i0);
#pragma unroll
    for (int b = 0; b < kRowBatch; ++b) {
      const int64_t i = i0 + 32 * b;
      if (b >= batch || i >= pieces) break;
#pragma unroll
      for (int m = 0; m < MB; ++m) {
        const int mm = m < p.m_rows ? m : p.m_rows - 1;
        if constexpr (std::is_same_v<E, int8_t>) {
          // The piece's x and its block's scale, once for the 4 rows.
          const uint4 xv = *reinterpret_cast<const uint4*>(xq.row(mm) + 16 * i);
          const float xs = xq.block_scale(mm, static_cast<uint32_t>(16 * i));
#pragma unroll
          for (int r = 0; r < kR; ++r) {
            if (r >= here) break;
            acc[r][m] = fmaf(xs, static_cast<float>(dot16(piece[r][b], xv)), acc[r][m]);
          }
        } else {
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
    }
  }
#pragma unroll
  for (int r = 0; r < kR; ++r) {
    if (r >= here) break;
    store(r, acc[r]);
  }
}

}  // namespace eq::quant::cuda::rowmajor
