// What the GPU decode kernels (gemv_*.cu, trellis_gemv.cu) share: the jobs of
// one launch passed by value, the stream of a call, the rows-of-x buckets the
// kernels are instantiated for, and a warp's sum in a fixed order.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

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
  // The kernels reach their jobs through live() and at(), as RoutedJobs's.
  __device__ bool live(unsigned) const { return true; }
  __device__ const DeviceGemvJob& at(unsigned j) const { return job[j]; }
};

// A routed launch's jobs (DeviceGemv::run_routed): each block makes its own
// from the router's ids in device memory (RoutedPairs), so the host never
// sees them.
struct RoutedJobs {
  RoutedPairs r;
  int jobs = 0;  // the launch's block columns: every job a group could have of n_pairs pairs
  RoutedJobs(const RoutedPairs& pairs, int n_pairs)
      : r(pairs), jobs(pairs.step == RoutedPairs::kGateUp ? 2 * n_pairs : n_pairs) {}
  __device__ int32_t pair_of(unsigned j) const {
    return r.step == RoutedPairs::kGateUp ? static_cast<int32_t>(j >> 1) : static_cast<int32_t>(j);
  }
  __device__ bool live(unsigned j) const {
    const int32_t e = r.expert_ids[pair_of(j)];
    return e >= 0 && e < r.experts && r.group_of[e] == r.group;
  }
  // Job j's x quantized once (r.xq): its token's row (kGateUp) or its pair's.
  __device__ const unsigned char* xq_at(unsigned j) const {
    const int64_t p = pair_of(j);
    return r.xq + static_cast<size_t>(r.step == RoutedPairs::kGateUp ? p / r.top_k : p) * r.xq_stride;
  }
  __device__ DeviceGemvJob at(unsigned j) const {
    const int32_t p = pair_of(j), e = r.expert_ids[p];
    const bool down = r.step == RoutedPairs::kDown;
    DeviceGemvJob job = r.products[3 * static_cast<int64_t>(e) + (down ? 2 : (j & 1))];
    job.x = r.x + (down ? p : p / r.top_k) * r.x_stride;
    job.x_up = down && r.x_up ? r.x_up + p * r.x_stride : nullptr;
    job.y = (down || (j & 1) == 0 ? r.y_gate : r.y_up) + p * r.y_stride;
    return job;
  }
};

// Where job j's x lies when quantized once a call (X_ONCE kernels): a
// launch's jobs' areas one after the other from xq (LaunchJobs), or the row of
// its token or pair (RoutedJobs, RoutedPairs::xq).
template <typename Jobs>
__device__ inline const unsigned char* once_area(const Jobs& jobs, const unsigned char* xq, size_t stride, unsigned j) {
  if constexpr (std::is_same_v<Jobs, RoutedJobs>) return jobs.xq_at(j);
  else return xq + static_cast<size_t>(j) * stride;
}

inline cudaStream_t stream_of(void* stream) {
  return stream ? static_cast<cudaStream_t>(stream) : cudaStreamPerThread;
}

// The kernels keep one accumulator per row of x in registers, for a bucket of
// rows MB >= m_rows (1, 2, 4 or 8); rows past m_rows read row m_rows - 1 and
// are not stored.
inline int rows_bucket(int m_rows) { return m_rows <= 1 ? 1 : m_rows <= 2 ? 2 : m_rows <= 4 ? 4 : 8; }

// Calls launch(batch, n, j0) for the jobs j0 .. j0 + n - 1, up to
// kJobsPerLaunch at a time.
template <typename F>
void for_each_launch(const DeviceGemvJob* jobs, int n_jobs, F&& launch) {
  for (int j0 = 0; j0 < n_jobs; j0 += kJobsPerLaunch) {
    LaunchJobs batch;
    const int n = std::min(kJobsPerLaunch, n_jobs - j0);
    for (int j = 0; j < n; ++j) batch.job[j] = jobs[j0 + j];
    launch(batch, n, j0);
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

// Bytes of shared memory a block may have on the current GPU (its opt-in
// maximum), and the request a kernel needs before a launch asks for more than
// 48 KB in all: made once a kernel and GPU, for all that its static shared
// memory leaves (sizes are still chosen launch by launch).
size_t max_shared_bytes();
// The current GPU's streaming multiprocessors, read once a device.
int multiprocessor_count();
void allow_shared_bytes(const void* kernel);

// Static shared memory a decode kernel may hold beside its staged input (the
// stream kernel's partial sums at 8 rows of x).
inline constexpr size_t kDecodeStaticShared = 16 * 1024;

// Before a decode kernel's launch with `bytes` of dynamic shared memory for
// its x of `cols` columns: throws eq::Error when they do not fit the GPU
// beside its static part (`who`: the format, or the launch of several), and
// asks for them (allow_shared_bytes) past 48 KB in all.
inline void prepare_shared_bytes(const void* kernel, size_t bytes, std::string_view who, int64_t cols) {
  if (bytes + kDecodeStaticShared <= 48 * 1024) return;
  EQ_CHECK(bytes + kDecodeStaticShared <= max_shared_bytes(),
           "GPU decode: " + std::string(who) + ": a row of x of " + std::to_string(cols) +
               " columns takes more shared memory than the GPU has");
  allow_shared_bytes(kernel);
}

// silu(g) * u (model/activation.h's kSwiGlu): the one expression of the
// gated input on the GPU, wherever it is formed.
__device__ inline float swiglu_device(float g, float u) { return g / (1.0f + expf(-g)) * u; }

// A call's jobs carry x_up all or none (DeviceGemvJob); true when all do.
bool gated_call(const FormatTraits& format, const DeviceGemvJob* jobs, int n_jobs, int m_rows, int64_t cols);
// The same for a routed call (one row of x): true when `pairs` carries x_up;
// throws when `format` takes no gated input or cols is past kMaxGatedInput.
bool gated_routed_call(const FormatTraits& format, const RoutedPairs& pairs, int64_t cols);

// Makes the block's rows of x: the job's x, or, for a gated job, its gated
// input staged in `stage` [m_rows][cols] (shared memory) by the whole block
// (the call ends with a barrier, so every thread of the block must call it).
__device__ inline const float* block_input(const DeviceGemvJob& job, float* stage, int m_rows, uint32_t cols) {
  if (job.x_up == nullptr) return job.x;
  const uint32_t n = static_cast<uint32_t>(m_rows) * cols;
  const uint32_t threads = blockDim.x * blockDim.y * blockDim.z;
  for (uint32_t i = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x; i < n; i += threads)
    stage[i] = swiglu_device(job.x[i], job.x_up[i]);
  __syncthreads();
  return stage;
}

// Butterfly sum over the 32 lanes: every lane gets the same, order fixed.
__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

}  // namespace eq::quant::cuda
