// The GPU decode product of the trellis rows, both codes (docs/formats.md,
// "trellis"), read as stored: tile streams U8 [K/16, N/16, 32*bits], su I8 [K],
// sv I8 [N], scales F32 [N]. The steps of the CPU matmul:
//   1. x~ = H_K (su o x) per row of x               (hadamard_kernel, input side)
//   2. z[n] = scales[n] * sum_k y(state[n, k]) x~[k]  (tile_gemv_kernel)
//   3. y = sv o (H_N z)                             (hadamard_kernel, output side)
// in float32. Step 2: a warp decodes one 16 x 16 tile at a time: lane l owns
// the tile's weights 8l .. 8l+7 (row l/2, columns 8(l%2) ..), whose symbols
// are the lane's `bits` bytes of the stream; a state's 16-bit window reaches
// back into the previous lane's last two bytes (a shuffle; lane 0 takes lane
// 31's, which is the tail-biting wrap). y(state) is code_1mad's or
// code_lut_with's (trellis/codebook.h), as a float (code_float). The warps of a block
// split K for one 16-row strip and their sums meet in shared memory, added in
// warp order.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "quant/cuda/gemv_common.cuh"
#include "quant/cuda/trellis_tile.cuh"
#include "quant/hadamard.h"
#include "quant/trellis/codebook.h"
#include "quant/trellis/format.h"

namespace eq::quant::cuda {

namespace {

using trellis::Code;
constexpr int kWarps = 8;        // warps per block (slices of K) in step 2
constexpr int kHadThreads = 64;  // threads of a Hadamard block
constexpr int kTileBatch = 16;   // tiles a lane loads before decoding them

// The parts of a trellis row, in FormatTraits::parts order.
enum Part { kTiles = 0, kSu = 1, kSv = 2, kScales = 3 };

struct TrellisParams {
  int64_t rows = 0, cols = 0;
  int m_rows = 1;
  int batch = 1;  // tiles loaded before decoding, <= kTileBatch
  int8_t lut_a[trellis::kLutEntries];
  int8_t lut_b[trellis::kLutEntries];
};

// Step 1 (kInput) or 3: one Hadamard block of one row of x (job blockIdx.z,
// row blockIdx.y). Input side: x~ = H(su o x) from job.x into `scratch`
// [job][m][dim]; output side: y = sv o H z from `scratch` into job.y.
template <bool kInput>
__global__ void __launch_bounds__(kHadThreads) hadamard_kernel(const __grid_constant__ LaunchJobs jobs, float* scratch, int64_t dim,
                                                                int block, int m_rows, float norm) {
  __shared__ float v[kMaxHadamardBlock];
  const DeviceGemvJob& job = jobs.job[blockIdx.z];
  const int m = blockIdx.y;
  const int64_t base = static_cast<int64_t>(blockIdx.x) * block;
  float* row = scratch + (static_cast<int64_t>(blockIdx.z) * m_rows + m) * dim;
  if (kInput) {
    const int8_t* su = static_cast<const int8_t*>(job.parts[kSu]);
    for (int i = threadIdx.x; i < block; i += kHadThreads) {
      const int64_t at = m * dim + base + i;
      v[i] = (job.x_up ? swiglu_device(job.x[at], job.x_up[at]) : job.x[at]) * static_cast<float>(su[base + i]);
    }
  } else {
    for (int i = threadIdx.x; i < block; i += kHadThreads) v[i] = row[base + i];
  }
  __syncthreads();
  hadamard_in_shared(v, block, kHadThreads);
  if (kInput) {
    for (int i = threadIdx.x; i < block; i += kHadThreads) row[base + i] = v[i] * norm;
  } else {
    const int8_t* sv = static_cast<const int8_t*>(job.parts[kSv]);
    for (int i = threadIdx.x; i < block; i += kHadThreads)
      job.y[m * dim + base + i] = v[i] * norm * static_cast<float>(sv[base + i]);
  }
}

// float(y(state)) of the row's code (trellis/codebook.h), without an
// integer-to-float conversion (an eighth of the issue rate): y + bias is a
// small non-negative integer (LUT: bias 256, 1MAD: 510), so 0x4B000000 + y + bias are the bits of the
// float 2^23 + y + bias, exactly, and subtracting 2^23 + bias leaves y. 1MAD:
// y + 510 is the sum of the hash's 4 bytes, one dp4a that adds 0x4B000000 too.
template <bool kLut>
__device__ inline float code_float(const int8_t* lut, uint32_t state) {
  if constexpr (kLut) {
    const uint32_t a = (state ^ (state >> 10)) & 63u;
    const uint32_t b = (static_cast<uint8_t>(lut[a]) ^ (state >> 6)) & 63u;
    return __int_as_float(lut[a] + lut[trellis::kLutEntries + b] + 0x4B000100) - 8388864.0f;  // y + 256 >= 0
  } else {
    const uint32_t x = state * trellis::k1madMul + trellis::k1madAdd;
    return __uint_as_float(__dp4a(x, 0x01010101u, 0x4B000000u)) - 8389118.0f;  // 2^23 + 510
  }
}

// Step 2 for the strip of output rows 16 * blockIdx.x .., job blockIdx.y:
// x~ from `xt` [job][m][K], z into `z` [job][m][N] (row scales applied).
template <int BITS, bool kLut, int MB>
__global__ void __launch_bounds__(32 * kWarps) tile_gemv_kernel(const __grid_constant__ TrellisParams p,
                                                                 const __grid_constant__ LaunchJobs jobs,
                                                                 const float* xt, float* z) {
  constexpr int kTileBytes = trellis::kTileSize * BITS / 8;
  __shared__ int8_t lut[2 * trellis::kLutEntries];
  __shared__ float partial[kWarps][MB][trellis::kTileDim];
  const int tid = threadIdx.y * 32 + threadIdx.x;
  if (kLut && tid < 2 * trellis::kLutEntries)
    lut[tid] = tid < trellis::kLutEntries ? p.lut_a[tid] : p.lut_b[tid - trellis::kLutEntries];
  __syncthreads();

  const DeviceGemvJob& job = jobs.job[blockIdx.y];
  const int64_t N = p.rows, K = p.cols;
  const int64_t NT = N / trellis::kTileDim, KT = K / trellis::kTileDim;
  const int64_t nt = blockIdx.x;
  const int lane = threadIdx.x;
  const uint8_t* tiles = static_cast<const uint8_t*>(job.parts[kTiles]);
  const float* xm[MB];
  for (int m = 0; m < MB; ++m)
    xm[m] = xt + (static_cast<int64_t>(blockIdx.y) * p.m_rows + (m < p.m_rows ? m : p.m_rows - 1)) * K;
  float acc[MB];
  for (int m = 0; m < MB; ++m) acc[m] = 0.0f;

  const int64_t per = (KT + kWarps - 1) / kWarps;
  const int64_t kt_begin = threadIdx.y * per;
  const int64_t kt_end = kt_begin + per < KT ? kt_begin + per : KT;
  // p.batch tiles' bytes are loaded before any is decoded (in flight together).
  for (int64_t kt0 = kt_begin; kt0 < kt_end; kt0 += p.batch) {
    uint32_t own[kTileBatch];
#pragma unroll
    for (int i = 0; i < kTileBatch; ++i)
      if (i < p.batch && kt0 + i < kt_end) own[i] = lane_bytes<BITS>(tiles + ((kt0 + i) * NT + nt) * kTileBytes, lane);
#pragma unroll
    for (int i = 0; i < kTileBatch; ++i) {
      if (i >= p.batch || kt0 + i >= kt_end) break;  // the same for the whole warp
      const uint32_t prev = __shfl_sync(0xffffffffu, own[i], (lane + 31) & 31);
      const uint64_t window = (static_cast<uint64_t>(prev & 0xffffu) << (8 * BITS)) | own[i];
      float v[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const uint32_t state = static_cast<uint32_t>(window >> ((7 - j) * BITS)) & 0xffffu;
        v[j] = code_float<kLut>(lut, state);
      }
      const int64_t k0 = (kt0 + i) * trellis::kTileDim + (lane & 1) * 8;
#pragma unroll
      for (int m = 0; m < MB; ++m) {
        const float4 a = __ldg(reinterpret_cast<const float4*>(xm[m] + k0));
        const float4 b = __ldg(reinterpret_cast<const float4*>(xm[m] + k0 + 4));
        float s = acc[m];
        s = fmaf(v[0], a.x, s);
        s = fmaf(v[1], a.y, s);
        s = fmaf(v[2], a.z, s);
        s = fmaf(v[3], a.w, s);
        s = fmaf(v[4], b.x, s);
        s = fmaf(v[5], b.y, s);
        s = fmaf(v[6], b.z, s);
        s = fmaf(v[7], b.w, s);
        acc[m] = s;
      }
    }
  }
  for (int m = 0; m < MB; ++m) {
    acc[m] += __shfl_xor_sync(0xffffffffu, acc[m], 1);
    if ((lane & 1) == 0) partial[threadIdx.y][m][lane >> 1] = acc[m];
  }
  __syncthreads();
  if (tid < MB * trellis::kTileDim) {
    const int m = tid / trellis::kTileDim, r = tid % trellis::kTileDim;
    if (m < p.m_rows) {
      float sum = partial[0][m][r];
      for (int w = 1; w < kWarps; ++w) sum += partial[w][m][r];
      const int64_t n = nt * trellis::kTileDim + r;
      z[(static_cast<int64_t>(blockIdx.y) * p.m_rows + m) * N + n] =
          sum * __ldg(static_cast<const float*>(job.parts[kScales]) + n);
    }
  }
}

template <int BITS, bool kLut>
void launch_tiles(const TrellisParams& p, const LaunchJobs& jobs, int n_jobs, const float* xt, float* z,
                  cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(p.rows / trellis::kTileDim), static_cast<unsigned>(n_jobs));
  const dim3 block(32, kWarps);
  switch (rows_bucket(p.m_rows)) {
    case 1: tile_gemv_kernel<BITS, kLut, 1><<<grid, block, 0, s>>>(p, jobs, xt, z); break;
    case 2: tile_gemv_kernel<BITS, kLut, 2><<<grid, block, 0, s>>>(p, jobs, xt, z); break;
    case 4: tile_gemv_kernel<BITS, kLut, 4><<<grid, block, 0, s>>>(p, jobs, xt, z); break;
    default: tile_gemv_kernel<BITS, kLut, 8><<<grid, block, 0, s>>>(p, jobs, xt, z); break;
  }
}

template <bool kLut>
void launch_tiles_bits(int bits, const TrellisParams& p, const LaunchJobs& jobs, int n_jobs, const float* xt,
                       float* z, cudaStream_t s) {
  switch (bits) {
    case 2: launch_tiles<2, kLut>(p, jobs, n_jobs, xt, z, s); break;
    case 3: launch_tiles<3, kLut>(p, jobs, n_jobs, xt, z, s); break;
    case 4: launch_tiles<4, kLut>(p, jobs, n_jobs, xt, z, s); break;
    default: fail(ErrorKind::kInternal, "GPU decode: no trellis kernel for " + std::to_string(bits) + " bits");
  }
}

// x~ [jobs][m][K] and z [jobs][m][N] of one launch (at most kJobsPerLaunch jobs).
size_t trellis_scratch_bytes(const FormatTraits&, int64_t rows, int64_t cols, int n_jobs, int m_rows) {
  return static_cast<size_t>(std::min(n_jobs, kJobsPerLaunch)) * m_rows * (rows + cols) * sizeof(float);
}

void run_trellis(const FormatTraits& format, int64_t rows, int64_t cols, const DeviceGemvJob* jobs, int n_jobs,
                 int m_rows, void* scratch, void* stream) {
  check_call(format, m_rows, "GPU decode");
  EQ_CHECK(scratch != nullptr, "GPU decode: " + std::string(format.name) + " without scratch");
  EQ_CHECK(rows % trellis::kTileDim == 0 && cols % trellis::kTileDim == 0,
           "GPU decode: " + std::string(format.name) + " [" + std::to_string(rows) + ", " + std::to_string(cols) + "]");
  TrellisParams p;
  p.rows = rows;
  p.cols = cols;
  p.m_rows = m_rows;
  p.batch = load_batch(kTileBatch);
  const bool lut = trellis::code_of(format) == Code::kLut;
  for (int i = 0; i < trellis::kLutEntries; ++i) {
    p.lut_a[i] = trellis::kLutA[i];
    p.lut_b[i] = trellis::kLutB[i];
  }
  const int64_t block_k = hadamard_block_size(cols), block_n = hadamard_block_size(rows);
  const float norm_k = static_cast<float>(1.0 / std::sqrt(static_cast<double>(block_k)));
  const float norm_n = static_cast<float>(1.0 / std::sqrt(static_cast<double>(block_n)));
  gated_call(format, jobs, n_jobs, m_rows, cols);  // checks; the input rotation forms the gated input
  const cudaStream_t s = stream_of(stream);
  for_each_launch(jobs, n_jobs, [&](const LaunchJobs& batch, int n, int) {
    // The caller's scratch: x~ [n][m][K] and z [n][m][N], reused launch after launch in stream order.
    const size_t xt_floats = static_cast<size_t>(n) * m_rows * cols;
    float* xt = static_cast<float*>(scratch);
    float* z = xt + xt_floats;
    hadamard_kernel<true><<<dim3(static_cast<unsigned>(cols / block_k), m_rows, n), kHadThreads, 0, s>>>(
        batch, xt, cols, static_cast<int>(block_k), m_rows, norm_k);
    if (lut)
      launch_tiles_bits<true>(format.weight_bits, p, batch, n, xt, z, s);
    else
      launch_tiles_bits<false>(format.weight_bits, p, batch, n, xt, z, s);
    hadamard_kernel<false><<<dim3(static_cast<unsigned>(rows / block_n), m_rows, n), kHadThreads, 0, s>>>(
        batch, z, rows, static_cast<int>(block_n), m_rows, norm_n);
    check_launch("trellis decode kernels");
  });
}

}  // namespace

const DeviceGemv kTrellisDeviceGemv{run_trellis, trellis_scratch_bytes, true};

}  // namespace eq::quant::cuda
