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

// SwiGLU of one element, as model/activation.h's kSwiGlu: silu(g) * u with
// silu(g) = g / (1 + exp(-g)).
__device__ inline float swiglu(float g, float u) { return g / (1.0f + expf(-g)) * u; }

// Four consecutive inputs at `at` of a job's row: x, or silu(x) * x_up.
__device__ inline float4 load_x4(const float* x, const float* x_up, int64_t at) {
  float4 a = __ldg(reinterpret_cast<const float4*>(x + at));
  if (x_up != nullptr) {
    const float4 u = __ldg(reinterpret_cast<const float4*>(x_up + at));
    a.x = swiglu(a.x, u.x);
    a.y = swiglu(a.y, u.y);
    a.z = swiglu(a.z, u.z);
    a.w = swiglu(a.w, u.w);
  }
  return a;
}
__device__ inline float load_x(const float* x, const float* x_up, int64_t at) {
  return x_up != nullptr ? swiglu(__ldg(x + at), __ldg(x_up + at)) : __ldg(x + at);
}

// Butterfly sum over the 32 lanes: every lane gets the same, order fixed.
__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

}  // namespace eq::quant::cuda
