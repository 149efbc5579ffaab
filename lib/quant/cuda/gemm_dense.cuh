// What the GPU prefill products (gemm_*.cu) share: the jobs of a call taken in
// batches (each kernel before and after the products runs once a batch, its
// blocks indexing the batch's jobs by blockIdx.z, instead of once a job: a
// prefill's MoE call has hundreds of jobs of a few rows each, and their
// launches, not their work, had bound it), x rounded to bf16, and the bf16
// product on the tensor cores through cuBLAS with float32 accumulation; and
// the float32 product of the dense matrices (exec/cuda/device_linear.h).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "quant/cuda/cuda_gemm.h"

namespace eq::quant::cuda {

// Scratch offsets are multiples of this (cuBLAS wants 16-byte operands; 256
// keeps every operand on its own cache lines).
inline constexpr size_t kGemmAlign = 256;
inline size_t gemm_align(size_t bytes) { return (bytes + kGemmAlign - 1) / kGemmAlign * kGemmAlign; }

// Bytes of a dequantized bf16 W [rows, cols] in a batch's scratch.
inline size_t bf16_matrix_bytes(int64_t rows, int64_t cols) {
  return gemm_align(static_cast<size_t>(rows * cols) * 2);
}

// The most rows of x among n jobs.
inline int64_t max_rows(const DeviceGemmJob* jobs, int n) {
  int64_t m = 0;
  for (int j = 0; j < n; ++j) m = jobs[j].m_rows > m ? jobs[j].m_rows : m;
  return m;
}

// A job's slot of bf16 x in a batch's scratch: its rows rounded up to 16, so
// that the tile product's reads of a last partial tile stay in the slot.
inline size_t x_slot_bytes(int64_t cols, int64_t max_m_rows) {
  return gemm_align(static_cast<size_t>((max_m_rows + 15) / 16 * 16 * cols) * 2);
}

// A batch's jobs, as a kernel parameter (__grid_constant__).
inline constexpr int kGemmBatch = 32;
struct GemmBatch {
  DeviceGemmJob job[kGemmBatch];
};

// Jobs a batch takes when each needs `job_bytes` of scratch: at most
// kGemmBatch, and as many as keep the batch within kGemmBatchBytes (at
// least one).
inline constexpr size_t kGemmBatchBytes = size_t{128} << 20;
inline int gemm_batch(size_t job_bytes) {
  const size_t n = job_bytes == 0 ? kGemmBatch : kGemmBatchBytes / job_bytes;
  return static_cast<int>(n < 1 ? 1 : n > static_cast<size_t>(kGemmBatch) ? kGemmBatch : n);
}

// A call's scratch for jobs of up to `job_bytes` each: gemm_batch(b) * b is at
// most max(b, min(kGemmBatch * b, kGemmBatchBytes)) for every b <= job_bytes,
// so scratch sized for a call's largest rows also holds the batches of jobs
// with fewer (more of them a batch).
inline size_t batch_scratch_bytes(size_t job_bytes) {
  const size_t all = static_cast<size_t>(kGemmBatch) * job_bytes;
  const size_t capped = all < kGemmBatchBytes ? all : kGemmBatchBytes;
  return job_bytes > capped ? job_bytes : capped;
}

// Calls run(batch, n) for the jobs with rows (m_rows > 0), `per` at a time
// (per <= kGemmBatch), in order.
template <typename F>
void for_each_batch(const DeviceGemmJob* jobs, int n_jobs, int per, F&& run) {
  GemmBatch b;
  int n = 0;
  for (int j = 0; j < n_jobs; ++j) {
    if (jobs[j].m_rows <= 0) continue;
    b.job[n++] = jobs[j];
    if (n == per) {
      run(b, n);
      n = 0;
    }
  }
  if (n > 0) run(b, n);
}

// How the dequantized W is laid out.
enum class WeightLayout {
  kRowsByCols,  // W [rows, cols] row-major (W[n, k] at n * cols + k)
  kColsByRows,  // W^T [cols, rows] row-major (W[n, k] at k * rows + n)
};

// y [m, rows] = x [m, cols] W^T, x and W bf16, y float32 (overwritten, or
// added to when `accumulate`), on `s`, through the calling thread's cuBLAS
// handle of the current device.
void bf16_gemm(const __nv_bfloat16* x, const __nv_bfloat16* w, WeightLayout layout, float* y, int64_t m,
               int64_t rows, int64_t cols, cudaStream_t s, bool accumulate = false);

// y_j = x_j W_j^T (added to y_j when `accumulate`) for n products of one
// shape, x_j bf16 [m[j], cols] (in a slot of x_slot_bytes), W_j bf16 (layout),
// y_j float32: the jobs of up to kTileRows rows in one launch of a
// tensor-core kernel of our own when the shape is a multiple of 16 both ways
// (a warp a 16 x 16 tile of y), the others through bf16_gemm, a call each. A
// prefill's MoE call has hundreds of products of a few rows, and each cuBLAS
// call costs about 10 us of the host's time.
inline constexpr int64_t kTileRows = 64;
void bf16_gemms(int n, const __nv_bfloat16* const* x, const __nv_bfloat16* const* w, float* const* y,
                const int64_t* m, WeightLayout layout, int64_t rows, int64_t cols, cudaStream_t s,
                bool accumulate = false);

// y_j = x_j W_j^T for the batch's n jobs, W_j bf16 at w[j] (layout), each
// float32 x_j rounded to bf16 (round to nearest even) into xb + j * x_stride
// bytes (one launch for the batch), then bf16_gemms. Where split_x()
// (cuda_gpus.h: EXPERTQUANT_GPU_SPLIT_X, eval's quality passes) x's rounding
// residual, rounded to bf16 in turn, is multiplied and added as well: x then
// carries 16 significant bits instead of 8 (an error of 2^-17 of each value
// instead of 2^-9) at twice the tensor cores' work, which separates the error
// of x's rounding from that of W's in a measurement.
void bf16_products(const GemmBatch& b, int n, const __nv_bfloat16* const* w, WeightLayout layout, __nv_bfloat16* xb,
                   size_t x_stride, int64_t rows, int64_t cols, cudaStream_t s);

// y [m, rows] = x [m, cols] W^T for W [rows, cols] row-major, all float32
// (no TF32: cuBLAS's float32 compute), y overwritten, on `s`, through the
// calling thread's cuBLAS handle of the current device. Row t of y starts at
// y + t * ldy (0: rows), so a product of some of a matrix's rows can fill
// its columns of a wider y.
void f32_gemm(const float* x, const float* w, float* y, int64_t m, int64_t rows, int64_t cols, cudaStream_t s,
              int64_t ldy = 0);

}  // namespace eq::quant::cuda
