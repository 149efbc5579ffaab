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

// Job z's Q [N, K] = q in bf16 (exactly) into w + z * w_stride values.
__global__ void int8_to_bf16_kernel(const __grid_constant__ GemmBatch b, int64_t count, __nv_bfloat16* w,
                                    size_t w_stride) {
  const auto* q = static_cast<const int8_t*>(b.job[blockIdx.z].parts[0]);
  __nv_bfloat16* out = w + blockIdx.z * w_stride;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16_rn(static_cast<float>(q[i]));
}

// Job z's y[r, n] *= scale[n] over its m rows of N.
__global__ void scale_columns_kernel(const __grid_constant__ GemmBatch b, int64_t N) {
  const DeviceGemmJob& job = b.job[blockIdx.z];
  const auto* scales = static_cast<const float*>(job.parts[1]);
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < job.m_rows * N;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    job.y[i] *= __ldg(scales + i % N);
}

// A job's scratch: Q [N, K] (int8_row only) and x bf16 [m, K]; a batch's,
// the jobs' Q one after another, then their x.
size_t int8_row_scratch_bytes(const FormatTraits&, int64_t rows, int64_t cols, int64_t max_m_rows) {
  return batch_scratch_bytes(bf16_matrix_bytes(rows, cols) + x_slot_bytes(cols, max_m_rows));
}

void run_int8_row(const FormatTraits&, int64_t rows, int64_t cols, const DeviceGemmJob* jobs, int n_jobs,
                  void* scratch, void* stream) {
  const cudaStream_t s = stream_of(stream);
  const size_t qb = bf16_matrix_bytes(rows, cols), xbytes = x_slot_bytes(cols, max_rows(jobs, n_jobs));
  const int per = gemm_batch(qb + xbytes);
  auto* w = static_cast<__nv_bfloat16*>(scratch);
  auto* xb = reinterpret_cast<__nv_bfloat16*>(static_cast<char*>(scratch) + static_cast<size_t>(per) * qb);
  const size_t w_stride = qb / 2;
  for_each_batch(jobs, n_jobs, per, [&](const GemmBatch& b, int n) {
    const dim3 grid(static_cast<unsigned>(std::min<int64_t>((rows * cols + 255) / 256, 8192)), 1,
                    static_cast<unsigned>(n));
    int8_to_bf16_kernel<<<grid, 256, 0, s>>>(b, rows * cols, w, w_stride);
    check_launch("int8_row dequantize kernel");
    const __nv_bfloat16* ws[kGemmBatch];
    for (int j = 0; j < n; ++j) ws[j] = w + static_cast<size_t>(j) * w_stride;
    bf16_products(b, n, ws, WeightLayout::kRowsByCols, xb, xbytes, rows, cols, s);
    const int64_t max_m = max_rows(b.job, n);
    const dim3 out_grid(static_cast<unsigned>(std::min<int64_t>((max_m * rows + 255) / 256, 8192)), 1,
                        static_cast<unsigned>(n));
    scale_columns_kernel<<<out_grid, 256, 0, s>>>(b, rows);
    check_launch("int8_row scale kernel");
  });
}

size_t bf16_scratch_bytes(const FormatTraits&, int64_t, int64_t cols, int64_t max_m_rows) {
  return batch_scratch_bytes(x_slot_bytes(cols, max_m_rows));
}

void run_bf16(const FormatTraits&, int64_t rows, int64_t cols, const DeviceGemmJob* jobs, int n_jobs, void* scratch,
              void* stream) {
  const cudaStream_t s = stream_of(stream);
  const size_t xbytes = x_slot_bytes(cols, max_rows(jobs, n_jobs));
  auto* xb = static_cast<__nv_bfloat16*>(scratch);
  for_each_batch(jobs, n_jobs, gemm_batch(xbytes), [&](const GemmBatch& b, int n) {
    const __nv_bfloat16* ws[kGemmBatch];
    for (int j = 0; j < n; ++j) ws[j] = static_cast<const __nv_bfloat16*>(b.job[j].parts[0]);
    bf16_products(b, n, ws, WeightLayout::kRowsByCols, xb, xbytes, rows, cols, s);
  });
}

}  // namespace

const DeviceGemm kInt8RowDeviceGemm{run_int8_row, int8_row_scratch_bytes};
const DeviceGemm kBf16DeviceGemm{run_bf16, bf16_scratch_bytes};

}  // namespace eq::quant::cuda
