// The GPU decode product of the row-major formats: int8_row (qweight I8
// [N, K], scales F32 [N]: W = q * scale[n]) and bf16 (weight BF16 [N, K]),
// read as stored (docs/formats.md, "int8 / bf16 passthrough").
//
// A warp takes 4 output rows (kRowsPerWarp): its lanes read the
// rows in 16-byte pieces (coalesced), the pieces of the 4 rows at one place
// of K together, so that each piece of x serves 4 rows; each row's sums meet
// in a butterfly sum (fixed order). K need not be a multiple of anything
// (these rows take any shape): when rows do not all start on 16 bytes a warp
// takes one row, read element by element where it is not aligned.
//
// int8_row multiplies x as the CPU's decode kernel does: int8 in blocks of 32
// with an fp32 scale (int8_input.cuh: x, or one row's gated input, quantized
// once a call into the scratch or, for launches of one wave and launches of
// several formats, one row by each block), a piece's 16
// products summed exactly by 4 dp4a and scaled by its block's x scale:
// y[n] = scale[n] * sum_pieces x_scale * sum q w. bf16 multiplies float32 x.
// The block's work is gemv_rowmajor.cuh's, which launches of several formats
// (gemv_mixed.cu) run too.
#include <cuda_runtime.h>

#include <string>
#include <type_traits>

#include "core/error.h"
#include "quant/cuda/gemv_mixed.cuh"

namespace eq::quant::cuda {

namespace {

using rowmajor::kBatch;
using rowmajor::kRowsPerWarp;
using rowmajor::kThreads;
using rowmajor::kWarps;
using rowmajor::RowParams;

constexpr int kOneRowBlocksPerMultiprocessor = 3;  // the one-row kernels' launch bounds

// Jobs: LaunchJobs, or RoutedJobs (one row of x). X_ONCE: int8_row's x
// quantized once a call (rowmajor_gemv_block), as the stream kernel's.
template <typename E, bool kScaled, int MB, bool X_ONCE, typename Jobs>
__global__ void __launch_bounds__(kThreads, MB == 1 ? kOneRowBlocksPerMultiprocessor : 1)
    rowmajor_gemv_kernel(const RowParams p, const __grid_constant__ Jobs jobs) {
  extern __shared__ __align__(16) unsigned char stage[];
  // The next grid is placed once all these blocks exit (cuda_common.cuh);
  // X_ONCE: the block waits once its first loads of weights are issued.
  if constexpr (!X_ONCE) wait_for_previous_grid();
  if (!jobs.live(blockIdx.y)) {  // the whole block; it still waits (the stream kernel says why)
    if constexpr (X_ONCE) wait_for_previous_grid();
    return;
  }
  const unsigned char* area = X_ONCE ? once_area(jobs, p.xq, p.xq_stride, blockIdx.y) : nullptr;
  rowmajor::rowmajor_gemv_block<E, kScaled, MB, X_ONCE>(p, jobs.at(blockIdx.y), blockIdx.x, stage, area);
}

// int8_row: the scratch holds x quantized once a call (int8_input.cu), whether quantize_once takes it or not.
size_t int8_row_scratch(const FormatTraits&, int64_t, int64_t cols, int n_jobs, int m_rows) {
  return static_cast<size_t>(n_jobs) * int8_job_stride(XLayout::kNatural, m_rows, cols);
}

template <typename E>
RowParams row_params(int64_t rows, int64_t cols, int m_rows) {
  RowParams p;
  p.rows = rows;
  p.cols = cols;
  p.m_rows = m_rows;
  p.batch = load_batch(kBatch);
  p.rows_per_warp = (cols * static_cast<int64_t>(sizeof(E))) % 16 == 0 ? kRowsPerWarp : 1;
  return p;
}

dim3 row_grid(const RowParams& p, int n_jobs) {
  const int64_t per_block = kWarps * p.rows_per_warp;
  return dim3(static_cast<unsigned>((p.rows + per_block - 1) / per_block), static_cast<unsigned>(n_jobs));
}

template <typename E, bool kScaled>
void run_rowmajor(const FormatTraits& format, int64_t rows, int64_t cols, const DeviceGemvJob* jobs, int n_jobs,
                  int m_rows, void* scratch, void* stream) {
  check_call(format, m_rows, "GPU decode");
  constexpr bool kInt8 = std::is_same_v<E, int8_t>;
  RowParams p = row_params<E>(rows, cols, m_rows);
  gated_call(format, jobs, n_jobs, m_rows, cols);  // checks: int8_row stages a gated row of x as it stages x
  const cudaStream_t s = stream_of(stream);
  size_t stride = 0;
  if (kInt8 && quantize_once(m_rows, n_jobs, row_grid(p, 1).x, kOneRowBlocksPerMultiprocessor)) {
    EQ_CHECK(scratch != nullptr, "GPU decode: " + std::string(format.name) + ": no scratch for the int8 x");
    quantize_jobs(XLayout::kNatural, jobs, n_jobs, m_rows, cols, 1, 1, scratch, s);
    stride = int8_job_stride(XLayout::kNatural, m_rows, cols);
  }
  const size_t smem = kInt8 && m_rows == 1 ? int8_stage_bytes(XLayout::kNatural, 1, cols) : 0;  // staged or copied
  for_each_launch(jobs, n_jobs, [&](const LaunchJobs& batch, int n, int j0) {
    if (stride != 0) p.xq = static_cast<const unsigned char*>(scratch) + static_cast<size_t>(j0) * stride, p.xq_stride = stride;
    const dim3 grid = row_grid(p, n);
    auto launch = [&](auto kernel) {
      prepare_shared_bytes(reinterpret_cast<const void*>(kernel), smem, format.name, cols);
      launch_kernel("row-major decode kernel", kernel, grid, dim3(kThreads), smem, s, p, batch);
    };
    // int8 x quantized once a call (every call of several rows) or staged by each block; bf16 reads float x.
    switch (rows_bucket(m_rows)) {
      case 1:
        if (stride != 0) launch(rowmajor_gemv_kernel<E, kScaled, 1, kInt8, LaunchJobs>);
        else launch(rowmajor_gemv_kernel<E, kScaled, 1, false, LaunchJobs>);
        break;
      case 2: launch(rowmajor_gemv_kernel<E, kScaled, 2, kInt8, LaunchJobs>); break;
      case 4: launch(rowmajor_gemv_kernel<E, kScaled, 4, kInt8, LaunchJobs>); break;
      default: launch(rowmajor_gemv_kernel<E, kScaled, 8, kInt8, LaunchJobs>); break;
    }
  });
}

template <typename E, bool kScaled>
void run_rowmajor_routed(const FormatTraits& format, int64_t rows, int64_t cols, const RoutedPairs& pairs,
                         int n_pairs, void* stream) {
  gated_routed_call(format, pairs, cols);  // int8_row forms a gated row of x where it quantizes x
  constexpr bool kInt8 = std::is_same_v<E, int8_t>;
  const RowParams p = row_params<E>(rows, cols, 1);
  const size_t smem = kInt8 ? int8_stage_bytes(XLayout::kNatural, 1, cols) : 0;
  const cudaStream_t s = stream_of(stream);
  RoutedPairs r = pairs;
  const int n_jobs = RoutedJobs(pairs, n_pairs).jobs;
  if (kInt8 && pairs.x_scratch != nullptr &&
      quantize_once(1, n_jobs, row_grid(p, 1).x, kOneRowBlocksPerMultiprocessor))
    quantize_routed(XLayout::kNatural, r, n_pairs, cols, 1, 1, s);
  const RoutedJobs jobs(r, n_pairs);
  auto launch = [&](auto kernel) {
    prepare_shared_bytes(reinterpret_cast<const void*>(kernel), smem, format.name, cols);
    launch_kernel("row-major decode kernel", kernel, row_grid(p, jobs.jobs), dim3(kThreads), smem, s, p, jobs);
  };
  if (r.xq != nullptr) launch(rowmajor_gemv_kernel<E, kScaled, 1, kInt8, RoutedJobs>);
  else launch(rowmajor_gemv_kernel<E, kScaled, 1, false, RoutedJobs>);
}

// A block of a launch of several formats (gemv_mixed.cuh): int8_row only.
// A gated input needs nothing here: the staging reads each job's x_up.
void int8_row_segment(const FormatTraits&, int64_t rows, int64_t cols, int m_rows, bool /*gated*/,
                      GemvSegment& seg) {
  seg.family = GemvSegment::kInt8Row;
  seg.row = row_params<int8_t>(rows, cols, m_rows);
  seg.blocks_per_job = static_cast<int>(row_grid(seg.row, 1).x);
  seg.stage_bytes = int8_stage_bytes(XLayout::kNatural, m_rows, cols);
}

}  // namespace

// int8_row takes a gated input (DeviceGemvJob::x_up) with one row of x,
// formed where x is quantized (once a call, or by each block). With 2 to 8
// rows quantize_jobs could form it too, but a gated input at several rows
// measured slower when each block formed it (int8_row at M = 4 74.0 against
// 68.9 us a layer, docs/benchmarks.md, "GPU MoE layer"), before x was
// quantized once a call; not measured since, so one row. bf16 reads its
// float x where it stands: no gated input, no part in launches of several
// formats.
const DeviceGemv kInt8RowDeviceGemv{run_rowmajor<int8_t, true>, int8_row_scratch, 1, int8_row_segment,
                                    run_rowmajor_routed<int8_t, true>};
const DeviceGemv kBf16DeviceGemv{run_rowmajor<uint16_t, false>, nullptr, 0, nullptr,
                                 run_rowmajor_routed<uint16_t, false>};

}  // namespace eq::quant::cuda
