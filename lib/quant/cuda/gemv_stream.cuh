// The body of the GPU decode product of the column bit-stream formats (the
// method: gemv_stream.cu), as a block's work, so that a launch of several
// formats (gemv_mixed.cu) runs the same code as the format's own launch and
// gives the same bits.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "quant/cuda/gemv_common.cuh"
#include "quant/cuda/int8_input.cuh"
#include "quant/cuda/stream_scale.cuh"
#include "quant/packed_stream.h"

namespace eq::quant::cuda::stream {

inline constexpr int kThreads = 256;  // threads per block: column quads x slices of K

struct StreamParams {
  int64_t rows = 0, cols = 0;
  int m_rows = 1;
  int group = 32;
  int scale_kind = 0;  // ScaleKind
  bool has_tensor_scale = false;
  int quads_log2 = 3;  // column quads per block: 8 or 16
  int batch = 1;       // chunks loaded before use, <= the kernel's kBatch
  bool gated = false;  // the jobs' inputs are gated (x_up): formed where x is staged or quantized
  uint32_t table[4] = {};  // 4-bit table codes: |value| of codes 0-7 (bytes of [0..1]), of 8-15 ([2..3])
  int sign_lo = 1, sign_hi = 1;  // the sign of the values of codes 0-7, of 8-15
  float offset = 0.0f;     // 2^23 + int8_offset (the 3-bit body's float codes)
  int int_offset = 0;      // int8_offset (the int8 bodies but the table's)
  const unsigned char* xq = nullptr;  // host-known jobs' int8 x quantized once (quantize_jobs), or null
  size_t xq_stride = 0;               // bytes a job there
  float unit = 1.0f;       // int8_scale
};

__device__ inline float decode_scale(const StreamParams& p, uint32_t raw, float tensor_scale) {
  return stream_scale_value(p.scale_kind, raw, tensor_scale);
}

// 4-bit table codes (fp4 E2M1, nl4): the table's two halves, codes 0-7 and
// 8-15, each hold values of one sign (params_of checks it), so a code's
// integer is sign_lo * lo[c] or sign_hi * hi[c - 8] with bytes |v| <= 127 in
// two 8-byte tables (t[0..1], t[2..3]). A byte permute whose selector is the
// code itself picks lo[c] for c < 8 and, for c >= 8 (the selector's sign bit
// set), replicates the picked byte's sign bit: 0. The permute of the codes
// with bit 3 flipped picks hi[c - 8] likewise. The signs ride on the staged x
// (XLayout::kSplitTable). Four permutes, a flip and two shifts a word of 8
// codes, where one table of 16 took six permutes and six masks and shifts.
__device__ inline uint32_t prmt(uint32_t a, uint32_t b, uint32_t selector) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(selector));
  return d;
}

// c + the sum of the 4 products of a's unsigned bytes and b's signed bytes.
__device__ inline int32_t dot_u8_s8(uint32_t a, uint32_t b, int32_t c) {
  int32_t d;
  asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// Whether a body multiplies int8 x: every width but 3 bits, the same split as
// the CPU's decode kernels (gemv.h: kStreamGemvInt8, kStreamGemvFloat).
__host__ __device__ constexpr bool int8_body(int bits) { return bits != 3; }

// The staged order of x a body reads (int8_input.cuh).
template <int BITS, bool TABLE>
inline constexpr XLayout kXLayout = TABLE ? XLayout::kSplitTable
                                  : BITS == 4 ? XLayout::kNib
                                  : BITS == 2 ? XLayout::kCrumb
                                              : XLayout::kNatural;

// x words a code word meets: 4 (4-bit table: two halves x 2), 2 (4-bit affine), 1 (8-bit), 4 (2-bit).
template <int BITS, bool TABLE>
inline constexpr int kXWords = TABLE ? 4 : 8 / BITS;

// The code bytes of one code word w, in the order of its x words.
template <int BITS, bool TABLE>
__device__ inline void code_bytes(uint32_t w, uint32_t (&b)[kXWords<BITS, TABLE>], const uint32_t (&t)[4]) {
  if constexpr (TABLE) {
    const uint32_t flipped = w ^ 0x88888888u;
    b[0] = prmt(t[0], t[1], w), b[1] = prmt(t[2], t[3], flipped);
    b[2] = prmt(t[0], t[1], w >> 16), b[3] = prmt(t[2], t[3], flipped >> 16);
  } else if constexpr (BITS == 4) {
    b[0] = w & 0x0f0f0f0fu, b[1] = (w >> 4) & 0x0f0f0f0fu;
  } else if constexpr (BITS == 8) {
    b[0] = w;
  } else {
#pragma unroll
    for (int s = 0; s < 4; ++s) b[s] = (w >> (2 * s)) & 0x03030303u;
  }
}

// The 3-bit codes e = 4g .. 4g+3 of one column (its chunk's words w) as floats
// of their integers: the float with bits 0x4B000000 | c is 2^23 + c, exactly.
__device__ inline void decode_3bit(const uint32_t* w, int g, float* v, float offset) {
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int bit = (4 * g + e) * 3, word = bit >> 5, shift = bit & 31;
    uint32_t c = w[word] >> shift;
    if (shift + 3 > 32) c = __funnelshift_r(w[word], w[word + 1], shift);
    v[e] = __uint_as_float((c & 7u) | 0x4B000000u) - offset;
  }
}

// Shared floats a block's warps meet in.
template <int MB>
inline constexpr int kPartialFloats = kThreads / 32 * MB * 64;

// Block `block` of `job`'s columns (4 * quads of them), every thread of the
// block calling: BITS-bit codes, CHUNK k (CHUNK * BITS / 32 words a column)
// at a time; MB accumulators (rows of x); HAS_BIASES: affine (value + bias);
// TABLE: 4-bit codes through the table; VEC: N % 4 == 0, the 4 columns' words
// in one load.
// `stage`: the block's dynamic shared memory (stage_bytes), for the int8 x or
// a gated float input; `partial_sums`: kPartialFloats<MB> floats of shared
// memory. X_ONCE: x was quantized once a call (the int8 bodies; the job's
// at `xq_area`), one row copied into `stage`, more read where they lie, and
// the caller has not waited for the previous grid (the quantization): the
// block does so (wait_for_previous_grid) once its first loads of weights,
// which no grid writes, are issued. Else the block stages its one row of x
// itself, after the caller's wait. A compile-time choice, so that the kernels that stage
// x keep their code (a run-time one cost the 30B layer's one-wave launches
// 4%, docs/benchmarks.md, "GPU decode").
template <int BITS, int CHUNK, int MB, bool HAS_BIASES, bool TABLE, bool VEC, bool X_ONCE = false>
__device__ __forceinline__ void stream_gemv_block(const StreamParams& p, const DeviceGemvJob& job, uint32_t block,
                                                  unsigned char* stage, float* partial_sums,
                                                  const unsigned char* xq_area = nullptr) {
  constexpr int kWords = CHUNK * BITS / 32;
  constexpr int kBatch = kWords >= 3 ? 1 : 2;  // chunks whose loads are in flight together (64 bytes and more, or 2 of 32)
  constexpr bool kInt8 = int8_body(BITS);
  auto partial = reinterpret_cast<float(*)[MB][64]>(partial_sums);  // [kThreads / 32][MB][64]

  // 32-bit offsets: run_stream checks that the parts hold fewer than 2^31 elements.
  const uint32_t N = static_cast<uint32_t>(p.rows), K = static_cast<uint32_t>(p.cols);
  const int quads = 1 << p.quads_log2;
  const int tid = threadIdx.x, q = tid & (quads - 1), s = tid >> p.quads_log2, slices = kThreads >> p.quads_log2;
  const uint32_t n0 = (block * quads + q) * 4;
  const uint32_t* qweight = static_cast<const uint32_t*>(job.parts[0]);
  const void* scales = job.parts[1];
  const uint16_t* biases = HAS_BIASES ? static_cast<const uint16_t*>(job.parts[2]) : nullptr;
  const float tensor_scale = p.has_tensor_scale ? *static_cast<const float*>(job.parts[2]) : 1.0f;
  const int scale_bytes = p.scale_kind == static_cast<int>(ScaleKind::kF16) ? 2 : 1;
  uint32_t t[4];
  for (int i = 0; i < 4; ++i) t[i] = p.table[i];

  float acc[4][MB];
  for (int j = 0; j < 4; ++j)
    for (int m = 0; m < MB; ++m) acc[j][m] = 0.0f;
  const int chunks = static_cast<int>(K / CHUNK);
  uint32_t w[kBatch][kWords][4];  // [chunk][word][column]
  uint32_t sraw[kBatch][2], braw[kBatch][2] = {};  // the 4 columns' scales (F16 pairs, or 4 bytes) and biases
  // Loads the words, scales and biases of chunks c0, c0 + slices, ... (p.batch of them).
  auto load = [&](int c0) {
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int c = c0 + i * slices;
      if (i < p.batch && c < chunks) {
        const uint32_t row0 = static_cast<uint32_t>(c) * kWords, g = static_cast<uint32_t>(c) * CHUNK / p.group;
#pragma unroll
        for (int r = 0; r < kWords; ++r) {
          const uint32_t* src = qweight + ((row0 + r) * N + n0);
          if constexpr (VEC) {
            const uint4 v4 = __ldg(reinterpret_cast<const uint4*>(src));
            w[i][r][0] = v4.x, w[i][r][1] = v4.y, w[i][r][2] = v4.z, w[i][r][3] = v4.w;
          } else {
            for (int j = 0; j < 4; ++j) w[i][r][j] = n0 + j < N ? __ldg(src + j) : 0u;
          }
        }
        const uint32_t at = g * N + n0;
        if (scale_bytes == 2) {
          const uint16_t* sp = static_cast<const uint16_t*>(scales) + at;
          if constexpr (VEC) {
            const uint2 v2 = __ldg(reinterpret_cast<const uint2*>(sp));
            sraw[i][0] = v2.x, sraw[i][1] = v2.y;
          } else {
            sraw[i][0] = sraw[i][1] = 0;
            for (int j = 0; j < 4; ++j)
              if (n0 + j < N) sraw[i][j >> 1] |= uint32_t{__ldg(sp + j)} << (16 * (j & 1));
          }
        } else {
          const uint8_t* sp = static_cast<const uint8_t*>(scales) + at;
          if constexpr (VEC) {
            sraw[i][0] = __ldg(reinterpret_cast<const uint32_t*>(sp));
          } else {
            sraw[i][0] = 0;
            for (int j = 0; j < 4; ++j)
              if (n0 + j < N) sraw[i][0] |= uint32_t{__ldg(sp + j)} << (8 * j);
          }
        }
        if constexpr (HAS_BIASES) {
          const uint16_t* bp = biases + at;
          if constexpr (VEC) {
            const uint2 v2 = __ldg(reinterpret_cast<const uint2*>(bp));
            braw[i][0] = v2.x, braw[i][1] = v2.y;
          } else {
            braw[i][0] = braw[i][1] = 0;
            for (int j = 0; j < 4; ++j)
              if (n0 + j < N) braw[i][j >> 1] |= uint32_t{__ldg(bp + j)} << (16 * (j & 1));
          }
        }
      }
    }
  };
  auto column_scale = [&](int i, int j) {
    const uint32_t raw = scale_bytes == 2 ? (sraw[i][j >> 1] >> (16 * (j & 1))) & 0xffffu : (sraw[i][0] >> (8 * j)) & 0xffu;
    return decode_scale(p, raw, tensor_scale) * p.unit;
  };
  auto column_bias = [&](int i, int j) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(braw[i][j >> 1] >> (16 * (j & 1)))));
  };
  // The first chunks' loads are in flight while the block stages its input.
  const bool live = n0 < N;
  if (live) load(s);
  if constexpr (X_ONCE) wait_for_previous_grid();
  Int8Input xq{};
  const float* xrow[MB] = {};
  if constexpr (kInt8) {
    xq = block_int8_x<kXLayout<BITS, TABLE>, MB, X_ONCE>(xq_area, job, stage, p.m_rows, K, p.sign_lo, p.sign_hi);
  } else {
    const float* x = block_input(job, reinterpret_cast<float*>(stage), p.m_rows, K);
    for (int m = 0; m < MB; ++m) xrow[m] = x + (m < p.m_rows ? m : p.m_rows - 1) * K;
  }
  if (live) {
    for (int c0 = s; c0 < chunks; c0 += slices * p.batch) {
      if (c0 != s) load(c0);
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        const int c = c0 + i * slices;
        if (i >= p.batch || c >= chunks) break;
        const uint32_t k0 = static_cast<uint32_t>(c) * CHUNK;
        if constexpr (kInt8) {
          // Per column: d = sum_k byte(code_k) q_k exactly; the chunk's value
          // sum is (d - offset * sum q) * scale * unit * x scale, plus bias * x scale * sum q.
          constexpr int kXW = kXWords<BITS, TABLE>;
          int32_t d[4][MB];
          for (int j = 0; j < 4; ++j)
            for (int m = 0; m < MB; ++m) d[j][m] = 0;
#pragma unroll
          for (int r = 0; r < kWords; ++r) {
            uint32_t xw[MB][kXW];
#pragma unroll
            for (int m = 0; m < MB; ++m) {
              // The x bytes of word r: 32 / BITS codes, 2 bytes each for the split table.
              const int8_t* src = xq.row(m < p.m_rows ? m : p.m_rows - 1) + (k0 + r * 32 / BITS) * (TABLE ? 2 : 1);
              if constexpr (kXW == 4) {
                const uint4 v = *reinterpret_cast<const uint4*>(src);
                xw[m][0] = v.x, xw[m][1] = v.y, xw[m][2] = v.z, xw[m][3] = v.w;
              } else if constexpr (kXW == 2) {
                const uint2 v = *reinterpret_cast<const uint2*>(src);
                xw[m][0] = v.x, xw[m][1] = v.y;
              } else {
                xw[m][0] = *reinterpret_cast<const uint32_t*>(src);
              }
            }
#pragma unroll
            for (int j = 0; j < 4; ++j) {
              uint32_t b[kXW];
              code_bytes<BITS, TABLE>(w[i][r][j], b, t);
#pragma unroll
              for (int m = 0; m < MB; ++m)
#pragma unroll
                for (int e = 0; e < kXW; ++e) d[j][m] = dot_u8_s8(b[e], xw[m][e], d[j][m]);
            }
          }
          // The chunk's sum of q: for the offset of affine codes and for biases (the table's values need neither).
          float xs[MB];
          int32_t qs[MB];
#pragma unroll
          for (int m = 0; m < MB; ++m) {
            const int mm = m < p.m_rows ? m : p.m_rows - 1;
            xs[m] = xq.block_scale(mm, k0);
            qs[m] = 0;
            if constexpr (!TABLE) {
              const int32_t* s16 = xq.sums(mm, k0);
              qs[m] = CHUNK == 16 ? s16[0] : s16[0] + s16[1];
            }
          }
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const float scale = column_scale(i, j);
            float bias = 0.0f;
            if constexpr (HAS_BIASES) bias = column_bias(i, j);
            for (int m = 0; m < MB; ++m) {
              const int32_t v = TABLE ? d[j][m] : d[j][m] - p.int_offset * qs[m];
              acc[j][m] = fmaf(scale * xs[m], static_cast<float>(v), acc[j][m]);
              if constexpr (HAS_BIASES) acc[j][m] = fmaf(bias, xs[m] * static_cast<float>(qs[m]), acc[j][m]);
            }
          }
        } else {
          float dot[4][MB], xs[MB];
          for (int j = 0; j < 4; ++j)
            for (int m = 0; m < MB; ++m) dot[j][m] = 0.0f;
          for (int m = 0; m < MB; ++m) xs[m] = 0.0f;
#pragma unroll
          for (int g = 0; g < CHUNK / 4; ++g) {
            float xv[MB][4];
#pragma unroll
            for (int m = 0; m < MB; ++m) {
              const float4 x4 = *reinterpret_cast<const float4*>(xrow[m] + k0 + 4 * g);  // global or shared
              xv[m][0] = x4.x, xv[m][1] = x4.y, xv[m][2] = x4.z, xv[m][3] = x4.w;
              if constexpr (HAS_BIASES) xs[m] += (x4.x + x4.y) + (x4.z + x4.w);
            }
#pragma unroll
            for (int j = 0; j < 4; ++j) {
              uint32_t cw[kWords];
#pragma unroll
              for (int r = 0; r < kWords; ++r) cw[r] = w[i][r][j];
              float v[4];
              decode_3bit(cw, g, v, p.offset);
#pragma unroll
              for (int m = 0; m < MB; ++m)
#pragma unroll
                for (int e = 0; e < 4; ++e) dot[j][m] = fmaf(v[e], xv[m][e], dot[j][m]);
            }
          }
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const float scale = column_scale(i, j);
            for (int m = 0; m < MB; ++m) {
              acc[j][m] = fmaf(scale, dot[j][m], acc[j][m]);
              if constexpr (HAS_BIASES) acc[j][m] = fmaf(column_bias(i, j), xs[m], acc[j][m]);
            }
          }
        }
      }
    }
  }
  // The slices of a warp (lanes q, q + quads, ...), then the warps, in order.
  const int lane = tid & 31, warp = tid >> 5;
  for (int o = quads; o < 32; o <<= 1)
    for (int j = 0; j < 4; ++j)
      for (int m = 0; m < MB; ++m) acc[j][m] += __shfl_xor_sync(0xffffffffu, acc[j][m], o);
  if (lane < quads)
    for (int j = 0; j < 4; ++j)
      for (int m = 0; m < MB; ++m) partial[warp][m][4 * lane + j] = acc[j][m];
  __syncthreads();
  const int cols = 4 * quads;
  for (int o = tid; o < MB * cols; o += kThreads) {
    const int m = o / cols, col = o % cols;
    const uint32_t n = block * cols + col;
    if (m < p.m_rows && n < N) {
      float sum = partial[0][m][col];
      for (int w = 1; w < kThreads / 32; ++w) sum += partial[w][m][col];
      job.y[m * N + n] = sum;
    }
  }
}

// The body a format's row takes (params_of), from its layout.
enum class Body : int { kAffine2, kAffine3, kAffine4, kAffine8, kTable4, kTable4Chunk16 };

// Calls f.template operator()<BITS, CHUNK, HAS_BIASES, TABLE>() with the
// template arguments of `body`: the one place that maps a body to its
// kernel, for the format's own launch and the launch of several formats.
// kBodies: the bodies instantiated (bit b: Body b); one outside it does
// nothing, and the caller does not pass it.
inline constexpr uint32_t kAllBodies = 0x3f;
#pragma nv_exec_check_disable
template <uint32_t kBodies = kAllBodies, typename F>
__host__ __device__ inline void with_body(Body body, F&& f) {
  constexpr auto has = [](Body b) { return (kBodies >> static_cast<int>(b)) & 1u; };
  switch (body) {
    case Body::kAffine2: if constexpr (has(Body::kAffine2)) f.template operator()<2, 32, true, false>(); break;
    case Body::kAffine3: if constexpr (has(Body::kAffine3)) f.template operator()<3, 32, true, false>(); break;
    case Body::kAffine4: if constexpr (has(Body::kAffine4)) f.template operator()<4, 32, true, false>(); break;
    case Body::kAffine8: if constexpr (has(Body::kAffine8)) f.template operator()<8, 32, true, false>(); break;
    case Body::kTable4: if constexpr (has(Body::kTable4)) f.template operator()<4, 32, false, true>(); break;
    case Body::kTable4Chunk16:
      if constexpr (has(Body::kTable4Chunk16)) f.template operator()<4, 16, false, true>();
      break;
  }
}

// A call's parameters and body for `format` [rows, cols] with m_rows rows of
// x; `gated`: the jobs carry a gated input. Throws eq::Error for a layout
// without a body or a shape too large for 32-bit offsets.
StreamParams params_of(const FormatTraits& format, int64_t rows, int64_t cols, int m_rows, bool gated, Body& body);

// The staged order of x a body reads.
inline XLayout layout_of(Body body) {
  switch (body) {
    case Body::kAffine2: return XLayout::kCrumb;
    case Body::kAffine4: return XLayout::kNib;
    case Body::kTable4:
    case Body::kTable4Chunk16: return XLayout::kSplitTable;
    default: return XLayout::kNatural;
  }
}

// Bytes of dynamic shared memory a block of `body` takes: the int8 x of one
// row, staged by each block, or a gated float input of the 3-bit body.
inline size_t stage_bytes(Body body, const StreamParams& p) {
  if (body != Body::kAffine3) return p.m_rows == 1 ? int8_stage_bytes(layout_of(body), 1, p.cols) : 0;
  return p.gated ? static_cast<size_t>(p.m_rows * p.cols) * sizeof(float) : 0;
}

// Columns one block covers.
inline int64_t block_columns(const StreamParams& p) { return 4LL << p.quads_log2; }

}  // namespace eq::quant::cuda::stream
