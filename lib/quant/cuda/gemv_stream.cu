// The GPU decode product of the column bit-stream formats (fp4_gG, mxfp4,
// nvfp4, nl4_gG, affine intB_gG; docs/formats.md, "Column bit stream"), read
// as stored: qweight U32 [K*bits/32, N], scales [K/G, N] (F16, E8M0 or E4M3
// times the F32 tensor_scale), biases F16 [K/G, N].
//
// One thread per output column n and slice of K: a warp reads 32 adjacent
// words of a word row (128 bytes, coalesced), so the layout needs no repack.
// A block is 32 columns x kSlices slices of K (whole groups each); the slices'
// sums meet in shared memory and are added in slice order. Per chunk of k:
//   dot[m] = sum_k value(code_k) * x[m, k]          (value: the row's code table)
//   acc[m] = fma(scale, dot[m], acc[m]);  affine: acc[m] = fma(bias, sum_k x[m, k], acc[m])
// (the scale and bias are applied per chunk of 32 k, or 16 for groups of 16).
// Everything the kernel knows of the format comes from the row: bits, group,
// and its StreamEncoding (code values, scale kind, biases, tensor scale).
#include <cuda_runtime.h>

#include <string>

#include "core/error.h"
#include "quant/cuda/gemv_common.cuh"
#include "quant/packed_stream.h"

namespace eq::quant::cuda {

namespace {

constexpr int kCols = 32;    // output columns per block (one warp's width)
constexpr int kSlices = 8;   // slices of K per block

struct StreamParams {
  int64_t rows = 0, cols = 0;
  int m_rows = 1;
  int group = 32;
  int scale_kind = 0;  // ScaleKind
  bool has_biases = false;
  bool has_tensor_scale = false;
  int batch = 1;       // chunks loaded before use, <= the kernel's kBatch
  float values[256];   // value(code) before the group's scale (and bias), code < 2^bits
};

__device__ inline float decode_scale(const StreamParams& p, const void* scales, float tensor_scale, int64_t at) {
  switch (p.scale_kind) {
    case static_cast<int>(ScaleKind::kF16):
      return f16_to_f32_device(static_cast<const uint16_t*>(scales)[at]);
    case static_cast<int>(ScaleKind::kE8M0): {
      const uint32_t e = static_cast<const uint8_t*>(scales)[at];  // 2^(e - 127); e = 0 is the subnormal 2^-127
      return __uint_as_float(e == 0 ? 0x00400000u : e << 23);
    }
    default:
      return fp8_e4m3_to_f32_device(static_cast<const uint8_t*>(scales)[at]) * tensor_scale;
  }
}

// BITS-bit codes, CHUNK consecutive k (CHUNK * BITS / 32 whole words) at a
// time; MB accumulators (rows of x); HAS_BIASES: affine (value + bias).
template <int BITS, int CHUNK, int MB, bool HAS_BIASES>
__global__ void __launch_bounds__(kCols* kSlices) stream_gemv_kernel(const __grid_constant__ StreamParams p,
                                                                      const __grid_constant__ LaunchJobs jobs) {
  constexpr int kWords = CHUNK * BITS / 32;
  constexpr int kBatch = kWords >= 8 ? 4 : 8;  // chunks whose loads are in flight together
  constexpr uint32_t kMask = BITS == 32 ? 0xffffffffu : (1u << BITS) - 1u;
  __shared__ float table[1 << BITS];
  __shared__ float partial[kSlices][MB][kCols];
  const int tid = threadIdx.y * kCols + threadIdx.x;
  for (int i = tid; i < (1 << BITS); i += kCols * kSlices) table[i] = p.values[i];
  __syncthreads();

  const DeviceGemvJob& job = jobs.job[blockIdx.y];
  const int64_t N = p.rows, K = p.cols;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kCols + threadIdx.x;
  const bool live = n < N;
  const uint32_t* qweight = static_cast<const uint32_t*>(job.parts[0]);
  const void* scales = job.parts[1];
  const uint16_t* biases = HAS_BIASES ? static_cast<const uint16_t*>(job.parts[2]) : nullptr;
  const float tensor_scale = p.has_tensor_scale ? *static_cast<const float*>(job.parts[2]) : 1.0f;
  const float* xrow[MB];
  for (int m = 0; m < MB; ++m) xrow[m] = job.x + static_cast<int64_t>(m < p.m_rows ? m : p.m_rows - 1) * K;

  float acc[MB];
  for (int m = 0; m < MB; ++m) acc[m] = 0.0f;
  // The slice: whole groups, as chunks of CHUNK k.
  const int64_t groups = K / p.group;
  const int64_t per_slice = (groups + kSlices - 1) / kSlices;
  const int64_t g_begin = threadIdx.y * per_slice;
  const int64_t g_end = g_begin + per_slice < groups ? g_begin + per_slice : groups;
  const int64_t c_begin = g_begin * p.group / CHUNK, c_end = g_end > g_begin ? g_end * p.group / CHUNK : c_begin;
  if (live) {
    // p.batch (<= kBatch) chunks' words (and their groups' scales) are loaded
    // before any is used, so that they are in flight together.
    for (int64_t c0 = c_begin; c0 < c_end; c0 += p.batch) {
      uint32_t w[kBatch][kWords];
      float s[kBatch], b[kBatch];
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        if (i < p.batch && c0 + i < c_end) {
          const int64_t k0 = (c0 + i) * CHUNK, g = k0 / p.group;
          const uint32_t* src = qweight + (k0 * BITS / 32) * N + n;
#pragma unroll
          for (int q = 0; q < kWords; ++q) w[i][q] = __ldg(src + q * N);
          s[i] = decode_scale(p, scales, tensor_scale, g * N + n);
          b[i] = HAS_BIASES ? f16_to_f32_device(__ldg(biases + g * N + n)) : 0.0f;
        }
      }
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        if (i >= p.batch || c0 + i >= c_end) break;
        const int64_t k0 = (c0 + i) * CHUNK;
        float dot[MB], xs[MB];
        for (int m = 0; m < MB; ++m) dot[m] = xs[m] = 0.0f;
#pragma unroll
        for (int j4 = 0; j4 < CHUNK; j4 += 4) {
          float v[4];
#pragma unroll
          for (int jj = 0; jj < 4; ++jj) {
            const int bit = (j4 + jj) * BITS;
            const int word = bit >> 5, shift = bit & 31;
            uint32_t c = w[i][word] >> shift;
            if (shift + BITS > 32) c |= w[i][word + 1] << (32 - shift);
            v[jj] = table[c & kMask];
          }
#pragma unroll
          for (int m = 0; m < MB; ++m) {
            const float4 x4 = __ldg(reinterpret_cast<const float4*>(xrow[m] + k0 + j4));
            dot[m] = fmaf(v[0], x4.x, dot[m]);
            dot[m] = fmaf(v[1], x4.y, dot[m]);
            dot[m] = fmaf(v[2], x4.z, dot[m]);
            dot[m] = fmaf(v[3], x4.w, dot[m]);
            if constexpr (HAS_BIASES) xs[m] += (x4.x + x4.y) + (x4.z + x4.w);
          }
        }
        for (int m = 0; m < MB; ++m) {
          acc[m] = fmaf(s[i], dot[m], acc[m]);
          if constexpr (HAS_BIASES) acc[m] = fmaf(b[i], xs[m], acc[m]);
        }
      }
    }
  }
  for (int m = 0; m < MB; ++m) partial[threadIdx.y][m][threadIdx.x] = acc[m];
  __syncthreads();
  if (live && threadIdx.y < MB && threadIdx.y < p.m_rows) {
    const int m = threadIdx.y;
    float sum = partial[0][m][threadIdx.x];
    for (int s = 1; s < kSlices; ++s) sum += partial[s][m][threadIdx.x];
    job.y[static_cast<int64_t>(m) * N + n] = sum;
  }
}

template <int BITS, int CHUNK, bool HAS_BIASES>
void launch_bits(const StreamParams& p, const LaunchJobs& jobs, int n_jobs, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((p.rows + kCols - 1) / kCols), static_cast<unsigned>(n_jobs));
  const dim3 block(kCols, kSlices);
  switch (rows_bucket(p.m_rows)) {
    case 1: stream_gemv_kernel<BITS, CHUNK, 1, HAS_BIASES><<<grid, block, 0, stream>>>(p, jobs); break;
    case 2: stream_gemv_kernel<BITS, CHUNK, 2, HAS_BIASES><<<grid, block, 0, stream>>>(p, jobs); break;
    case 4: stream_gemv_kernel<BITS, CHUNK, 4, HAS_BIASES><<<grid, block, 0, stream>>>(p, jobs); break;
    default: stream_gemv_kernel<BITS, CHUNK, 8, HAS_BIASES><<<grid, block, 0, stream>>>(p, jobs); break;
  }
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
  p.has_biases = l.has_biases;
  p.has_tensor_scale = l.has_tensor_scale;
  for (uint32_t c = 0; c < (1u << l.bits); ++c) p.values[c] = l.codes->value(c);
  // Chunks of 32 k (a whole number of words for every width), 16 for groups of 16 (4-bit only).
  const bool chunk16 = l.group % 32 != 0;
  EQ_CHECK(l.group % 16 == 0 && (!chunk16 || l.bits == 4) && cols % l.group == 0,
           "GPU decode: " + std::string(format.name) + ": " + std::to_string(l.bits) + "-bit codes in groups of " +
               std::to_string(l.group) + " over " + std::to_string(cols) + " columns");
  p.batch = load_batch(l.bits == 8 ? 4 : 8);  // the kernels' kBatch
  const cudaStream_t s = stream_of(stream);
  for_each_launch(jobs, n_jobs, [&](const LaunchJobs& batch, int n) {
    // Affine rows (biases) come in 2, 3, 4 and 8 bits, the table-code rows
    // (fp4 family, nl4) in 4 bits, in groups of 16 or more.
    const int kind = (l.has_biases ? 100 : 0) + l.bits * (chunk16 ? -1 : 1);
    switch (kind) {
      case 102: launch_bits<2, 32, true>(p, batch, n, s); break;
      case 103: launch_bits<3, 32, true>(p, batch, n, s); break;
      case 104: launch_bits<4, 32, true>(p, batch, n, s); break;
      case 108: launch_bits<8, 32, true>(p, batch, n, s); break;
      case 4: launch_bits<4, 32, false>(p, batch, n, s); break;
      case -4: launch_bits<4, 16, false>(p, batch, n, s); break;
      default:
        fail(ErrorKind::kInternal, "GPU decode: no kernel for " + std::to_string(l.bits) + "-bit stream codes" +
                                       (l.has_biases ? " with biases" : "") + (chunk16 ? " in groups of 16" : ""));
    }
    check_launch("stream decode kernel");
  });
}

}  // namespace

const DeviceGemv kStreamDeviceGemv{run_stream};

}  // namespace eq::quant::cuda
