// The GPU prefill product of the column bit-stream formats (cuda_gemm.h):
// W dequantized from its stored parts (qweight U32 [K*bits/32, N], scales
// [K/G, N], biases F16 [K/G, N]; docs/formats.md, "Column bit stream") into
// bf16 W^T [K, N], then the bf16 product (gemm_dense.cuh).
//
// Dequantization: one thread per output column n and chunk of 32 k (16 for
// groups of 16) of a job (blockIdx.z: one launch a batch of jobs,
// gemm_dense.cuh): it reads the chunk's words of column n (a warp reads 32
// adjacent words: coalesced), and writes value(code) * scale (+ bias) for
// each k of the chunk at W^T[k, n] (a warp writes 32 adjacent values).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "core/error.h"
#include "quant/cuda/gemm_dense.cuh"
#include "quant/cuda/gemv_common.cuh"
#include "quant/cuda/stream_scale.cuh"
#include "quant/packed_stream.h"

namespace eq::quant::cuda {

namespace {

constexpr int kThreads = 128;  // output columns per block

struct DequantParams {
  int64_t rows = 0, cols = 0;
  int group = 32;
  int scale_kind = 0;  // ScaleKind
  bool has_tensor_scale = false;
  float values[256];   // value(code) before the group's scale (and bias), code < 2^bits
};

// Job z's W^T [K, N] (bf16) from its parts into wt + z * w_stride values;
// grid (N / kThreads, K / CHUNK, jobs).
template <int BITS, int CHUNK, bool HAS_BIASES>
__global__ void __launch_bounds__(kThreads) stream_dequant_kernel(const __grid_constant__ DequantParams p,
                                                                   const __grid_constant__ GemmBatch batch,
                                                                   __nv_bfloat16* __restrict__ wt_all,
                                                                   size_t w_stride) {
  const DeviceGemmJob& job = batch.job[blockIdx.z];
  const uint32_t* __restrict__ qweight = static_cast<const uint32_t*>(job.parts[0]);
  const void* __restrict__ scales = job.parts[1];
  const void* __restrict__ third = job.parts[2];
  __nv_bfloat16* __restrict__ wt = wt_all + blockIdx.z * w_stride;
  constexpr int kWords = CHUNK * BITS / 32;
  constexpr uint32_t kMask = (1u << BITS) - 1u;
  __shared__ float table[1 << BITS];
  for (int i = threadIdx.x; i < (1 << BITS); i += kThreads) table[i] = p.values[i];
  __syncthreads();
  const int64_t N = p.rows;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (n >= N) return;
  const int64_t k0 = static_cast<int64_t>(blockIdx.y) * CHUNK, g = k0 / p.group;
  uint32_t w[kWords];
#pragma unroll
  for (int q = 0; q < kWords; ++q) w[q] = __ldg(qweight + (k0 * BITS / 32 + q) * N + n);
  const float tensor_scale = p.has_tensor_scale ? *static_cast<const float*>(third) : 1.0f;
  const float s = decode_stream_scale(p.scale_kind, scales, tensor_scale, g * N + n);
  const float b = HAS_BIASES ? f16_to_f32_device(__ldg(static_cast<const uint16_t*>(third) + g * N + n)) : 0.0f;
#pragma unroll
  for (int j = 0; j < CHUNK; ++j) {
    const int bit = j * BITS, word = bit >> 5, shift = bit & 31;
    uint32_t c = w[word] >> shift;
    if (shift + BITS > 32) c |= w[word + 1] << (32 - shift);
    const float v = HAS_BIASES ? fmaf(table[c & kMask], s, b) : table[c & kMask] * s;
    wt[(k0 + j) * N + n] = __float2bfloat16_rn(v);
  }
}

template <int BITS, int CHUNK, bool HAS_BIASES>
void launch_dequant(const DequantParams& p, const GemmBatch& b, int n, __nv_bfloat16* wt, size_t w_stride,
                    cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>((p.rows + kThreads - 1) / kThreads), static_cast<unsigned>(p.cols / CHUNK),
                  static_cast<unsigned>(n));
  stream_dequant_kernel<BITS, CHUNK, HAS_BIASES><<<grid, kThreads, 0, s>>>(p, b, wt, w_stride);
}

// A job's scratch: W^T bf16 [K, N] and x bf16 [m, K]; a batch's, the jobs'
// W^T one after another, then their x.
size_t stream_scratch_bytes(const FormatTraits&, int64_t rows, int64_t cols, int64_t max_m_rows) {
  return batch_scratch_bytes(bf16_matrix_bytes(rows, cols) + x_slot_bytes(cols, max_m_rows));
}

void run_stream(const FormatTraits& format, int64_t rows, int64_t cols, const DeviceGemmJob* jobs, int n_jobs,
                void* scratch, void* stream) {
  const StreamLayout l = stream_layout_of(format);
  const bool chunk16 = l.group % 32 != 0;
  EQ_CHECK(l.group % 16 == 0 && (!chunk16 || l.bits == 4) && cols % l.group == 0,
           "GPU prefill: " + std::string(format.name) + ": " + std::to_string(l.bits) + "-bit codes in groups of " +
               std::to_string(l.group) + " over " + std::to_string(cols) + " columns");
  DequantParams p;
  p.rows = rows;
  p.cols = cols;
  p.group = l.group;
  p.scale_kind = static_cast<int>(l.scale_kind);
  p.has_tensor_scale = l.has_tensor_scale;
  for (uint32_t c = 0; c < (1u << l.bits); ++c) p.values[c] = l.codes->value(c);
  const cudaStream_t s = stream_of(stream);
  const size_t wb = bf16_matrix_bytes(rows, cols), xbytes = x_slot_bytes(cols, max_rows(jobs, n_jobs));
  const int per = gemm_batch(wb + xbytes);
  auto* wt = static_cast<__nv_bfloat16*>(scratch);
  auto* xb = reinterpret_cast<__nv_bfloat16*>(static_cast<char*>(scratch) + static_cast<size_t>(per) * wb);
  const size_t w_stride = wb / 2;  // values
  const int kind = (l.has_biases ? 100 : 0) + l.bits * (chunk16 ? -1 : 1);
  for_each_batch(jobs, n_jobs, per, [&](const GemmBatch& b, int n) {
    switch (kind) {
      case 102: launch_dequant<2, 32, true>(p, b, n, wt, w_stride, s); break;
      case 103: launch_dequant<3, 32, true>(p, b, n, wt, w_stride, s); break;
      case 104: launch_dequant<4, 32, true>(p, b, n, wt, w_stride, s); break;
      case 108: launch_dequant<8, 32, true>(p, b, n, wt, w_stride, s); break;
      case 4: launch_dequant<4, 32, false>(p, b, n, wt, w_stride, s); break;
      case -4: launch_dequant<4, 16, false>(p, b, n, wt, w_stride, s); break;
      default:
        fail(ErrorKind::kInternal, "GPU prefill: no kernel for " + std::to_string(l.bits) + "-bit stream codes" +
                                       (l.has_biases ? " with biases" : "") + (chunk16 ? " in groups of 16" : ""));
    }
    check_launch("stream dequantize kernel");
    const __nv_bfloat16* w[kGemmBatch];
    for (int j = 0; j < n; ++j) w[j] = wt + static_cast<size_t>(j) * w_stride;
    bf16_products(b, n, w, WeightLayout::kColsByRows, xb, xbytes, rows, cols, s);
  });
}

}  // namespace

const DeviceGemm kStreamDeviceGemm{run_stream, stream_scratch_bytes};

}  // namespace eq::quant::cuda
