// What the GPU decode kernels (gemv_*.cu, trellis_gemv.cu) share: the jobs of
// one launch passed by value, the stream of a call, the rows-of-x buckets the
// kernels are instantiated for, and a warp's sum in a fixed order.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "quant/cuda/cuda_common.cuh"
#include "quant/cuda/cuda_gemv.h"

namespace eq::quant::cuda {

// Jobs per launch (kernel parameters hold them; larger calls launch again).
inline constexpr int kJobsPerLaunch = 32;

// Kernels take it as `const __grid_constant__ LaunchJobs`: a block indexes
// its job (blockIdx) in the parameter space itself; a plain by-value
// parameter indexed at run time would be copied to each thread's local memory.
struct LaunchJobs {
  DeviceGemvJob job[kJobsPerLaunch];
};

inline cudaStream_t stream_of(void* stream) {
  return stream ? static_cast<cudaStream_t>(stream) : cudaStreamPerThread;
}

// The kernels keep one accumulator per row of x in registers, for a bucket of
// rows MB >= m_rows (1, 2, 4 or 8); rows past m_rows read row m_rows - 1 and
// are not stored.
inline int rows_bucket(int m_rows) { return m_rows <= 1 ? 1 : m_rows <= 2 ? 2 : m_rows <= 4 ? 4 : 8; }

template <typename F>
void for_each_launch(const DeviceGemvJob* jobs, int n_jobs, F&& launch) {
  for (int j0 = 0; j0 < n_jobs; j0 += kJobsPerLaunch) {
    LaunchJobs batch;
    const int n = std::min(kJobsPerLaunch, n_jobs - j0);
    for (int j = 0; j < n; ++j) batch.job[j] = jobs[j0 + j];
    launch(batch, n);
  }
}

inline void check_call(const FormatTraits& format, int m_rows, const char* what) {
  EQ_CHECK(m_rows >= 1 && m_rows <= kMaxDeviceGemvRows,
           std::string(what) + ": " + std::string(format.name) + " with " + std::to_string(m_rows) +
               " rows of x (1 to " + std::to_string(kMaxDeviceGemvRows) + ")");
}

// Chunks of weights a thread loads before using any (its loads are in flight
// together; one at a time, DRAM latency sets the pace of these small
// kernels): `max_batch`, or what EXPERTQUANT_GPU_LOAD_BATCH (1 ..) says, for
// measurement. Read once.
int load_batch(int max_batch);

// Butterfly sum over the 32 lanes: every lane gets the same, order fixed.
__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

}  // namespace eq::quant::cuda
