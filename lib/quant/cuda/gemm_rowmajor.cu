// The GPU prefill product of the row-major formats (cuda_gemm.h): int8_row
// (qweight I8 [N, K], scales F32 [N]) as its integers in bf16 [N, K] (exact:
// they have at most 8 significant bits), the row scales applied to y's
// columns after the product, so W adds no rounding of its own; and bf16,
// whose stored weight [N, K] is the operand itself (no scratch for W).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "quant/cuda/gemm_dense.cuh"
#include "quant/cuda/gemv_common.cuh"

namespace eq::quant::cuda {

namespace {

// Q [N, K] = q in bf16 (exactly); grid-stride over the N * K elements.
__global__ void int8_to_bf16_kernel(const int8_t* __restrict__ q, int64_t count, __nv_bfloat16* __restrict__ w) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    w[i] = __float2bfloat16_rn(static_cast<float>(q[i]));
}

// y[r, n] *= scale[n] over m rows of N.
__global__ void scale_columns_kernel(float* __restrict__ y, int64_t m, int64_t N, const float* __restrict__ scales) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < m * N;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] *= __ldg(scales + i % N);
}

size_t int8_row_scratch_bytes(const FormatTraits&, int64_t rows, int64_t cols, int64_t max_m_rows) {
  return gemm_align(static_cast<size_t>(rows * cols) * 2) + gemm_align(static_cast<size_t>(max_m_rows * cols) * 2);
}

void run_int8_row(const FormatTraits&, int64_t rows, int64_t cols, const DeviceGemmJob* jobs, int n_jobs,
                  void* scratch, void* stream) {
  const cudaStream_t s = stream_of(stream);
  auto* w = static_cast<__nv_bfloat16*>(scratch);
  auto* xb = reinterpret_cast<__nv_bfloat16*>(static_cast<char*>(scratch) + gemm_align(static_cast<size_t>(rows * cols) * 2));
  const int64_t blocks = std::min<int64_t>((rows * cols + 255) / 256, 8192);
  for (int j = 0; j < n_jobs; ++j) {
    const DeviceGemmJob& job = jobs[j];
    if (job.m_rows <= 0) continue;
    int8_to_bf16_kernel<<<static_cast<unsigned>(blocks), 256, 0, s>>>(static_cast<const int8_t*>(job.parts[0]),
                                                                      rows * cols, w);
    check_launch("int8_row dequantize kernel");
    bf16_product(job.x, xb, w, WeightLayout::kRowsByCols, job.y, job.m_rows, rows, cols, s);
    const int64_t out_blocks = std::min<int64_t>((job.m_rows * rows + 255) / 256, 8192);
    scale_columns_kernel<<<static_cast<unsigned>(out_blocks), 256, 0, s>>>(job.y, job.m_rows, rows,
                                                                          static_cast<const float*>(job.parts[1]));
    check_launch("int8_row scale kernel");
  }
}

size_t bf16_scratch_bytes(const FormatTraits&, int64_t, int64_t cols, int64_t max_m_rows) {
  return gemm_align(static_cast<size_t>(max_m_rows * cols) * 2);
}

void run_bf16(const FormatTraits&, int64_t rows, int64_t cols, const DeviceGemmJob* jobs, int n_jobs, void* scratch,
              void* stream) {
  const cudaStream_t s = stream_of(stream);
  auto* xb = static_cast<__nv_bfloat16*>(scratch);
  for (int j = 0; j < n_jobs; ++j) {
    const DeviceGemmJob& job = jobs[j];
    if (job.m_rows <= 0) continue;
    bf16_product(job.x, xb, static_cast<const __nv_bfloat16*>(job.parts[0]), WeightLayout::kRowsByCols, job.y,
                 job.m_rows, rows, cols, s);
  }
}

}  // namespace

const DeviceGemm kInt8RowDeviceGemm{run_int8_row, int8_row_scratch_bytes};
const DeviceGemm kBf16DeviceGemm{run_bf16, bf16_scratch_bytes};

}  // namespace eq::quant::cuda
