// The GPU prefill product of the trellis rows, both codes (cuda_gemm.h), in
// the rotated basis as their decode product (trellis_gemv.cu) and the CPU
// matmul compute it:
//   1. x~ = H_K (su o x) per row of x, rounded to bf16     (rotate_rows_kernel)
//   2. W'' = diag(scales) W' in bf16 [N, K], decoded from the tile streams
//      (tile_dequant_kernel), and z = x~ W''^T            (bf16_gemm)
//   3. y = sv o (H_N z) per row of z                        (rotate_rows_kernel)
// Tile decode as the decode product's: a warp per 16 x 16 tile, lane l owns
// the tile's weights 8l .. 8l+7 (row l/2, columns 8(l%2) ..), whose symbols
// are the lane's `bits` bytes of the stream; a state's 16-bit window reaches
// back into the previous lane's last two bytes (lane 0 takes lane 31's: the
// tail-biting wrap).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "quant/cuda/gemm_dense.cuh"
#include "quant/cuda/gemv_common.cuh"
#include "quant/cuda/trellis_tile.cuh"
#include "quant/hadamard.h"
#include "quant/trellis/codebook.h"
#include "quant/trellis/format.h"

namespace eq::quant::cuda {

namespace {

using trellis::Code;
constexpr int kHadThreads = 64;   // threads of a Hadamard block
constexpr int kTileWarps = 8;     // tiles per dequantize block
constexpr int kMaxGridRows = 65535;

enum Part { kTiles = 0, kSu = 1, kSv = 2, kScales = 3 };

// One Hadamard block (blockIdx.x) of rows blockIdx.y, blockIdx.y + gridDim.y, ...
// of job blockIdx.z's rows [m, dim]. Input side (kInput): its x~ = bf16(norm *
// H(su o x)) into xb + z * x_stride values; output side: its y = norm * sv o
// H(z_j), z_j at z + z * z_stride floats.
template <bool kInput>
__global__ void __launch_bounds__(kHadThreads) rotate_rows_kernel(const __grid_constant__ GemmBatch b, int64_t dim,
                                                                   int block, float norm, const float* z_all,
                                                                   size_t z_stride, __nv_bfloat16* xb_all,
                                                                   size_t x_stride) {
  const DeviceGemmJob& job = b.job[blockIdx.z];
  const int64_t m = job.m_rows;
  const float* __restrict__ in = kInput ? job.x : z_all + blockIdx.z * z_stride;
  const int8_t* __restrict__ signs = static_cast<const int8_t*>(job.parts[kInput ? kSu : kSv]);
  __nv_bfloat16* __restrict__ out_bf16 = kInput ? xb_all + blockIdx.z * x_stride : nullptr;
  float* __restrict__ out = kInput ? nullptr : job.y;
  __shared__ float v[kMaxHadamardBlock];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * block;
  for (int64_t row = blockIdx.y; row < m; row += gridDim.y) {
    const float* src = in + row * dim + base;
    for (int i = threadIdx.x; i < block; i += kHadThreads)
      v[i] = kInput ? src[i] * static_cast<float>(signs[base + i]) : src[i];
    __syncthreads();
    hadamard_in_shared(v, block, kHadThreads);
    for (int i = threadIdx.x; i < block; i += kHadThreads) {
      if (kInput) out_bf16[row * dim + base + i] = __float2bfloat16_rn(v[i] * norm);
      else out[row * dim + base + i] = v[i] * norm * static_cast<float>(signs[base + i]);
    }
    __syncthreads();
  }
}

struct LutTables {
  int8_t a[trellis::kLutEntries], b[trellis::kLutEntries];
};

// Job blockIdx.y's W'' [N, K] in bf16 into w + y * w_stride values: warp
// (blockIdx.x * kTileWarps + threadIdx.y) decodes tile i = kt * NT + nt of
// the stream (the stored order).
template <int BITS, bool kLut>
__global__ void __launch_bounds__(32 * kTileWarps) tile_dequant_kernel(const __grid_constant__ GemmBatch b, int64_t N,
                                                                        int64_t K, const __grid_constant__ LutTables luts,
                                                                        __nv_bfloat16* __restrict__ w_all,
                                                                        size_t w_stride) {
  const DeviceGemmJob& job = b.job[blockIdx.y];
  const uint8_t* __restrict__ tiles = static_cast<const uint8_t*>(job.parts[kTiles]);
  const float* __restrict__ scales = static_cast<const float*>(job.parts[kScales]);
  __nv_bfloat16* __restrict__ w = w_all + blockIdx.y * w_stride;
  constexpr int kTileBytes = trellis::kTileSize * BITS / 8;
  __shared__ int8_t lut[2 * trellis::kLutEntries];
  const int tid = threadIdx.y * 32 + threadIdx.x;
  if (kLut && tid < 2 * trellis::kLutEntries)
    lut[tid] = tid < trellis::kLutEntries ? luts.a[tid] : luts.b[tid - trellis::kLutEntries];
  __syncthreads();
  const int64_t NT = N / trellis::kTileDim, KT = K / trellis::kTileDim;
  const int64_t tile = static_cast<int64_t>(blockIdx.x) * kTileWarps + threadIdx.y;
  if (tile >= NT * KT) return;  // whole warps leave together
  const int64_t kt = tile / NT, nt = tile % NT;
  const int lane = threadIdx.x;
  const uint32_t own = lane_bytes<BITS>(tiles + tile * kTileBytes, lane);
  const uint32_t prev = __shfl_sync(0xffffffffu, own, (lane + 31) & 31);
  const uint64_t window = (static_cast<uint64_t>(prev & 0xffffu) << (8 * BITS)) | own;
  const int64_t n = nt * trellis::kTileDim + lane / 2;
  const float scale = __ldg(scales + n);
  __nv_bfloat16* dst = w + n * K + kt * trellis::kTileDim + (lane & 1) * 8;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const uint32_t state = static_cast<uint32_t>(window >> ((7 - j) * BITS)) & 0xffffu;
    const int y = kLut ? trellis::code_lut_with(lut, lut + trellis::kLutEntries, state) : trellis::code_1mad(state);
    dst[j] = __float2bfloat16_rn(static_cast<float>(y) * scale);
  }
}

template <bool kLut>
void launch_dequant(int bits, const GemmBatch& b, int n, int64_t N, int64_t K, const LutTables& luts,
                    __nv_bfloat16* w, size_t w_stride, cudaStream_t s) {
  const int64_t tiles = (N / trellis::kTileDim) * (K / trellis::kTileDim);
  const dim3 grid(static_cast<unsigned>((tiles + kTileWarps - 1) / kTileWarps), static_cast<unsigned>(n)),
      block(32, kTileWarps);
  switch (bits) {
    case 2: tile_dequant_kernel<2, kLut><<<grid, block, 0, s>>>(b, N, K, luts, w, w_stride); break;
    case 3: tile_dequant_kernel<3, kLut><<<grid, block, 0, s>>>(b, N, K, luts, w, w_stride); break;
    case 4: tile_dequant_kernel<4, kLut><<<grid, block, 0, s>>>(b, N, K, luts, w, w_stride); break;
    default: fail(ErrorKind::kInternal, "GPU prefill: no trellis kernel for " + std::to_string(bits) + " bits");
  }
}

// A job's scratch: W'' bf16 [N, K], x~ bf16 [m, K], z float [m, N]; a
// batch's, the jobs' W'' one after another, then their x~, then their z.
struct TrellisScratch {
  size_t w = 0, x = 0, z = 0;
  TrellisScratch(int64_t rows, int64_t cols, int64_t max_m_rows)
      : w(bf16_matrix_bytes(rows, cols)),
        x(x_slot_bytes(cols, max_m_rows)),
        z(gemm_align(static_cast<size_t>(max_m_rows * rows) * 4)) {}
  size_t job() const { return w + x + z; }
};

size_t trellis_scratch_bytes(const FormatTraits&, int64_t rows, int64_t cols, int64_t max_m_rows) {
  const TrellisScratch t(rows, cols, max_m_rows);
  return batch_scratch_bytes(t.job());
}

void run_trellis(const FormatTraits& format, int64_t rows, int64_t cols, const DeviceGemmJob* jobs, int n_jobs,
                 void* scratch, void* stream) {
  EQ_CHECK(rows % trellis::kTileDim == 0 && cols % trellis::kTileDim == 0,
           "GPU prefill: " + std::string(format.name) + " [" + std::to_string(rows) + ", " + std::to_string(cols) + "]");
  const bool lut = trellis::code_of(format) == Code::kLut;
  LutTables luts;
  for (int i = 0; i < trellis::kLutEntries; ++i) {
    luts.a[i] = trellis::kLutA[i];
    luts.b[i] = trellis::kLutB[i];
  }
  const int64_t block_k = hadamard_block_size(cols), block_n = hadamard_block_size(rows);
  const float norm_k = static_cast<float>(1.0 / std::sqrt(static_cast<double>(block_k)));
  const float norm_n = static_cast<float>(1.0 / std::sqrt(static_cast<double>(block_n)));
  const cudaStream_t s = stream_of(stream);
  const TrellisScratch t(rows, cols, max_rows(jobs, n_jobs));
  const int per = gemm_batch(t.job());
  char* base = static_cast<char*>(scratch);
  auto* w = reinterpret_cast<__nv_bfloat16*>(base);
  auto* xb = reinterpret_cast<__nv_bfloat16*>(base + static_cast<size_t>(per) * t.w);
  auto* z = reinterpret_cast<float*>(base + static_cast<size_t>(per) * (t.w + t.x));
  const size_t w_stride = t.w / 2, x_stride = t.x / 2, z_stride = t.z / 4;
  for_each_batch(jobs, n_jobs, per, [&](const GemmBatch& b, int n) {
    const unsigned grid_rows = static_cast<unsigned>(std::min<int64_t>(max_rows(b.job, n), kMaxGridRows));
    rotate_rows_kernel<true><<<dim3(static_cast<unsigned>(cols / block_k), grid_rows, static_cast<unsigned>(n)),
                               kHadThreads, 0, s>>>(b, cols, static_cast<int>(block_k), norm_k, nullptr, 0, xb,
                                                    x_stride);
    if (lut) launch_dequant<true>(format.weight_bits, b, n, rows, cols, luts, w, w_stride, s);
    else launch_dequant<false>(format.weight_bits, b, n, rows, cols, luts, w, w_stride, s);
    check_launch("trellis prefill rotation and dequantize kernels");
    const __nv_bfloat16 *xs[kGemmBatch], *ws[kGemmBatch];
    float* zs[kGemmBatch];
    int64_t ms[kGemmBatch];
    for (int j = 0; j < n; ++j) {
      xs[j] = xb + static_cast<size_t>(j) * x_stride;
      ws[j] = w + static_cast<size_t>(j) * w_stride;
      zs[j] = z + static_cast<size_t>(j) * z_stride;
      ms[j] = b.job[j].m_rows;
    }
    bf16_gemms(n, xs, ws, zs, ms, WeightLayout::kRowsByCols, rows, cols, s);
    rotate_rows_kernel<false><<<dim3(static_cast<unsigned>(rows / block_n), grid_rows, static_cast<unsigned>(n)),
                                kHadThreads, 0, s>>>(b, rows, static_cast<int>(block_n), norm_n, z, z_stride, nullptr,
                                                     0);
    check_launch("trellis prefill output rotation");
  });
}

}  // namespace

const DeviceGemm kTrellisDeviceGemm{run_trellis, trellis_scratch_bytes};

}  // namespace eq::quant::cuda
