// The decode products of several formats in one launch (cuda_gemv.h,
// run_gemv_calls). A bit-group mix runs each projection step of a layer as
// one launch, as a uniform layer does, instead of one launch (and one stream)
// a group: at M = 1 a mixed layer was bound by those launches
// (docs/benchmarks.md, "GPU MoE layer").
//
// The launch's blocks are laid out segment by segment (a segment: some jobs
// of one format, each job blocks_per_job blocks); a block finds its segment
// and runs that family's block body, the same code as the family's own
// kernel, so the results keep their bits. The column bit-stream family takes
// part (every fp4, nl4 and affine row); the row-major rows keep their own
// launches (gemv_rowmajor.cu says why), the trellis rows theirs (three
// kernels a product).
//
// One row of x only: a kernel holding every body takes the registers of the
// hungriest, and with 2 to 8 rows that is 255 (one block an SM; measured
// 1.5x the separate launches at 16 tokens, docs/benchmarks.md, "GPU MoE
// layer"). With one row it is 80 (3 blocks an SM, as the 8-bit rows' own
// kernel). Several rows keep their formats' own launches.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "core/error.h"
#include "quant/cuda/gemv_mixed.cuh"

namespace eq::quant::cuda {

namespace {

constexpr int kMaxSegments = 6;
// Jobs a launch holds: as the formats' own launches (a larger parameter
// block, 128 jobs, took 3-4 us more a call at one token).
constexpr int kMixedJobs = kJobsPerLaunch;
constexpr int kRowsOfX = 1;  // run_gemv_calls takes one

struct MixedLaunch {
  GemvSegment seg[kMaxSegments];
  int first_block[kMaxSegments + 1] = {};  // segment i: blocks [first_block[i], first_block[i + 1])
  int first_job[kMaxSegments] = {};        // its jobs from job[first_job[i]]
  int segments = 0;
  DeviceGemvJob job[kMixedJobs];
};
static_assert(sizeof(MixedLaunch) <= 4096, "kernel parameters of at most 4 KB");

// 80 registers (3 blocks an SM), as the 8-bit stream rows' own kernel.
template <bool VEC>
__global__ void __launch_bounds__(stream::kThreads, 3) mixed_gemv_kernel(const __grid_constant__ MixedLaunch L) {
  extern __shared__ __align__(16) unsigned char stage[];  // the segment's stream::stage_bytes
  __shared__ float partial[stream::kPartialFloats<kRowsOfX>];
  int i = 0;
  while (i + 1 < L.segments && static_cast<int>(blockIdx.x) >= L.first_block[i + 1]) ++i;
  const GemvSegment& seg = L.seg[i];
  const uint32_t local = blockIdx.x - static_cast<uint32_t>(L.first_block[i]);
  const uint32_t per_job = static_cast<uint32_t>(seg.blocks_per_job);
  const DeviceGemvJob& job = L.job[L.first_job[i] + static_cast<int>(local / per_job)];
  const uint32_t block = local % per_job;
  stream::with_body(static_cast<stream::Body>(seg.body), [&]<int BITS, int CHUNK, bool HAS_BIASES, bool TABLE>() {
    stream::stream_gemv_block<BITS, CHUNK, kRowsOfX, HAS_BIASES, TABLE, VEC>(seg.stream, job, 0, block, stage, partial);
  });
}

void launch(const MixedLaunch& L, bool vec, cudaStream_t stream) {
  if (L.segments == 0) return;
  const unsigned blocks = static_cast<unsigned>(L.first_block[L.segments]);
  size_t smem = 0;
  for (int i = 0; i < L.segments; ++i)
    smem = std::max(smem, stream::stage_bytes(static_cast<stream::Body>(L.seg[i].body), L.seg[i].stream));
  auto kernel = vec ? mixed_gemv_kernel<true> : mixed_gemv_kernel<false>;
  prepare_shared_bytes(reinterpret_cast<const void*>(kernel), smem, "a launch of several formats", L.seg[0].stream.cols);
  kernel<<<blocks, stream::kThreads, smem, stream>>>(L);
  check_launch("mixed decode kernel");
}

}  // namespace

int64_t mixed_gemv_blocks(const FormatTraits& format, int64_t rows, int64_t cols) {
  if (format.device_gemv == nullptr || format.device_gemv->segment == nullptr) return -1;
  GemvSegment seg;
  format.device_gemv->segment(format, rows, cols, 1, false, seg);
  return seg.blocks_per_job;
}

int64_t mixed_gemv_wave() {
  int per_sm = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, mixed_gemv_kernel<true>, stream::kThreads, 0),
        "occupancy of the mixed decode kernel");
  return static_cast<int64_t>(multiprocessor_count()) * per_sm;
}

void run_gemv_calls(int64_t rows, int64_t cols, int m_rows, const DeviceGemvCall* calls, int n_calls, void* stream) {
  const cudaStream_t s = stream_of(stream);
  EQ_CHECK(m_rows == 1, "GPU decode: a launch of several formats takes one row of x, not " + std::to_string(m_rows));
  for (int c = 0; c < n_calls; ++c) EQ_CHECK(calls[c].format->device_gemv->segment != nullptr,
                                             "GPU decode: " + std::string(calls[c].format->name) +
                                                 " does not run in a launch of several formats");
  const bool vec = rows % 4 == 0;
  MixedLaunch L;
  auto flush = [&] {
    launch(L, vec, s);
    L = MixedLaunch{};
  };
  int jobs_in = 0;
  for (int c = 0; c < n_calls; ++c) {
    const DeviceGemvCall& call = calls[c];
    if (call.n_jobs == 0) continue;
    const bool gated = gated_call(*call.format, call.jobs, call.n_jobs, m_rows, cols);
    GemvSegment seg;
    call.format->device_gemv->segment(*call.format, rows, cols, m_rows, gated, seg);
    EQ_CHECK(static_cast<int64_t>(seg.blocks_per_job) * kMixedJobs < (int64_t{1} << 31),
             "GPU decode: " + std::string(call.format->name) + " [" + std::to_string(rows) + ", " +
                 std::to_string(cols) + "] needs too many blocks");
    for (int j = 0; j < call.n_jobs;) {
      if (L.segments == kMaxSegments || jobs_in == kMixedJobs) {
        flush();
        jobs_in = 0;
      }
      const int take = std::min(call.n_jobs - j, kMixedJobs - jobs_in);
      const int i = L.segments++;
      L.seg[i] = seg;
      L.first_job[i] = jobs_in;
      L.first_block[i + 1] = L.first_block[i] + take * seg.blocks_per_job;
      for (int t = 0; t < take; ++t) L.job[jobs_in + t] = call.jobs[j + t];
      jobs_in += take;
      j += take;
    }
  }
  flush();
}

}  // namespace eq::quant::cuda
