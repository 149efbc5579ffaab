// The quantization of several rows of x once a call (int8_input.cuh): one
// launch for all the jobs of a decode call with 2 to 8 rows of x, whose
// blocks then read it instead of each staging it again (at 8 rows of K =
// 7168 the blocks' own staging took longer than the products,
// docs/benchmarks.md, "GPU decode").
#include <cuda_runtime.h>

#include <algorithm>

#include "quant/cuda/int8_input.cuh"

namespace eq::quant::cuda {

namespace {

constexpr int kQuantizeThreads = 256;

template <XLayout L>
__global__ void __launch_bounds__(kQuantizeThreads)
    quantize_jobs_kernel(const __grid_constant__ LaunchJobs jobs, int m_rows, uint32_t K, int sign_lo, int sign_hi,
                         unsigned char* scratch, size_t stride) {
  const uint32_t units = int8_units(m_rows, K), u = blockIdx.x * kQuantizeThreads + threadIdx.x;
  quantize_unit<L>(jobs.job[blockIdx.y], scratch + blockIdx.y * stride, m_rows, K, u, u < units, sign_lo, sign_hi);
}

using QuantizeKernel = void (*)(LaunchJobs, int, uint32_t, int, int, unsigned char*, size_t);

QuantizeKernel kernel_of(XLayout layout) {
  switch (layout) {
    case XLayout::kNib: return quantize_jobs_kernel<XLayout::kNib>;
    case XLayout::kCrumb: return quantize_jobs_kernel<XLayout::kCrumb>;
    case XLayout::kSplitTable: return quantize_jobs_kernel<XLayout::kSplitTable>;
    default: return quantize_jobs_kernel<XLayout::kNatural>;
  }
}

}  // namespace

size_t int8_job_stride(XLayout layout, int m_rows, int64_t K) {
  return (int8_stage_bytes(layout, m_rows, K) + 255) / 256 * 256;
}

void quantize_jobs(XLayout layout, const DeviceGemvJob* jobs, int n_jobs, int m_rows, int64_t K, int sign_lo,
                   int sign_hi, void* scratch, cudaStream_t stream) {
  const size_t stride = int8_job_stride(layout, m_rows, K);
  const uint32_t k = static_cast<uint32_t>(K), units = int8_units(m_rows, k);
  for_each_launch(jobs, n_jobs, [&](const LaunchJobs& batch, int n, int j0) {
    const dim3 grid((units + kQuantizeThreads - 1) / kQuantizeThreads, static_cast<unsigned>(n));
    unsigned char* base = static_cast<unsigned char*>(scratch) + static_cast<size_t>(j0) * stride;
    kernel_of(layout)<<<grid, kQuantizeThreads, 0, stream>>>(batch, m_rows, k, sign_lo, sign_hi, base, stride);
    check_launch("int8 quantization of x");
  });
}

}  // namespace eq::quant::cuda
