// The decode products of several formats in one launch (cuda_gemv.h,
// run_gemv_calls, run_routed_calls). A bit-group mix runs each projection
// step of a layer as one launch, as a uniform layer does, instead of one
// launch (and one stream) a group: at M = 1 a mixed layer was bound by those
// launches (docs/benchmarks.md, "GPU MoE layer").
//
// The launch's blocks are laid out segment by segment (a segment: some jobs
// of one format, each job blocks_per_job blocks); a block finds its segment
// and runs that family's block body, the same code as the family's own
// kernel, so the results keep their bits. The column bit-stream family (every
// fp4, nl4 and affine row) and int8_row (4 rows a warp, as its own kernel;
// with 2 its blocks read what a 4-bit stream block reads, but twice as many
// blocks made the step slower, docs/benchmarks.md, "GPU whole model") take
// part; bf16 keeps its own launches (its float x is read, not staged, so a
// gated input has nowhere to be formed), the trellis rows theirs (rotations
// around the tiles).
//
// A routed launch (run_routed_calls) lays its blocks out as the family's own
// routed launch does (gridDim.y: every job a pair could have): a block reads
// its pair's expert, that expert's group's segment, and runs it when its
// column of blocks is within the segment's blocks_per_job.
//
// One row of x only: a kernel holding every body takes the registers of the
// hungriest, and with 2 to 8 rows that is 255 (one block an SM; measured
// 1.5x the separate launches at 16 tokens, docs/benchmarks.md, "GPU MoE
// layer"). With one row it is 80 (3 blocks an SM, as the 8-bit rows' own
// kernel). Several rows keep their formats' own launches.
#include <cuda_runtime.h>

#include <algorithm>
#include <iterator>
#include <string>
#include <utility>

#include "core/env_switch.h"
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

static_assert(stream::kThreads == rowmajor::kThreads, "one block size for every body");

// The int8_row body as a call of its own, in the kernel of every body:
// inlined beside the six stream bodies, that kernel spilled 292 bytes a
// thread (56 before int8_row took part); as a call, it spills 0 to 24 and the
// call 56 to 80. The kernels of a few bodies (kBodySets) inline it and spill
// 0 to 4 bytes (96 in one per-pair variant of 8/4/2 for rows not a multiple
// of 4); inlined, the 8/4/2 mix's step was 1.022x fp4_g32's against 1.048x
// with the call (bench/ptxas_usage.py BUILD lib/quant/cuda/gemv_mixed.cu,
// sm_90a; docs/benchmarks.md, "GPU whole model").
__device__ __noinline__ void int8_row_block(const rowmajor::RowParams& p, const DeviceGemvJob& job, uint32_t block,
                                            unsigned char* stage) {
  rowmajor::rowmajor_gemv_block<int8_t, true, kRowsOfX>(p, job, block, stage);
}

// The bodies a kernel holds (kBodies): bit b for stream::Body b, kInt8RowBit
// for int8_row. A kernel holding every body is 190-210 KB of code, one of
// a few bodies 60-92 KB (bench/cuda_code_size.py BUILD
// lib/quant/cuda/gemv_mixed.cu); on the Qwen3-30B-A3B layer the
// smaller kernel took the shared gate and up launch from 13.9 to 11.6 us
// (docs/benchmarks.md, "GPU whole model"), so a launch takes the smallest
// instantiated set that holds its bodies (kBodySets). The same body gives
// the same bits in every set.
inline constexpr uint32_t kInt8RowBit = 1u << 6;
inline constexpr uint32_t kEveryBody = stream::kAllBodies | kInt8RowBit;
constexpr uint32_t body_bit(stream::Body b) { return 1u << static_cast<int>(b); }
// The sets instantiated, smallest first; the last holds every body. One
// 4-bit table body (fp4 and nl4 rows, group 32 or 16) beside int8_row: the
// default policy's critical and standard classes (its trellis rows run
// launches of their own); with one affine width beside them: an 8/4/2 (or
// 8/4/3) mix. A launch of more bodies takes the kernel holding every one.
using stream::Body;
inline constexpr uint32_t kBodySets[] = {
    body_bit(Body::kTable4) | kInt8RowBit,
    body_bit(Body::kTable4Chunk16) | kInt8RowBit,
    body_bit(Body::kTable4) | body_bit(Body::kAffine2) | kInt8RowBit,
    body_bit(Body::kTable4) | body_bit(Body::kAffine3) | kInt8RowBit,
    body_bit(Body::kTable4) | body_bit(Body::kAffine4) | kInt8RowBit,
    kEveryBody,
};
static_assert(kBodySets[std::size(kBodySets) - 1] == kEveryBody, "the last set holds every body");

uint32_t body_bits(const GemvSegment& seg) {
  return seg.family == GemvSegment::kInt8Row ? kInt8RowBit : body_bit(static_cast<Body>(seg.body));
}

// Block `block` of job `job` of `seg` (the whole block calls it).
template <bool VEC, uint32_t kBodies>
__device__ __forceinline__ void run_segment(const GemvSegment& seg, const DeviceGemvJob& job, uint32_t block,
                                            unsigned char* stage, float* partial) {
  if (seg.family == GemvSegment::kInt8Row) {
    if constexpr (kBodies == kEveryBody) int8_row_block(seg.row, job, block, stage);
    else if constexpr ((kBodies & kInt8RowBit) != 0)
      rowmajor::rowmajor_gemv_block<int8_t, true, kRowsOfX>(seg.row, job, block, stage);
    return;
  }
  stream::with_body<kBodies & stream::kAllBodies>(
      static_cast<stream::Body>(seg.body), [&]<int BITS, int CHUNK, bool HAS_BIASES, bool TABLE>() {
        stream::stream_gemv_block<BITS, CHUNK, kRowsOfX, HAS_BIASES, TABLE, VEC>(seg.stream, job, block, stage,
                                                                                 partial);
      });
}

// 80 registers (3 blocks an SM), as the 8-bit stream rows' own kernel.
template <bool VEC, uint32_t kBodies>
__global__ void __launch_bounds__(stream::kThreads, 3) mixed_gemv_kernel(const __grid_constant__ MixedLaunch L) {
  extern __shared__ __align__(16) unsigned char stage[];  // the largest of the segments' stage_bytes
  __shared__ float partial[stream::kPartialFloats<kRowsOfX>];
  wait_for_previous_grid();  // the next grid is placed once all these blocks exit (cuda_common.cuh)
  int i = 0;
  while (i + 1 < L.segments && static_cast<int>(blockIdx.x) >= L.first_block[i + 1]) ++i;
  const GemvSegment& seg = L.seg[i];
  const uint32_t local = blockIdx.x - static_cast<uint32_t>(L.first_block[i]);
  const uint32_t per_job = static_cast<uint32_t>(seg.blocks_per_job);
  run_segment<VEC, kBodies>(seg, L.job[L.first_job[i] + static_cast<int>(local / per_job)], local % per_job, stage,
                            partial);
}

// A routed launch's groups: segment g is bit group g's (blocks_per_job 0: not
// in the launch); its jobs are made as a family's own routed launch makes them.
struct RoutedLaunch {
  GemvSegment seg[kMaxRoutedGroups];
  RoutedJobs jobs;
};
static_assert(sizeof(RoutedLaunch) <= 4096, "kernel parameters of at most 4 KB");

template <bool VEC, uint32_t kBodies>
__global__ void __launch_bounds__(stream::kThreads, 3) routed_mixed_kernel(const __grid_constant__ RoutedLaunch L) {
  extern __shared__ __align__(16) unsigned char stage[];
  __shared__ float partial[stream::kPartialFloats<kRowsOfX>];
  wait_for_previous_grid();  // the next grid is placed once all these blocks exit (cuda_common.cuh)
  const RoutedPairs& r = L.jobs.r;
  const int32_t e = r.expert_ids[L.jobs.pair_of(blockIdx.y)];
  if (e < 0 || e >= r.experts) return;  // the whole block
  const int32_t g = r.group_of[e];
  if (g < 0 || g >= kMaxRoutedGroups || blockIdx.x >= static_cast<uint32_t>(L.seg[g].blocks_per_job)) return;
  run_segment<VEC, kBodies>(L.seg[g], L.jobs.at(blockIdx.y), blockIdx.x, stage, partial);
}

// The kernel of the smallest set in kBodySets holding `bodies`
// (EXPERTQUANT_GPU_BODY_SETS=0: always every body, for measurement).
template <template <bool, uint32_t> class Kernel, typename Fn, size_t... I>
Fn pick_kernel(bool vec, uint32_t bodies, std::index_sequence<I...>) {
  static const bool sets_on = env_switch("EXPERTQUANT_GPU_BODY_SETS", true);
  Fn found = nullptr;
  ((found == nullptr && (sets_on || kBodySets[I] == kEveryBody) && (bodies & ~kBodySets[I]) == 0
        ? (found = vec ? Kernel<true, kBodySets[I]>::fn : Kernel<false, kBodySets[I]>::fn)
        : found),
   ...);
  return found;
}
template <bool VEC, uint32_t kBodies>
struct MixedKernel {
  static constexpr auto fn = mixed_gemv_kernel<VEC, kBodies>;
};
template <bool VEC, uint32_t kBodies>
struct RoutedMixedKernel {
  static constexpr auto fn = routed_mixed_kernel<VEC, kBodies>;
};
constexpr auto kSetIndices = std::make_index_sequence<std::size(kBodySets)>{};

void launch(const MixedLaunch& L, bool vec, int64_t cols, cudaStream_t stream) {
  if (L.segments == 0) return;
  const unsigned blocks = static_cast<unsigned>(L.first_block[L.segments]);
  size_t smem = 0;
  uint32_t bodies = 0;
  for (int i = 0; i < L.segments; ++i) smem = std::max(smem, L.seg[i].stage_bytes), bodies |= body_bits(L.seg[i]);
  auto kernel = pick_kernel<MixedKernel, void (*)(MixedLaunch)>(vec, bodies, kSetIndices);
  prepare_shared_bytes(reinterpret_cast<const void*>(kernel), smem, "a launch of several formats", cols);
  launch_kernel("mixed decode kernel", kernel, dim3(blocks), dim3(stream::kThreads), smem, stream, L);
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
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, mixed_gemv_kernel<true, kEveryBody>, stream::kThreads,
                                                      0),
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
    launch(L, vec, cols, s);
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

void run_routed_calls(int64_t rows, int64_t cols, const FormatTraits* const* formats, int n_groups,
                      const RoutedPairs& pairs, int n_pairs, void* stream) {
  EQ_CHECK(n_groups >= 1 && n_groups <= kMaxRoutedGroups,
           "GPU decode: a routed launch of " + std::to_string(n_groups) + " groups (1 to " +
               std::to_string(kMaxRoutedGroups) + ")");
  RoutedLaunch L{.seg = {}, .jobs = RoutedJobs(pairs, n_pairs)};
  int64_t grid_x = 0;
  size_t smem = 0;
  uint32_t bodies = 0;
  for (int g = 0; g < n_groups; ++g) {
    const FormatTraits* f = formats[g];
    if (f == nullptr) continue;
    EQ_CHECK(f->device_gemv != nullptr && f->device_gemv->segment != nullptr,
             "GPU decode: " + std::string(f->name) + " does not run in a launch of several formats");
    f->device_gemv->segment(*f, rows, cols, kRowsOfX, gated_routed_call(*f, pairs, cols), L.seg[g]);
    grid_x = std::max<int64_t>(grid_x, L.seg[g].blocks_per_job);
    bodies |= body_bits(L.seg[g]);
    smem = std::max(smem, L.seg[g].stage_bytes);
  }
  const int64_t jobs = L.jobs.jobs;
  if (grid_x == 0 || jobs == 0) return;
  EQ_CHECK(grid_x < (int64_t{1} << 31) && jobs <= 65535,
           "GPU decode: a routed launch of " + std::to_string(jobs) + " jobs of " + std::to_string(grid_x) +
               " blocks each");
  auto kernel = pick_kernel<RoutedMixedKernel, void (*)(RoutedLaunch)>(rows % 4 == 0, bodies, kSetIndices);
  prepare_shared_bytes(reinterpret_cast<const void*>(kernel), smem, "a routed launch of several formats", cols);
  launch_kernel("routed mixed decode kernel", kernel, dim3(static_cast<unsigned>(grid_x), static_cast<unsigned>(jobs)),
                dim3(stream::kThreads), smem, stream_of(stream), L);
}

}  // namespace eq::quant::cuda
