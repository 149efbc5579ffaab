// The GPU decode product of the trellis rows, both codes (docs/formats.md,
// "trellis"), read as stored: tile streams U8 [K/16, N/16, 32*bits], su I8 [K],
// sv I8 [N], scales F32 [N]. The steps of the CPU matmul:
//   1. x~ = H_K (su o x) per row of x                (input rotation)
//   2. z[n] = scales[n] * sum_k y(state[n, k]) x~[k]   (tile decode)
//   3. y = sv o (H_N z)                              (output rotation)
// in float32, in one launch at one row of x and two at 2 to 8 rows:
//   - Step 1 is done by warps, 128 columns at a time (rotated_chunk: lane l
//     holds columns 4l .. 4l+3; a Hadamard block of B <= 128 columns takes
//     two stages in registers and log2(B/4) shuffles). At one row each block
//     rotates the whole row into its shared memory, after its first tile loads
//     are in flight; at 2 to 8 rows a launch of its own writes x~ to the
//     call's scratch once (a block's shared memory would not hold 8 rows).
//   - Step 2: a block owns S strips of 16 output rows (strips_of: as many as an
//     output Hadamard block holds while every multiprocessor still gets a
//     block, at most 8, 4 at two rows of x and 2 at more); its warps (16 at one
//     or two rows, else 8) split K and decode one 16 x 16 tile of each strip at
//     a time: lane l owns the tile's weights 8l .. 8l+7 (row l/2, columns
//     8(l%2) ..), whose symbols are the lane's `bits` bytes of the stream; a
//     state's 16-bit window reaches back into the previous lane's last two
//     bytes (a shuffle; lane 0 takes lane 31's, which is the tail-biting wrap).
//     y(state) is code_1mad's or code_lut_with's (trellis/codebook.h), as a
//     float (code_float). The warps' sums meet in shared memory, added in warp
//     order. Larger blocks rotate x fewer times and share each load of x~
//     among more tiles: on the Qwen3-30B-A3B layer a step of trellis4 took
//     43.4 us in three launches a product, 31.5 us fused with 2 strips and 8
//     warps, 24.3 us with these (docs/benchmarks.md, "GPU decode").
//   - Step 3: the blocks of one output Hadamard block (B_N / (16 S) of them)
//     are one thread-block cluster; each reads the cluster's z from the others'
//     shared memory, rotates it with a warp per row of x and stores its own
//     rows of y.
// A row's float operations and their order depend on its shape and bucket of
// rows of x only: not on the jobs of a call, the strips a block or the path of
// step 1 (the same rotated_chunk).
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

#include "core/error.h"
#include "quant/cuda/gemv_common.cuh"
#include "quant/cuda/trellis_tile.cuh"
#include "quant/hadamard.h"
#include "quant/trellis/codebook.h"
#include "quant/trellis/format.h"

// Thread-block clusters and their barriers (step 3) are sm_90's.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "trellis_gemv.cu: the trellis decode needs sm_90 or newer (thread-block clusters)"
#endif

namespace eq::quant::cuda {

namespace {

namespace cg = cooperative_groups;
using trellis::Code;
using trellis::kTileDim;
// Warps a block (slices of K) in step 2, by rows of x: 16 at one or two rows
// (measured against 8 and 32), 8 at more (their accumulators take registers).
constexpr int warps_of(int mb) { return mb <= 2 ? 16 : 8; }
constexpr int kRotateWarps = 8;  // warps a block of the input rotation at 2 to 8 rows
constexpr int kTileBatch = 16;   // tiles a lane loads before decoding them (kTileBatch / S columns of S strips)
constexpr int kMaxStrips = 8;    // strips of 16 output rows a block owns at most (an output Hadamard block)
constexpr int kChunk = 128;      // columns a warp rotates at a time (kMaxHadamardBlock)
static_assert(kChunk == kMaxHadamardBlock, "a warp's chunk holds whole Hadamard blocks");

// The parts of a trellis row, in FormatTraits::parts order.
enum Part { kTiles = 0, kSu = 1, kSv = 2, kScales = 3 };

struct TrellisParams {
  int64_t rows = 0, cols = 0;
  int m_rows = 1;
  int batch = 1;     // tile columns loaded before decoding (at most the kernel's kBatch)
  int block_k = 16;  // Hadamard block of the input rotation (16 .. 128)
  int block_n = 16;  // ... and of the output rotation
  float norm_k = 1.0f, norm_n = 1.0f;
  int8_t lut_a[trellis::kLutEntries];
  int8_t lut_b[trellis::kLutEntries];
};

// v := H v (unnormalized) over the warp's 128 values, lane l holding 4l .. 4l+3,
// for Hadamard blocks of `block` (16 .. 128) consecutive values: two stages in
// registers, then one shuffle per stage across lanes (a block of B values spans
// B/4 lanes).
__device__ inline void warp_hadamard(float v[4], int block, int lane) {
  float a = v[0] + v[1], b = v[0] - v[1], c = v[2] + v[3], d = v[2] - v[3];
  v[0] = a + c;
  v[1] = b + d;
  v[2] = a - c;
  v[3] = b - d;
  for (int dist = 1; dist < block / 4; dist <<= 1) {
    const bool upper = (lane & dist) != 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float o = __shfl_xor_sync(0xffffffffu, v[i], dist);
      v[i] = upper ? o - v[i] : v[i] + o;
    }
  }
}

// Step 1 for columns c0 .. c0+127 of row m of the job's input: lane l's 4
// values of x~ (columns c0 + 4l ..; zeros past K, whose lanes' blocks are not
// K's: K is a multiple of the block). A gated job's input is silu(x) * up.
__device__ inline void rotated_chunk(const DeviceGemvJob& job, int m, int64_t K, int64_t c0, int block, float norm,
                                     int lane, float v[4]) {
  const int64_t c = c0 + 4 * lane;
  const int8_t* su = static_cast<const int8_t*>(job.parts[kSu]);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float x = 0.0f;
    if (c < K) {
      const int64_t at = m * K + c + i;
      x = (job.x_up ? swiglu_device(job.x[at], job.x_up[at]) : job.x[at]) * static_cast<float>(su[c + i]);
    }
    v[i] = x;
  }
  warp_hadamard(v, block, lane);
#pragma unroll
  for (int i = 0; i < 4; ++i) v[i] *= norm;
}

// rotated_chunk stored into the row of x~ at `row` (K floats, shared or global memory).
__device__ inline void store_rotated_chunk(const DeviceGemvJob& job, int m, int64_t K, int64_t c0, int block,
                                           float norm, int lane, float* row) {
  float v[4];
  rotated_chunk(job, m, K, c0, block, norm, lane, v);
  const int64_t c = c0 + 4 * lane;
  if (c < K) *reinterpret_cast<float4*>(row + c) = make_float4(v[0], v[1], v[2], v[3]);
}

// Step 1 at 2 to 8 rows: warp w of block (chunk blockIdx.x * 8 + w, row
// blockIdx.y, job blockIdx.z) writes its chunk of x~ to `xt` [job][m][K].
__global__ void __launch_bounds__(32 * kRotateWarps) rotate_input_kernel(const __grid_constant__ TrellisParams p,
                                                                    const __grid_constant__ LaunchJobs jobs, float* xt) {
  const int64_t c0 = (static_cast<int64_t>(blockIdx.x) * kRotateWarps + threadIdx.y) * kChunk;
  if (c0 >= p.cols) return;  // the whole warp
  float* row = xt + (static_cast<int64_t>(blockIdx.z) * p.m_rows + blockIdx.y) * p.cols;
  store_rotated_chunk(jobs.job[blockIdx.z], blockIdx.y, p.cols, c0, p.block_k, p.norm_k, threadIdx.x, row);
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

// The 16-bit state of the lane's weight J (0 .. 7): bits s .. s+15 of the
// window `hi:lo` (the previous lane's last two bytes above the lane's own
// 8 * BITS bits), s = (7 - J) * BITS. A byte-aligned window is one byte
// permute (hi's bytes past the window are zero), the others a shift and a mask.
template <int BITS, int J>
__device__ inline uint32_t state_of(uint32_t lo, uint32_t hi) {
  constexpr int s = (7 - J) * BITS;
  if constexpr (s % 8 == 0) {
    constexpr uint32_t b = s / 8;
    return __byte_perm(lo, hi, 0x7700u | ((b + 1) << 4) | b);
  } else if constexpr (s < 16) {
    return (lo >> s) & 0xffffu;
  } else {
    return __funnelshift_r(lo, hi, s) & 0xffffu;
  }
}

// The 8 weights of the lane in the tile whose stream gives it `own`.
template <int BITS, bool kLut>
__device__ inline void decode_lane(const int8_t* lut, uint32_t own, int lane, float v[8]) {
  const uint32_t prev = __shfl_sync(0xffffffffu, own, (lane + 31) & 31);
  // The window's low word and the bits above it (zero past the window).
  uint32_t lo, hi;
  if constexpr (BITS == 4) {
    lo = own;
    hi = prev & 0xffffu;
  } else if constexpr (BITS == 3) {
    lo = own | (prev << 24);
    hi = (prev >> 8) & 0xffu;
  } else {
    lo = __byte_perm(own, prev, 0x5410);
    hi = 0;
  }
  v[0] = code_float<kLut>(lut, state_of<BITS, 0>(lo, hi));
  v[1] = code_float<kLut>(lut, state_of<BITS, 1>(lo, hi));
  v[2] = code_float<kLut>(lut, state_of<BITS, 2>(lo, hi));
  v[3] = code_float<kLut>(lut, state_of<BITS, 3>(lo, hi));
  v[4] = code_float<kLut>(lut, state_of<BITS, 4>(lo, hi));
  v[5] = code_float<kLut>(lut, state_of<BITS, 5>(lo, hi));
  v[6] = code_float<kLut>(lut, state_of<BITS, 6>(lo, hi));
  v[7] = code_float<kLut>(lut, state_of<BITS, 7>(lo, hi));
}

// t + sum_j v[j] x[j] over the lane's 8 columns, in column order.
__device__ inline float dot8(const float v[8], float4 a, float4 b, float t) {
  t = fmaf(v[0], a.x, t);
  t = fmaf(v[1], a.y, t);
  t = fmaf(v[2], a.z, t);
  t = fmaf(v[3], a.w, t);
  t = fmaf(v[4], b.x, t);
  t = fmaf(v[5], b.y, t);
  t = fmaf(v[6], b.z, t);
  return fmaf(v[7], b.w, t);
}

// Steps 2 and 3 for the S strips of 16 output rows from 16 * S * blockIdx.x,
// job blockIdx.y; step 1 too at one row of x (MB == 1, x~ rotated into the
// dynamic shared memory), else x~ from `xt` [job][m][K].
// Jobs: LaunchJobs, or RoutedJobs (one row of x): a dead job's blocks, a
// whole cluster (its blocks share blockIdx.y), return at once.
template <int BITS, bool kLut, int MB, int S, typename Jobs>
__global__ void __launch_bounds__(32 * warps_of(MB)) tile_gemv_kernel(const __grid_constant__ TrellisParams p,
                                                                 const __grid_constant__ Jobs jobs,
                                                                 const float* xt) {
  constexpr bool kFused = MB == 1;
  constexpr int kWarps = warps_of(MB);
  constexpr int kRows = kTileDim * S;
  constexpr int kBatch = kTileBatch / S > 1 ? kTileBatch / S : 1;
  constexpr int kTileBytes = trellis::kTileSize * BITS / 8;
  extern __shared__ float4 dynamic_shared[];
  __shared__ int8_t lut[2 * trellis::kLutEntries];
  __shared__ float partial[kWarps][MB][kRows];
  __shared__ __align__(16) float z[MB][kRows];
  if (!jobs.live(blockIdx.y)) return;
  const int tid = threadIdx.y * 32 + threadIdx.x;
  const int lane = threadIdx.x;
  if (kLut && tid < 2 * trellis::kLutEntries)
    lut[tid] = tid < trellis::kLutEntries ? p.lut_a[tid] : p.lut_b[tid - trellis::kLutEntries];

  const DeviceGemvJob& job = jobs.at(blockIdx.y);
  const int64_t N = p.rows, K = p.cols;
  const int64_t NT = N / kTileDim, KT = K / kTileDim;
  const int64_t nt0 = static_cast<int64_t>(blockIdx.x) * S;
  const uint8_t* tiles = static_cast<const uint8_t*>(job.parts[kTiles]);
  const int64_t per = (KT + kWarps - 1) / kWarps;
  const int64_t kt_begin = threadIdx.y * per;
  const int64_t kt_end = kt_begin + per < KT ? kt_begin + per : KT;
  const int batch = p.batch < kBatch ? p.batch : kBatch;

  uint32_t own[kBatch][S];
  auto load = [&](int64_t kt0) {
#pragma unroll
    for (int i = 0; i < kBatch; ++i)
      if (i < batch && kt0 + i < kt_end)
#pragma unroll
        for (int s = 0; s < S; ++s) own[i][s] = lane_bytes<BITS>(tiles + ((kt0 + i) * NT + nt0 + s) * kTileBytes, lane);
  };
  load(kt_begin);  // in flight while the input is rotated

  const float* xm[MB];
  if constexpr (kFused) {
    float* xs = reinterpret_cast<float*>(dynamic_shared);
    for (int64_t c0 = static_cast<int64_t>(threadIdx.y) * kChunk; c0 < K; c0 += kWarps * kChunk)
      store_rotated_chunk(job, 0, K, c0, p.block_k, p.norm_k, lane, xs);
    xm[0] = xs;
  } else {
    for (int m = 0; m < MB; ++m)
      xm[m] = xt + (static_cast<int64_t>(blockIdx.y) * p.m_rows + (m < p.m_rows ? m : p.m_rows - 1)) * K;
  }
  __syncthreads();  // x~ and the table

  float acc[S][MB];
#pragma unroll
  for (int s = 0; s < S; ++s)
#pragma unroll
    for (int m = 0; m < MB; ++m) acc[s][m] = 0.0f;
  for (int64_t kt0 = kt_begin; kt0 < kt_end; kt0 += batch) {
    if (kt0 != kt_begin) load(kt0);
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      if (i >= batch || kt0 + i >= kt_end) break;  // the same for the whole warp
      const int64_t k0 = (kt0 + i) * kTileDim + (lane & 1) * 8;
      auto x_at = [&](int m, int64_t k) {
        if constexpr (kFused) return *reinterpret_cast<const float4*>(xm[m] + k);
        return __ldg(reinterpret_cast<const float4*>(xm[m] + k));
      };
      if constexpr (MB <= 2) {
        // The lane's 8 columns of x~ in every row, then each strip's tile.
        float4 a[MB], b[MB];
#pragma unroll
        for (int m = 0; m < MB; ++m) {
          a[m] = x_at(m, k0);
          b[m] = x_at(m, k0 + 4);
        }
#pragma unroll
        for (int s = 0; s < S; ++s) {
          float v[8];
          decode_lane<BITS, kLut>(lut, own[i][s], lane, v);
#pragma unroll
          for (int m = 0; m < MB; ++m) acc[s][m] = dot8(v, a[m], b[m], acc[s][m]);
        }
      } else {
        // Every strip's tile, then the rows of x~ one at a time (registers).
        float v[S][8];
#pragma unroll
        for (int s = 0; s < S; ++s) decode_lane<BITS, kLut>(lut, own[i][s], lane, v[s]);
#pragma unroll
        for (int m = 0; m < MB; ++m) {
          const float4 a = x_at(m, k0), b = x_at(m, k0 + 4);
#pragma unroll
          for (int s = 0; s < S; ++s) acc[s][m] = dot8(v[s], a, b, acc[s][m]);
        }
      }
    }
  }
#pragma unroll
  for (int s = 0; s < S; ++s)
#pragma unroll
    for (int m = 0; m < MB; ++m) {
      const float t = acc[s][m] + __shfl_xor_sync(0xffffffffu, acc[s][m], 1);
      if ((lane & 1) == 0) partial[threadIdx.y][m][s * kTileDim + (lane >> 1)] = t;
    }
  __syncthreads();
  for (int i = tid; i < MB * kRows; i += 32 * kWarps) {
    const int m = i / kRows, r = i % kRows;
    float sum = partial[0][m][r];
    for (int w = 1; w < kWarps; ++w) sum += partial[w][m][r];
    z[m][r] = sum * __ldg(static_cast<const float*>(job.parts[kScales]) + nt0 * kTileDim + r);
  }

  // Step 3: the cluster's blocks hold one output Hadamard block of z.
  // Cluster barriers of cluster scope (a release / acquire pair makes z
  // visible to the other blocks; cooperative groups' sync adds a GPU-scope
  // fence, 1.6% of a step).
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
  const cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  for (int m = threadIdx.y; m < p.m_rows; m += kWarps) {
    const int e = 4 * lane;  // the lane's 4 rows of the Hadamard block
    float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (e < p.block_n) {
      const float4 t = *reinterpret_cast<const float4*>(cluster.map_shared_rank(&z[m][e % kRows], e / kRows));
      v[0] = t.x;
      v[1] = t.y;
      v[2] = t.z;
      v[3] = t.w;
    }
    warp_hadamard(v, p.block_n, lane);
    if (e < p.block_n && e / kRows == rank) {
      const int64_t n = (nt0 - static_cast<int64_t>(rank) * S) * kTileDim + e;
      const int8_t* sv = static_cast<const int8_t*>(job.parts[kSv]);
#pragma unroll
      for (int i = 0; i < 4; ++i) job.y[m * N + n + i] = v[i] * p.norm_n * static_cast<float>(sv[n + i]);
    }
  }
  // No block leaves while another reads its z. Relaxed: every value read from
  // another block has been consumed (the rotation's shuffles) before the arrive.
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\nbarrier.cluster.wait.aligned;" ::: "memory");
}

// Dynamic shared memory of a launch: x~ of the row at one row of x.
template <int MB>
size_t tile_shared_bytes(int64_t cols) {
  return MB == 1 ? static_cast<size_t>(cols) * sizeof(float) : 0;
}

template <int BITS, bool kLut, int MB, int S, typename Jobs>
void launch_tiles(const TrellisParams& p, const Jobs& jobs, int n_jobs, const float* xt, cudaStream_t s) {
  const auto kernel = tile_gemv_kernel<BITS, kLut, MB, S, Jobs>;
  const size_t smem = tile_shared_bytes<MB>(p.cols);
  prepare_shared_bytes(reinterpret_cast<const void*>(kernel), smem, "trellis", p.cols);
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(p.rows / (kTileDim * S)), static_cast<unsigned>(n_jobs));
  config.blockDim = dim3(32, warps_of(MB));
  config.dynamicSmemBytes = smem;
  config.stream = s;
  cudaLaunchAttribute cluster;
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = static_cast<unsigned>(p.block_n / (kTileDim * S));
  cluster.val.clusterDim.y = 1;
  cluster.val.clusterDim.z = 1;
  config.attrs = &cluster;
  config.numAttrs = 1;
  check(cudaLaunchKernelEx(&config, kernel, p, jobs, xt), "trellis decode launch");
}

// Strips a block owns at most, by rows of x: the accumulators (S x MB) stay in
// registers.
constexpr int max_strips(int mb) { return mb == 1 ? kMaxStrips : mb == 2 ? std::min(4, kMaxStrips) : 2; }

template <int BITS, bool kLut, int MB, typename Jobs>
void launch_tiles_strips(int strips, const TrellisParams& p, const Jobs& jobs, int n_jobs, const float* xt,
                         cudaStream_t s) {
  switch (std::min(strips, max_strips(MB))) {
    case 1: return launch_tiles<BITS, kLut, MB, 1>(p, jobs, n_jobs, xt, s);
    case 2: return launch_tiles<BITS, kLut, MB, 2>(p, jobs, n_jobs, xt, s);
    case 4:
      if constexpr (max_strips(MB) >= 4) return launch_tiles<BITS, kLut, MB, 4>(p, jobs, n_jobs, xt, s);
      break;
    case 8:
      if constexpr (max_strips(MB) >= 8) return launch_tiles<BITS, kLut, MB, 8>(p, jobs, n_jobs, xt, s);
      break;
  }
  fail(ErrorKind::kInternal, "GPU decode: no trellis kernel for " + std::to_string(strips) + " strips");
}

template <int BITS, bool kLut, typename Jobs>
void launch_tiles_rows(int mb, int strips, const TrellisParams& p, const Jobs& jobs, int n_jobs, const float* xt,
                       cudaStream_t s) {
  if constexpr (std::is_same_v<Jobs, RoutedJobs>) {  // one row of x: no other kernel made
    launch_tiles_strips<BITS, kLut, 1>(strips, p, jobs, n_jobs, xt, s);
  } else {
    switch (mb) {
      case 1: launch_tiles_strips<BITS, kLut, 1>(strips, p, jobs, n_jobs, xt, s); break;
      case 2: launch_tiles_strips<BITS, kLut, 2>(strips, p, jobs, n_jobs, xt, s); break;
      case 4: launch_tiles_strips<BITS, kLut, 4>(strips, p, jobs, n_jobs, xt, s); break;
      default: launch_tiles_strips<BITS, kLut, 8>(strips, p, jobs, n_jobs, xt, s); break;
    }
  }
}

template <bool kLut, typename Jobs>
void launch_tiles_bits(int bits, int mb, int strips, const TrellisParams& p, const Jobs& jobs, int n_jobs,
                       const float* xt, cudaStream_t s) {
  switch (bits) {
    case 2: launch_tiles_rows<2, kLut>(mb, strips, p, jobs, n_jobs, xt, s); break;
    case 3: launch_tiles_rows<3, kLut>(mb, strips, p, jobs, n_jobs, xt, s); break;
    case 4: launch_tiles_rows<4, kLut>(mb, strips, p, jobs, n_jobs, xt, s); break;
    default: fail(ErrorKind::kInternal, "GPU decode: no trellis kernel for " + std::to_string(bits) + " bits");
  }
}

// Strips a block: the most (up to max_strips, and what an output Hadamard
// block holds: powers of two) that still give every multiprocessor a block.
// Fewer, larger blocks rotate x fewer times and share each load of x~ among
// more tiles (docs/benchmarks.md, "GPU decode").
int strips_of(int64_t rows, int block_n, int mb, int n_jobs) {
  int strips = std::min(max_strips(mb), block_n / kTileDim);
  while (strips > 1 && rows / (kTileDim * strips) * n_jobs < multiprocessor_count()) strips /= 2;
  return strips;
}

// One row of x is rotated in each block's shared memory while it fits;
// longer rows, and 2 to 8 rows, go through the scratch.
bool fused_input(int m_rows, int64_t cols) {
  return m_rows == 1 && tile_shared_bytes<1>(cols) + kDecodeStaticShared <= max_shared_bytes();
}

// x~ [jobs][m][K] of one launch (at most kJobsPerLaunch jobs).
size_t trellis_scratch_bytes(const FormatTraits&, int64_t, int64_t cols, int n_jobs, int m_rows) {
  return static_cast<size_t>(std::min(n_jobs, kJobsPerLaunch)) * m_rows * cols * sizeof(float);
}

TrellisParams trellis_params(const FormatTraits& format, int64_t rows, int64_t cols, int m_rows) {
  EQ_CHECK(rows % kTileDim == 0 && cols % kTileDim == 0,
           "GPU decode: " + std::string(format.name) + " [" + std::to_string(rows) + ", " + std::to_string(cols) + "]");
  TrellisParams p;
  p.rows = rows;
  p.cols = cols;
  p.m_rows = m_rows;
  p.batch = load_batch(kTileBatch);
  p.block_k = static_cast<int>(hadamard_block_size(cols));
  p.block_n = static_cast<int>(hadamard_block_size(rows));
  p.norm_k = static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.block_k)));
  p.norm_n = static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.block_n)));
  for (int i = 0; i < trellis::kLutEntries; ++i) {
    p.lut_a[i] = trellis::kLutA[i];
    p.lut_b[i] = trellis::kLutB[i];
  }
  return p;
}

void run_trellis(const FormatTraits& format, int64_t rows, int64_t cols, const DeviceGemvJob* jobs, int n_jobs,
                 int m_rows, void* scratch, void* stream) {
  check_call(format, m_rows, "GPU decode");
  const TrellisParams p = trellis_params(format, rows, cols, m_rows);
  const bool lut = trellis::code_of(format) == Code::kLut;
  gated_call(format, jobs, n_jobs, m_rows, cols);  // checks; the input rotation forms the gated input
  // Past the shared memory, one row takes the scratch path of two rows.
  const bool fused = fused_input(m_rows, cols);
  const int mb = fused ? 1 : std::max(2, rows_bucket(m_rows));
  EQ_CHECK(fused || scratch != nullptr, "GPU decode: " + std::string(format.name) + " without scratch");
  const cudaStream_t s = stream_of(stream);
  for_each_launch(jobs, n_jobs, [&](const LaunchJobs& batch, int n, int) {
    // The caller's scratch: x~ [n][m][K], reused launch after launch in stream order.
    float* xt = static_cast<float*>(scratch);
    if (!fused) {
      const int64_t chunks = (cols + kChunk - 1) / kChunk;
      rotate_input_kernel<<<dim3(static_cast<unsigned>((chunks + kRotateWarps - 1) / kRotateWarps), m_rows, n),
                            dim3(32, kRotateWarps), 0, s>>>(p, batch, xt);
    }
    const int strips = strips_of(rows, p.block_n, mb, n);
    if (lut)
      launch_tiles_bits<true>(format.weight_bits, mb, strips, p, batch, n, xt, s);
    else
      launch_tiles_bits<false>(format.weight_bits, mb, strips, p, batch, n, xt, s);
    check_launch("trellis decode kernels");
  });
}

}  // namespace

// Routed jobs: one row of x, rotated in each block's shared memory.
void run_trellis_routed(const FormatTraits& format, int64_t rows, int64_t cols, const RoutedPairs& pairs,
                        int n_pairs, void* stream) {
  gated_routed_call(format, pairs, cols);
  EQ_CHECK(fused_input(1, cols), "GPU decode: " + std::string(format.name) + ": a row of x of " +
                                     std::to_string(cols) + " columns takes more shared memory than the GPU has");
  const TrellisParams p = trellis_params(format, rows, cols, 1);
  const RoutedJobs jobs(pairs, n_pairs);
  const int strips = strips_of(rows, p.block_n, 1, jobs.jobs);
  const cudaStream_t s = stream_of(stream);
  if (trellis::code_of(format) == Code::kLut)
    launch_tiles_bits<true>(format.weight_bits, 1, strips, p, jobs, jobs.jobs, nullptr, s);
  else
    launch_tiles_bits<false>(format.weight_bits, 1, strips, p, jobs, jobs.jobs, nullptr, s);
  check_launch("trellis decode kernels");
}

const DeviceGemv kTrellisDeviceGemv{run_trellis, trellis_scratch_bytes, kMaxDeviceGemvRows, nullptr,
                                     run_trellis_routed};

}  // namespace eq::quant::cuda
