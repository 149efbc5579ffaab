// The decode (few tokens) matrix products on a CUDA GPU, one per layout
// family, reached through FormatTraits::device_gemv as the CPU's `gemv`
// kernels are through FormatTraits::gemv: y = x W^T for M <= 8 rows of x,
// computed straight from the parts as the CPU quantizer stores them
// (docs/formats.md; no repack). The x a product multiplies is the CPU decode
// kernel's: int8 in blocks of 32 for the stream rows of 2, 4 and 8 bits and
// int8_row (the same integers, device_gemv_int8_input), float32 for the
// others (3-bit affine, bf16; trellis rotates x first), so the
// result equals the format's `gemv` (or its `matmul`) to float32 rounding.
// docs/design.md, "GPU decode kernels".
//
// This header includes no CUDA header: the rows and the (CUDA-less) tests
// name these tables; unavailable.cpp defines them to throw in builds without
// EQ_CUDA.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/format.h"

namespace eq::quant {

// Rows of x one device call takes (the decode path's M).
inline constexpr int kMaxDeviceGemvRows = 8;

// Floats of a gated input (m_rows * cols) a call may take, for every family:
// a block of the 3-bit rows stages it as floats in 32 KB of shared memory
// (beside the kernels' own 16 KB at most); the int8 rows quantize it as they
// stage or quantize their x, and would take more.
inline constexpr int64_t kMaxGatedInput = 8192;

// One product of a grouped call: W's parts in device memory, in
// FormatTraits::parts order (as stored), x [m_rows, cols] and y [m_rows, rows]
// row-major float32 device arrays. With x_up (also [m_rows, cols]) the
// product's input is the gated x: silu(x) * x_up element by element
// (SwiGLU, as swiglu_device in gemv_common.cuh computes it), formed as the
// kernel reads its input, so that no separate launch writes it; then
// m_rows * cols <= kMaxGatedInput, every job of a call has x_up or none, and
// the family takes it with m_rows rows (DeviceGemv::gated_rows).
struct DeviceGemvJob {
  static constexpr int kMaxParts = 4;
  const void* parts[kMaxParts] = {};
  const float* x = nullptr;
  const float* x_up = nullptr;
  float* y = nullptr;
};

// The jobs of a routed launch (DeviceGemv::run_routed), as data in device
// memory the host never reads: the router's expert ids of `pairs` pairs
// (token t's top_k choices are pairs t * top_k ..), each expert's bit group
// and products, and where a pair's rows go. Job j of a launch of group
// `group` is pair p's when that pair's expert is in the group (else it is
// dead):
//   kGateUp: p = j / 2, j even: gate, odd: up; x = x + (p / top_k) * x_stride,
//            y = (even ? y_gate : y_up) + p * y_stride;
//   kDown:   p = j; x = x + p * x_stride (x_up likewise, when not null),
//            y = y_gate + p * y_stride.
struct RoutedPairs {
  enum Step : int32_t { kGateUp = 0, kDown = 1 };
  const int32_t* expert_ids = nullptr;  // [pairs]
  const int32_t* group_of = nullptr;    // [experts]: -1 for pruned experts
  const DeviceGemvJob* products = nullptr;  // [experts][3]: gate, up, down (parts only)
  int32_t experts = 0, top_k = 1, group = 0;
  Step step = kGateUp;
  const float* x = nullptr;
  const float* x_up = nullptr;
  int64_t x_stride = 0;
  float *y_gate = nullptr, *y_up = nullptr;
  int64_t y_stride = 0;
  // Device memory of routed_x_bytes(rows of x, cols) bytes a family may
  // quantize x into once for its launch (run_routed; null: its blocks stage
  // x themselves), in stream order; and, set by the family for its launch,
  // where that x lies (row r of x at xq + r * xq_stride) or null.
  unsigned char* x_scratch = nullptr;
  const unsigned char* xq = nullptr;
  size_t xq_stride = 0;
};

// Bytes of RoutedPairs::x_scratch for `rows` rows of x of `cols` (kGateUp:
// the tokens, kDown: the pairs), whatever the family's layout of int8 x.
size_t routed_x_bytes(int64_t rows, int64_t cols);

namespace cuda {
struct GemvSegment;  // a format's part of a launch of several formats (gemv_mixed.cuh)
}  // namespace cuda

struct DeviceGemv {
  // Enqueues y_j = x_j W_j^T (overwriting y_j) for the n_jobs jobs, all of
  // `format` and of one shape [rows, cols] (the experts of one projection), on
  // `stream` (a cudaStream_t; null: the calling thread's default stream);
  // 1 <= m_rows <= kMaxDeviceGemvRows. `scratch`: device memory of
  // scratch_bytes() bytes, used in stream order (null when that is 0).
  // Nothing is synchronized and nothing is allocated. Results depend only on
  // (W, x): not on n_jobs, the other jobs or the launch.
  void (*run)(const FormatTraits& format, int64_t rows, int64_t cols, const DeviceGemvJob* jobs, int n_jobs,
              int m_rows, void* scratch, void* stream) = nullptr;
  // The scratch bytes run() needs for such a call (null: none).
  size_t (*scratch_bytes)(const FormatTraits& format, int64_t rows, int64_t cols, int n_jobs, int m_rows) = nullptr;
  // The most rows of x with which run() takes jobs with a gated input
  // (DeviceGemvJob::x_up; 0: none); it throws for more. int8_row takes one
  // (gemv_rowmajor.cu says why), bf16 none.
  int gated_rows = 0;
  // Null, or the family runs in a launch of several formats
  // (cuda::run_gemv_calls, cuda::run_routed_calls; one row of x): fills
  // `segment` with what its blocks need for such a call (`gated`: its jobs
  // carry x_up). In such a launch its blocks stage their one row of x
  // themselves (no scratch), a gated input too (gated_rows >= 1).
  void (*segment)(const FormatTraits& format, int64_t rows, int64_t cols, int m_rows, bool gated,
                  cuda::GemvSegment& segment) = nullptr;
  // Null, or run() for routed jobs (exec/cuda/device_moe.h, "routed
  // decode"): the jobs of `pairs` (RoutedPairs, its arrays written on the
  // GPU by earlier work on `stream`), one row of x each. The launch has
  // blocks for every job a group could have (2 * pairs for kGateUp, pairs
  // for kDown); those of dead jobs return at once. Each live y gets the bits
  // run() gives it with one row of x. Scratch: RoutedPairs::x_scratch.
  void (*run_routed)(const FormatTraits& format, int64_t rows, int64_t cols, const RoutedPairs& pairs,
                     int n_pairs, void* stream) = nullptr;
};

// One format's jobs in a launch of several formats.
struct DeviceGemvCall {
  const FormatTraits* format = nullptr;
  const DeviceGemvJob* jobs = nullptr;
  int n_jobs = 0;
};

namespace cuda {

// The column bit-stream formats (fp4_gG, mxfp4, nvfp4, nl4, affine intB_gG):
// everything format-specific comes from the row's bits, group and
// StreamEncoding (packed_stream.h). gemv_stream.cu.
extern const DeviceGemv kStreamDeviceGemv;
// Whether `format`'s GPU decode multiplies x quantized to int8 (as the CPU's
// decode kernels do, gemv.h: blocks of 32, an fp32 scale each, the same
// integers) rather than float32 x: the stream rows of 2, 4 and 8 bits, and
// int8_row.
bool device_gemv_int8_input(const FormatTraits& format);
// That int8 x, as such a format's products read it (for the tests): x
// [m_rows, cols] (device floats) quantized into `out` (device memory of
// int8_x_bytes bytes): each row of cols rounded up to 32 bytes in the order
// the format's codes meet it (4-bit affine: codes 0 2 4 6 | 1 3 5 7 of each 8;
// 2-bit: 0 4 8 12 | 1 5 9 13 | ... of each 16; 4-bit tables: each 4 x twice,
// times the sign of the table's codes 0-7, then of 8-15; else in order), then
// every block's scale (float), then the sums of q over each 16 (int32).
// Synchronizes.
size_t int8_x_bytes(const FormatTraits& format, int m_rows, int64_t cols);
void quantize_x_int8(const FormatTraits& format, const float* x, int m_rows, int64_t cols, void* out);
// int8_row (int8 [N, K] with an fp32 scale per row) and bf16 ([N, K]).
// gemv_rowmajor.cu.
extern const DeviceGemv kInt8RowDeviceGemv;
extern const DeviceGemv kBf16DeviceGemv;
// The trellis rows, both codes (the row's code): input rotation, tile decode,
// output rotation. trellis_gemv.cu.
extern const DeviceGemv kTrellisDeviceGemv;

// Enqueues the calls (each of its own format, every format with a
// DeviceGemv::segment; all of the shape [rows, cols]; m_rows must be 1) as
// few launches (one for up to 32 jobs of up to 6 formats): every block runs
// its format's body, so each y has the bits the format's own run() gives it.
// One launch a projection step where each bit group would take its own; a
// call's jobs carry a gated input all or none. gemv_mixed.cu.
void run_gemv_calls(int64_t rows, int64_t cols, int m_rows, const DeviceGemvCall* calls, int n_calls, void* stream);
// The routed form of run_gemv_calls (exec/cuda/device_moe.h, "routed
// decode"): the jobs of `pairs` (RoutedPairs; its `group` is not read) whose
// expert is in a bit group g with formats[g] not null (n_groups entries, at
// most kMaxRoutedGroups; each a format with a DeviceGemv::segment) run in one
// launch, each by its format's body, so that each live y gets the bits its
// format's own run() gives it; the jobs of the other pairs are dead. One row
// of x, the shape [rows, cols]; with pairs.x_up every job takes the gated
// input. Enqueued on `stream`; the host reads nothing. gemv_mixed.cu.
inline constexpr int kMaxRoutedGroups = 8;
void run_routed_calls(int64_t rows, int64_t cols, const FormatTraits* const* formats, int n_groups,
                      const RoutedPairs& pairs, int n_pairs, void* stream);
// The blocks one job of `format` [rows, cols] takes in a launch of several
// formats (-1: the format takes no part), and the blocks the current GPU runs
// at once there (its SMs times the blocks an SM holds of that kernel: 80
// registers a thread, so 3 of 256 threads, where the 4-bit rows' own kernels
// hold 4).
int64_t mixed_gemv_blocks(const FormatTraits& format, int64_t rows, int64_t cols);
int64_t mixed_gemv_wave();

}  // namespace cuda

}  // namespace eq::quant
