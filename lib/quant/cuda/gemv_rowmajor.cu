// The GPU decode product of the row-major formats: int8_row (qweight I8
// [N, K], scales F32 [N]: W = q * scale[n]) and bf16 (weight BF16 [N, K]),
// read as stored (docs/formats.md, "int8 / bf16 passthrough").
//
// One warp per output row: the lanes read the row in 16-byte pieces
// (coalesced), multiply by x in float32 and meet in a butterfly sum (fixed
// order). K need not be a multiple of anything (these rows take any shape):
// when a row does not start on 16 bytes the lanes read it element by element.
#include <cuda_runtime.h>

#include <cstring>
#include <string>

#include "core/error.h"
#include "quant/cuda/gemv_mixed.cuh"
#include "quant/cuda/gemv_rowmajor.cuh"

namespace eq::quant::cuda {

namespace rowmajor {

namespace {

template <typename E, bool kScaled, int MB>
__global__ void __launch_bounds__(32 * kWarps) rowmajor_gemv_kernel(const RowParams p,
                                                                       const __grid_constant__ LaunchJobs jobs) {
  rowmajor_gemv_block<E, kScaled, MB, false>(p, jobs.job[blockIdx.y], blockIdx.x, nullptr);
}

template <typename E, bool kScaled>
void run_rowmajor(const FormatTraits& format, int64_t rows, int64_t cols, const DeviceGemvJob* jobs, int n_jobs,
                  int m_rows, void*, void* stream) {
  check_call(format, m_rows, "GPU decode");
  RowParams p;
  p.rows = rows;
  p.cols = cols;
  p.m_rows = m_rows;
  p.batch = load_batch(kBatch);
  EQ_CHECK(!gated_call(format, jobs, n_jobs, m_rows, cols),
           "GPU decode: " + std::string(format.name) + " takes no gated input (DeviceGemv::gated_input)");
  const cudaStream_t s = stream_of(stream);
  for_each_launch(jobs, n_jobs, [&](const LaunchJobs& batch, int n) {
    const dim3 grid(static_cast<unsigned>((rows + kWarps - 1) / kWarps), static_cast<unsigned>(n));
    const dim3 block(32, kWarps);
    switch (rows_bucket(m_rows)) {
      case 1: rowmajor_gemv_kernel<E, kScaled, 1><<<grid, block, 0, s>>>(p, batch); break;
      case 2: rowmajor_gemv_kernel<E, kScaled, 2><<<grid, block, 0, s>>>(p, batch); break;
      case 4: rowmajor_gemv_kernel<E, kScaled, 4><<<grid, block, 0, s>>>(p, batch); break;
      default: rowmajor_gemv_kernel<E, kScaled, 8><<<grid, block, 0, s>>>(p, batch); break;
    }
    check_launch("row-major decode kernel");
  });
}

// A block of the launch of several formats (gemv_mixed.cuh), where a gated
// input is staged per block.
template <Body kBody>
void segment_of(const FormatTraits&, int64_t rows, int64_t cols, int m_rows, bool, GemvSegment& seg) {
  seg.family = GemvSegment::Family::kRowMajor;
  seg.body = static_cast<int>(kBody);
  seg.row.rows = rows;
  seg.row.cols = cols;
  seg.row.m_rows = m_rows;
  seg.row.batch = load_batch(kBatch);
  seg.blocks_per_job = static_cast<int>((rows + kWarps - 1) / kWarps);
}

}  // namespace

}  // namespace rowmajor

// No gated input (DeviceGemvJob::x_up) in their own launches: a block of 8
// output rows would form the whole input again for every 8 outputs
// (measured: bf16 29.1 -> 32.6 us a step, int8_row 32.1 -> 35.9;
// docs/benchmarks.md, "GPU decode"). In a launch of several formats they
// stage it as the others do (one launch fewer for the whole call).
const DeviceGemv kInt8RowDeviceGemv{rowmajor::run_rowmajor<int8_t, true>, nullptr, false,
                                    rowmajor::segment_of<rowmajor::Body::kInt8>};
const DeviceGemv kBf16DeviceGemv{rowmajor::run_rowmajor<uint16_t, false>, nullptr, false,
                                 rowmajor::segment_of<rowmajor::Body::kBf16>};

}  // namespace eq::quant::cuda
