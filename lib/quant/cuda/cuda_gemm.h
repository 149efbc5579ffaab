// The prefill (many tokens) matrix products on a CUDA GPU, one per layout
// family, reached through FormatTraits::device_gemm as the decode products
// are through device_gemv: y = x W^T for any number of rows of x, on the
// tensor cores. Each product dequantizes W from its stored parts into a
// bf16 operand in device scratch (the load-time form is the stored one: no
// repack is kept), rounds x to bf16 and multiplies through cuBLAS with
// float32 accumulation; the rotated (trellis) rows multiply in their rotated
// basis between the rotations of x and y, as their decode product does.
// docs/design.md, "GPU prefill".
//
// Against the format's `matmul` the result differs by the two bf16 roundings
// (x and W, 2^-9 of each factor; int8_row's W and bf16's are exact) and the
// float32 sums: at most
// (2^-8 + 2^-18 + 2 gamma(K)) times sum_k |W[n,k]| |x[k]| (in the rotated
// basis for rotated rows; tests/cuda/device_gemm_test.cpp).
//
// This header includes no CUDA header; unavailable.cpp defines the tables to
// throw in builds without EQ_CUDA.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/format.h"

namespace eq::quant {

// One product of a call: W's parts in device memory (FormatTraits::parts
// order, as stored), x [m_rows, cols] and y [m_rows, rows] row-major float32
// device arrays.
struct DeviceGemmJob {
  static constexpr int kMaxParts = 4;
  const void* parts[kMaxParts] = {};
  const float* x = nullptr;
  float* y = nullptr;
  int64_t m_rows = 0;
};

struct DeviceGemm {
  // Enqueues y_j = x_j W_j^T (overwriting y_j) for the n_jobs jobs, all of
  // `format` and of one shape [rows, cols], on `stream` (a cudaStream_t;
  // null: the calling thread's default stream), one after another through
  // `scratch` (device memory of scratch_bytes() bytes for the largest
  // m_rows). Jobs with m_rows 0 are skipped. Nothing is synchronized and
  // nothing is allocated. Results depend only on (W, x).
  void (*run)(const FormatTraits& format, int64_t rows, int64_t cols, const DeviceGemmJob* jobs, int n_jobs,
              void* scratch, void* stream) = nullptr;
  size_t (*scratch_bytes)(const FormatTraits& format, int64_t rows, int64_t cols, int64_t max_m_rows) = nullptr;
};

namespace cuda {

// gemm_stream.cu: the column bit-stream formats (fp4_gG, mxfp4, nvfp4, nl4,
// affine intB_gG). gemm_rowmajor.cu: int8_row and bf16 (whose stored matrix
// is the operand itself). gemm_trellis.cu: the trellis rows, both codes.
extern const DeviceGemm kStreamDeviceGemm;
extern const DeviceGemm kInt8RowDeviceGemm;
extern const DeviceGemm kBf16DeviceGemm;
extern const DeviceGemm kTrellisDeviceGemm;

}  // namespace cuda

}  // namespace eq::quant
