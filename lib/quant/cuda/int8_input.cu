// The quantization of x once a call (int8_input.cuh): one launch for all the
// jobs of a decode call whose jobs the host knows, whose blocks then read it
// instead of each quantizing it again (docs/benchmarks.md, "GPU decode": at
// one row, most of a step's time; at 8 rows of K = 7168, longer than the
// products).
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>

#include "core/env_switch.h"
#include "quant/cuda/cuda_gpus.h"
#include "quant/cuda/int8_input.cuh"

namespace eq::quant::cuda {

namespace {

constexpr int kQuantizeThreads = 256;

template <XLayout L>
__global__ void __launch_bounds__(kQuantizeThreads)
    quantize_jobs_kernel(const __grid_constant__ LaunchJobs jobs, int m_rows, uint32_t K, int sign_lo, int sign_hi,
                         unsigned char* scratch, size_t stride) {
  start_after_previous_grid();  // a short kernel: the products after it are placed at once (cuda_common.cuh)
  const uint32_t units = int8_units(m_rows, K), u = blockIdx.x * kQuantizeThreads + threadIdx.x;
  quantize_unit<L>(jobs.job[blockIdx.y], scratch + blockIdx.y * stride, m_rows, K, u, u < units, sign_lo, sign_hi);
}

// Row blockIdx.y of a routed call's x (its token's, kGateUp; its pair's with
// the gated input, kDown, when the pair's expert is in the launch's group).
template <XLayout L>
__global__ void __launch_bounds__(kQuantizeThreads)
    quantize_routed_kernel(const __grid_constant__ RoutedPairs r, uint32_t K, int sign_lo, int sign_hi,
                           unsigned char* scratch, size_t stride) {
  start_after_previous_grid();  // as quantize_jobs_kernel
  const uint32_t units = int8_units(1, K), u = blockIdx.x * kQuantizeThreads + threadIdx.x;
  const int64_t row = blockIdx.y;
  if (r.step == RoutedPairs::kDown) {  // only the group's pairs: other lanes may be writing the others' rows
    const int32_t e = r.expert_ids[row];
    if (e < 0 || e >= r.experts || r.group_of[e] != r.group) return;  // the whole block
  }
  DeviceGemvJob job;
  job.x = r.x + row * r.x_stride;
  if (r.step == RoutedPairs::kDown && r.x_up != nullptr) job.x_up = r.x_up + row * r.x_stride;
  quantize_unit<L>(job, scratch + static_cast<size_t>(row) * stride, 1, K, u, u < units, sign_lo, sign_hi);
}

using QuantizeKernel = void (*)(LaunchJobs, int, uint32_t, int, int, unsigned char*, size_t);
using QuantizeRoutedKernel = void (*)(RoutedPairs, uint32_t, int, int, unsigned char*, size_t);

QuantizeRoutedKernel routed_kernel_of(XLayout layout) {
  switch (layout) {
    case XLayout::kNib: return quantize_routed_kernel<XLayout::kNib>;
    case XLayout::kCrumb: return quantize_routed_kernel<XLayout::kCrumb>;
    case XLayout::kSplitTable: return quantize_routed_kernel<XLayout::kSplitTable>;
    default: return quantize_routed_kernel<XLayout::kNatural>;
  }
}

QuantizeKernel kernel_of(XLayout layout) {
  switch (layout) {
    case XLayout::kNib: return quantize_jobs_kernel<XLayout::kNib>;
    case XLayout::kCrumb: return quantize_jobs_kernel<XLayout::kCrumb>;
    case XLayout::kSplitTable: return quantize_jobs_kernel<XLayout::kSplitTable>;
    default: return quantize_jobs_kernel<XLayout::kNatural>;
  }
}

// -1: by the rule; 0: never at one row; 1: always. EXPERTQUANT_GPU_QUANTIZE_ONCE
// at first, read as every switch is (core/env_switch.h), unset meaning the rule.
std::atomic<int> quantize_once_mode{env_switch_or_unset("EXPERTQUANT_GPU_QUANTIZE_ONCE")};

}  // namespace

int set_quantize_once(int mode) { return quantize_once_mode.exchange(mode < 0 ? -1 : mode > 0 ? 1 : 0); }

bool quantize_once(int m_rows, int n_jobs, int64_t blocks_per_job, int blocks_per_multiprocessor) {
  const int mode = quantize_once_mode.load();
  if (m_rows > 1 || mode == 1) return true;
  const int64_t blocks = std::min(n_jobs, kJobsPerLaunch) * blocks_per_job;
  return mode < 0 && blocks > static_cast<int64_t>(multiprocessor_count()) * blocks_per_multiprocessor;
}

size_t int8_job_stride(XLayout layout, int m_rows, int64_t K) {
  return (int8_stage_bytes(layout, m_rows, K) + 255) / 256 * 256;
}

void quantize_routed(XLayout layout, RoutedPairs& r, int n_pairs, int64_t K, int sign_lo, int sign_hi,
                     cudaStream_t stream) {
  const int rows = r.step == RoutedPairs::kGateUp ? n_pairs / r.top_k : n_pairs;
  const size_t stride = int8_job_stride(layout, 1, K);
  const uint32_t k = static_cast<uint32_t>(K), units = int8_units(1, k);
  const dim3 grid((units + kQuantizeThreads - 1) / kQuantizeThreads, static_cast<unsigned>(rows));
  launch_kernel("int8 quantization of a routed call's x", routed_kernel_of(layout), grid, dim3(kQuantizeThreads), 0,
                stream, r, k, sign_lo, sign_hi, r.x_scratch, stride);
  r.xq = r.x_scratch, r.xq_stride = stride;
}

}  // namespace eq::quant::cuda

namespace eq::quant {
size_t routed_x_bytes(int64_t rows, int64_t cols) {
  return static_cast<size_t>(rows) * cuda::int8_job_stride(cuda::XLayout::kSplitTable, 1, cols);
}
}  // namespace eq::quant

namespace eq::quant::cuda {

void quantize_jobs(XLayout layout, const DeviceGemvJob* jobs, int n_jobs, int m_rows, int64_t K, int sign_lo,
                   int sign_hi, void* scratch, cudaStream_t stream) {
  const size_t stride = int8_job_stride(layout, m_rows, K);
  const uint32_t k = static_cast<uint32_t>(K), units = int8_units(m_rows, k);
  for_each_launch(jobs, n_jobs, [&](const LaunchJobs& batch, int n, int j0) {
    const dim3 grid((units + kQuantizeThreads - 1) / kQuantizeThreads, static_cast<unsigned>(n));
    unsigned char* base = static_cast<unsigned char*>(scratch) + static_cast<size_t>(j0) * stride;
    launch_kernel("int8 quantization of x", kernel_of(layout), grid, dim3(kQuantizeThreads), 0, stream, batch, m_rows,
                  k, sign_lo, sign_hi, base, stride);
  });
}

}  // namespace eq::quant::cuda
