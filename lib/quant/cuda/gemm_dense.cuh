// What the GPU prefill products (gemm_*.cu) share: x rounded to bf16, and the
// bf16 product on the tensor cores through cuBLAS with float32 accumulation;
// and the float32 product of the dense matrices (exec/cuda/device_linear.h).
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

// out[i] = bf16(in[i]) (round to nearest even), count values, on `s`.
void round_to_bf16(const float* in, __nv_bfloat16* out, int64_t count, cudaStream_t s);

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

// y = x W^T for float32 x [m, cols] and bf16 W: x rounded to bf16 in `xb`
// (scratch of m * cols values), then bf16_gemm. With
// EXPERTQUANT_GPU_SPLIT_X=1 (read once) x's rounding residual, rounded to
// bf16 in turn, is multiplied and added as well: x then carries 16
// significant bits instead of 8 (an error of 2^-17 of each value instead of
// 2^-9) at twice the tensor cores' work, which separates the error of x's
// rounding from that of W's in a measurement.
void bf16_product(const float* x, __nv_bfloat16* xb, const __nv_bfloat16* w, WeightLayout layout, float* y,
                  int64_t m, int64_t rows, int64_t cols, cudaStream_t s);

// y [m, rows] = x [m, cols] W^T for W [rows, cols] row-major, all float32
// (no TF32: cuBLAS's float32 compute), y overwritten, on `s`, through the
// calling thread's cuBLAS handle of the current device.
void f32_gemm(const float* x, const float* w, float* y, int64_t m, int64_t rows, int64_t cols, cudaStream_t s);

}  // namespace eq::quant::cuda
