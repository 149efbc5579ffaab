// The GPU decode product of the column bit-stream formats (fp4_gG, mxfp4,
// nvfp4, nl4_gG, affine intB_gG; docs/formats.md, "Column bit stream"), read
// as stored: qweight U32 [K*bits/32, N], scales [K/G, N] (F16, E8M0 or E4M3
// times the F32 tensor_scale), biases F16 [K/G, N].
//
// A thread owns 4 adjacent output columns and a slice of K: it reads the 4
// columns' words of a word row as one 16-byte load (a quarter warp or half warp
// reads 128 or 256 contiguous bytes), so the layout needs no repack. A block is
// 4 * Q columns x S slices of K (Q column quads, S = 256 / Q: 32 columns x 32
// slices, or 64 x 16 when K has few chunks); slice s takes chunks s, s + S, ...
// of CHUNK k each and loads the words of up to kBatch of them before using any.
// The slices' sums meet through shuffles within a warp, then in shared memory
// across warps, in a fixed order. Per chunk and column:
//   dot[m] = sum_k int(code_k) * x[m, k]        (int: the code's integer, below)
//   acc[m] = fma(scale * unit, dot[m], acc[m]);  affine: acc[m] = fma(bias, sum_k x[m, k], acc[m])
// A code becomes a float in registers, without a table in memory: every
// stream code family states its values as integers, value(c) =
// (int8_bytes[c] - int8_offset) * int8_scale (packed_stream.h; affine codes:
// the code itself). The bytes of four 4-bit table codes come from a 16-byte
// table held in four registers (three byte permutes); two bytes become a half2
// (1024 + b) by a permute, minus 1024 + offset (exact: |b - offset| < 256),
// then two floats. Integer codes: a byte b becomes float(b - offset) as the
// float with bits 0x4B0000bb minus 2^23 + offset (a permute and a subtraction).
// Everything the kernel knows of the format comes from the row: bits, group,
// and its StreamEncoding (code integers, scale kind, biases, tensor scale).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdlib>
#include <string>

#include "core/error.h"
#include "quant/cuda/gemv_common.cuh"
#include "quant/cuda/stream_scale.cuh"
#include "quant/packed_stream.h"

namespace eq::quant::cuda {

namespace {

constexpr int kThreads = 256;  // threads per block: column quads x slices of K

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

// BITS-bit codes, CHUNK k (CHUNK * BITS / 32 words a column) at a time; MB
// accumulators (rows of x); HAS_BIASES: affine (value + bias); TABLE: 4-bit
// codes through the table; VEC: N % 4 == 0, the 4 columns' words in one load.
template <int BITS, int CHUNK, int MB, bool HAS_BIASES, bool TABLE, bool VEC>
__global__ void __launch_bounds__(kThreads, MB == 1 ? (CHUNK * BITS / 32 >= 8 ? 3 : 4) : 1)
    stream_gemv_kernel(const __grid_constant__ StreamParams p, const __grid_constant__ LaunchJobs jobs) {
  constexpr int kWords = CHUNK * BITS / 32;
  constexpr int kBatch = kWords >= 3 ? 1 : 2;  // chunks whose loads are in flight together (64 bytes and more, or 2 of 32)
  __shared__ float partial[kThreads / 32][MB][64];

  const DeviceGemvJob& job = jobs.job[blockIdx.y];
  // 32-bit offsets: run_stream checks that the parts hold fewer than 2^31 elements.
  const uint32_t N = static_cast<uint32_t>(p.rows), K = static_cast<uint32_t>(p.cols);
  const int quads = 1 << p.quads_log2;
  const int tid = threadIdx.x, q = tid & (quads - 1), s = tid >> p.quads_log2, slices = kThreads >> p.quads_log2;
  const uint32_t n0 = (blockIdx.x * quads + q) * 4;
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
  extern __shared__ float stage[];  // a gated input [m_rows][K]
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
    const uint32_t n = blockIdx.x * cols + col;
    if (m < p.m_rows && n < N) {
      float sum = partial[0][m][col];
      for (int w = 1; w < kThreads / 32; ++w) sum += partial[w][m][col];
      job.y[m * N + n] = sum;
    }
  }
}

template <int BITS, int CHUNK, bool HAS_BIASES, bool TABLE>
void launch_bits(const StreamParams& p, const LaunchJobs& jobs, int n_jobs, cudaStream_t stream) {
  const int64_t cols = 4LL << p.quads_log2;
  const dim3 grid(static_cast<unsigned>((p.rows + cols - 1) / cols), static_cast<unsigned>(n_jobs));
  const bool vec = p.rows % 4 == 0;
  const size_t smem = p.gated ? static_cast<size_t>(p.m_rows * p.cols) * sizeof(float) : 0;
#define EQ_STREAM_LAUNCH(MB)                                                                          \
  (vec ? stream_gemv_kernel<BITS, CHUNK, MB, HAS_BIASES, TABLE, true><<<grid, kThreads, smem, stream>>>(p, jobs) \
       : stream_gemv_kernel<BITS, CHUNK, MB, HAS_BIASES, TABLE, false><<<grid, kThreads, smem, stream>>>(p, jobs))
  switch (rows_bucket(p.m_rows)) {
    case 1: EQ_STREAM_LAUNCH(1); break;
    case 2: EQ_STREAM_LAUNCH(2); break;
    case 4: EQ_STREAM_LAUNCH(4); break;
    default: EQ_STREAM_LAUNCH(8); break;
  }
#undef EQ_STREAM_LAUNCH
}

void run_stream(const FormatTraits& format, int64_t rows, int64_t cols, const DeviceGemvJob* jobs, int n_jobs,
                int m_rows, void*, void* stream) {
  check_call(format, m_rows, "GPU decode");
  const StreamLayout l = stream_layout_of(format);
  StreamParams p;
  p.rows = rows;
  p.cols = cols;
  p.m_rows = m_rows;
  p.group = l.group;
  p.scale_kind = static_cast<int>(l.scale_kind);
  p.has_tensor_scale = l.has_tensor_scale;
  // The codes' integers: a table of bytes (4-bit table codes) or the code itself.
  const bool table = l.codes->int8_bytes != nullptr;
  if (table) {
    EQ_CHECK(l.bits == 4, "GPU decode: " + std::string(format.name) + ": a code table of " + std::to_string(l.bits) +
                              "-bit codes");
    for (int c = 0; c < 16; ++c) p.table[c / 4] |= uint32_t{l.codes->int8_bytes[c]} << (8 * (c % 4));
  }
  p.offset = 8388608.0f + static_cast<float>(l.codes->int8_offset);
  p.unit = l.codes->int8_scale;
  // Chunks of 32 k (a whole number of words for every width), 16 for groups of 16 (4-bit only).
  const bool chunk16 = l.group % 32 != 0;
  EQ_CHECK(l.group % 16 == 0 && (!chunk16 || l.bits == 4) && cols % l.group == 0,
           "GPU decode: " + std::string(format.name) + ": " + std::to_string(l.bits) + "-bit codes in groups of " +
               std::to_string(l.group) + " over " + std::to_string(cols) + " columns");
  EQ_CHECK(rows * (cols / 32 * l.bits + cols / l.group) < (int64_t{1} << 31) &&
               (rows + cols) * kMaxDeviceGemvRows < (int64_t{1} << 31),
           "GPU decode: " + std::string(format.name) + " [" + std::to_string(rows) + ", " + std::to_string(cols) +
               "] is too large for 32-bit offsets");
  // 32 slices of K a block when K has enough chunks for them, else 16 (and 64 columns).
  const int64_t chunks = cols / (chunk16 ? 16 : 32);
  p.quads_log2 = chunks >= 48 ? 3 : 4;
  // EXPERTQUANT_GPU_STREAM_COLUMNS=32 or 64 forces the block's columns (for measurement).
  static const int forced = [] {
    const char* v = std::getenv("EXPERTQUANT_GPU_STREAM_COLUMNS");
    return v == nullptr ? 0 : std::atoi(v);
  }();
  if (forced == 32 || forced == 64) p.quads_log2 = forced == 32 ? 3 : 4;
  p.batch = load_batch((chunk16 ? 16 : 32) * l.bits / 32 >= 3 ? 1 : 2);  // the kernels' kBatch
  p.gated = gated_call(format, jobs, n_jobs, m_rows, cols);
  const cudaStream_t s = stream_of(stream);
  for_each_launch(jobs, n_jobs, [&](const LaunchJobs& batch, int n) {
    // Affine rows (biases, integer codes) come in 2, 3, 4 and 8 bits, the
    // table-code rows (fp4 family, nl4) in 4 bits, in groups of 16 or more.
    const int kind = (l.has_biases ? 100 : 0) + (table ? 1000 : 0) + l.bits * (chunk16 ? -1 : 1);
    switch (kind) {
      case 102: launch_bits<2, 32, true, false>(p, batch, n, s); break;
      case 103: launch_bits<3, 32, true, false>(p, batch, n, s); break;
      case 104: launch_bits<4, 32, true, false>(p, batch, n, s); break;
      case 108: launch_bits<8, 32, true, false>(p, batch, n, s); break;
      case 1004: launch_bits<4, 32, false, true>(p, batch, n, s); break;
      case 996: launch_bits<4, 16, false, true>(p, batch, n, s); break;
      default:
        fail(ErrorKind::kInternal, "GPU decode: no kernel for " + std::to_string(l.bits) + "-bit stream codes" +
                                       (l.has_biases ? " with biases" : "") + (table ? " through a table" : "") +
                                       (chunk16 ? " in groups of 16" : ""));
    }
    check_launch("stream decode kernel");
  });
}

}  // namespace

const DeviceGemv kStreamDeviceGemv{run_stream, nullptr, true};

}  // namespace eq::quant::cuda
