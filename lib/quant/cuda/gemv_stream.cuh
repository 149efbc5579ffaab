// The body of the GPU decode product of the column bit-stream formats (the
// method: gemv_stream.cu), as a block's work, so that a launch of several
// formats (gemv_mixed.cu) runs the same code as the format's own launch and
// gives the same bits.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "quant/cuda/gemv_common.cuh"
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
  bool gated = false;  // the jobs' inputs are gated (x_up), staged in shared memory
  uint32_t table[4] = {};  // 4-bit table codes: byte c = code c's integer byte (int8_bytes[c])
  float offset = 0.0f;     // 2^23 + int8_offset
  float unit = 1.0f;       // int8_scale
};

__device__ inline float decode_scale(const StreamParams& p, uint32_t raw, float tensor_scale) {
  return stream_scale_value(p.scale_kind, raw, tensor_scale);
}

// Byte i of b as the float 2^23 + b_i (exact).
__device__ inline float magic(uint32_t b, int i) { return __uint_as_float(__byte_perm(b, 0x4B000000u, 0x7650 + i)); }

// The integer bytes of 4 codes (the low 16 bits of w, code 0 lowest) through
// the 16-byte table t[0..3]: the low three bits of a code pick one of 8 bytes
// in each half of the table, its high bit picks the half (a third permute).
__device__ inline uint32_t table_bytes(const uint32_t (&t)[4], uint32_t w) {
  const uint32_t sel = w & 0x7777u;
  const uint32_t pick = ((w >> 1) & 0x4444u) | 0x3210u;  // byte j of lo, or of hi when bit 3 of code j is set
  return __byte_perm(__byte_perm(t[0], t[1], sel), __byte_perm(t[2], t[3], sel), pick);
}

// Bytes 2i and 2i+1 of b as the half2 (1024 + byte, 1024 + byte), exactly.
__device__ inline __half2 half_pair(uint32_t b, int i) {
  const uint32_t h = __byte_perm(b, 0x64646464u, 0x4140 + 0x202 * i);
  return *reinterpret_cast<const __half2*>(&h);
}

// Codes kGranule * g .. of one column (its chunk's words w) as floats of
// their integers: 8 codes a granule for 4 bits, else 4.
template <int BITS>
inline constexpr int kGranule = BITS == 4 ? 8 : 4;

template <int BITS, bool TABLE>
__device__ inline void decode_granule(const uint32_t* w, int g, float* v, const uint32_t (&t)[4], float offset) {
  if constexpr (BITS == 4) {
    if constexpr (TABLE) {
      const uint32_t b0 = table_bytes(t, w[g]), b1 = table_bytes(t, w[g] >> 16);  // codes 8g .. 8g+3, 8g+4 ..
      const __half2 off2 = __float2half2_rn(1024.0f + (offset - 8388608.0f));
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const __half2 d0 = __hsub2(half_pair(b0, i), off2), d1 = __hsub2(half_pair(b1, i), off2);
        v[2 * i] = __low2float(d0), v[2 * i + 1] = __high2float(d0);
        v[4 + 2 * i] = __low2float(d1), v[4 + 2 * i + 1] = __high2float(d1);
      }
    } else {
      const uint32_t even = w[g] & 0x0f0f0f0fu, odd = (w[g] >> 4) & 0x0f0f0f0fu;  // codes 8g, 8g+2, ..; 8g+1, ..
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        v[2 * i] = magic(even, i) - offset;
        v[2 * i + 1] = magic(odd, i) - offset;
      }
    }
  } else if constexpr (BITS == 8) {
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = magic(w[g], i) - offset;
  } else {
    constexpr uint32_t kMask = (1u << BITS) - 1u;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int bit = (4 * g + e) * BITS, word = bit >> 5, shift = bit & 31;
      uint32_t c = w[word] >> shift;
      if (shift + BITS > 32) c = __funnelshift_r(w[word], w[word + 1], shift);
      v[e] = __uint_as_float((c & kMask) | 0x4B000000u) - offset;
    }
  }
}

// Shared floats a block's warps meet in.
template <int MB>
inline constexpr int kPartialFloats = kThreads / 32 * MB * 64;

// Block `block` of `job`'s columns (4 * quads of them), every thread of the
// block calling: BITS-bit codes, CHUNK k (CHUNK * BITS / 32 words a column)
// at a time; MB accumulators (rows of x); HAS_BIASES: affine (value + bias);
// TABLE: 4-bit codes through the table; VEC: N % 4 == 0, the 4 columns' words
// in one load. `stage`: the block's dynamic shared memory, for a gated input;
// `partial_sums`: kPartialFloats<MB> floats of shared memory.
template <int BITS, int CHUNK, int MB, bool HAS_BIASES, bool TABLE, bool VEC>
__device__ __forceinline__ void stream_gemv_block(const StreamParams& p, const DeviceGemvJob& job, uint32_t block,
                                                  float* stage, float* partial_sums) {
  constexpr int kWords = CHUNK * BITS / 32;
  constexpr int kBatch = kWords >= 3 ? 1 : 2;  // chunks whose loads are in flight together (64 bytes and more, or 2 of 32)
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
  const float offset = p.offset;

  float acc[4][MB];
  for (int j = 0; j < 4; ++j)
    for (int m = 0; m < MB; ++m) acc[j][m] = 0.0f;
  const int chunks = static_cast<int>(K / CHUNK);
  uint32_t w[kBatch][kWords][4];  // [chunk][word][column]
  uint32_t sraw[kBatch][2], braw[kBatch][2];  // the 4 columns' scales (F16 pairs, or 4 bytes) and biases
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
  // The first chunks' loads are in flight while the block stages a gated input.
  const bool live = n0 < N;
  if (live) load(s);
  const float* x = block_input(job, stage, p.m_rows, K);
  const float* xrow[MB];
  for (int m = 0; m < MB; ++m) xrow[m] = x + (m < p.m_rows ? m : p.m_rows - 1) * K;
  if (live) {
    for (int c0 = s; c0 < chunks; c0 += slices * p.batch) {
      if (c0 != s) load(c0);
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        const int c = c0 + i * slices;
        if (i >= p.batch || c >= chunks) break;
        const int k0 = c * CHUNK;
        constexpr int kG = kGranule<BITS>;
        float dot[4][MB], xs[MB];
        for (int j = 0; j < 4; ++j)
          for (int m = 0; m < MB; ++m) dot[j][m] = 0.0f;
        for (int m = 0; m < MB; ++m) xs[m] = 0.0f;
#pragma unroll
        for (int g = 0; g < CHUNK / kG; ++g) {
          float xv[MB][kG];
#pragma unroll
          for (int m = 0; m < MB; ++m)
#pragma unroll
            for (int e = 0; e < kG; e += 4) {
              const float4 x4 = *reinterpret_cast<const float4*>(xrow[m] + k0 + kG * g + e);  // global or shared
              xv[m][e] = x4.x, xv[m][e + 1] = x4.y, xv[m][e + 2] = x4.z, xv[m][e + 3] = x4.w;
              if constexpr (HAS_BIASES) xs[m] += (x4.x + x4.y) + (x4.z + x4.w);
            }
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            uint32_t cw[kWords];
#pragma unroll
            for (int r = 0; r < kWords; ++r) cw[r] = w[i][r][j];
            float v[kG];
            decode_granule<BITS, TABLE>(cw, g, v, t, offset);
#pragma unroll
            for (int m = 0; m < MB; ++m)
#pragma unroll
              for (int e = 0; e < kG; ++e) dot[j][m] = fmaf(v[e], xv[m][e], dot[j][m]);
          }
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const uint32_t raw = scale_bytes == 2 ? (sraw[i][j >> 1] >> (16 * (j & 1))) & 0xffffu
                                                : (sraw[i][0] >> (8 * j)) & 0xffu;
          const float scale = decode_scale(p, raw, tensor_scale) * p.unit;
          for (int m = 0; m < MB; ++m) {
            acc[j][m] = fmaf(scale, dot[j][m], acc[j][m]);
            if constexpr (HAS_BIASES)
              acc[j][m] = fmaf(__half2float(__ushort_as_half(static_cast<unsigned short>(braw[i][j >> 1] >> (16 * (j & 1))))),
                               xs[m], acc[j][m]);
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
#pragma nv_exec_check_disable
template <typename F>
__host__ __device__ inline void with_body(Body body, F&& f) {
  switch (body) {
    case Body::kAffine2: f.template operator()<2, 32, true, false>(); break;
    case Body::kAffine3: f.template operator()<3, 32, true, false>(); break;
    case Body::kAffine4: f.template operator()<4, 32, true, false>(); break;
    case Body::kAffine8: f.template operator()<8, 32, true, false>(); break;
    case Body::kTable4: f.template operator()<4, 32, false, true>(); break;
    case Body::kTable4Chunk16: f.template operator()<4, 16, false, true>(); break;
  }
}

// A call's parameters and body for `format` [rows, cols] with m_rows rows of
// x; `gated`: the jobs carry a gated input. Throws eq::Error for a layout
// without a body or a shape too large for 32-bit offsets.
StreamParams params_of(const FormatTraits& format, int64_t rows, int64_t cols, int m_rows, bool gated, Body& body);

// Columns one block covers.
inline int64_t block_columns(const StreamParams& p) { return 4LL << p.quads_log2; }

}  // namespace eq::quant::cuda::stream
