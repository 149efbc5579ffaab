// The attention kernel (device_attention.h).
#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "core/env_switch.h"
#include "exec/cuda/device_attention.h"
#include "exec/cuda/row_kernels.cuh"
#include "quant/cuda/cuda_common.cuh"
#include "quant/cuda/gemv_common.cuh"

namespace eq::exec::cuda {

using quant::cuda::check_launch;

namespace {

// 8 warps a (query, head), each taking every 8th key; keys in chunks of
// kKeyChunk scores in shared memory; a lane holds values 4 lane + 128 i of a
// head of up to kMaxHeadDim (float4 reads; widths that are not multiples of 4
// take lane + 32 j, 4 i + j, scalar reads).
constexpr int kAttnWarps = 8;
constexpr int kAttnThreads = 32 * kAttnWarps;
constexpr int kKeyChunk = 512;
constexpr int kValueQuads = kMaxHeadDim / 128;


// A decode step's few (row, head) blocks would leave most multiprocessors
// idle, each block waiting on its reads key after key: the visible keys are
// split into `count` parts, a block each (blockIdx.y), whose softmax partials
// (running maximum, sum, unnormalized value sums) the last of them to finish
// joins (combine_key_parts). The parts depend on the cache's capacity, not
// the position, so a step's graph (step_graph.h) holds at every position.
constexpr int kMinSplitKeys = 32;
constexpr int kMaxKeySplits = 32;  // at most a warp's lanes (combine_key_parts)
struct KeySplits {
  int count = 1;  // 1: each block writes its output itself
  float* max = nullptr;  // [blocks][count]
  float* sum = nullptr;  // [blocks][count]
  float* values = nullptr;  // [blocks][count][v_dim]
  unsigned* done = nullptr;  // [blocks]: parts finished (0 between launches: the last one resets it)
};

// out[r, head] (the block's) from its key parts: each part's sums rescaled to
// the largest maximum (the sink's logit among them). The first warp reads the
// parts' maxima and sums, a lane a part (count <= 32), and leaves each part's
// factor in shared memory; then every thread sums its values' parts. The
// partials are read from L2 (__ldcg): other blocks wrote them.
__device__ void combine_key_parts(const KeySplits& split, const AttentionShape& a, const float* sinks, float* out,
                                  int64_t blk) {
  __shared__ float factor[kMaxKeySplits];
  __shared__ float total;
  const int64_t r = blk / a.heads;
  const int h = static_cast<int>(blk % a.heads);
  if (threadIdx.x < 32) {
    const int i = static_cast<int>(threadIdx.x);
    const float pm = i < split.count ? __ldcg(split.max + blk * split.count + i) : -INFINITY;
    const float pl = i < split.count ? __ldcg(split.sum + blk * split.count + i) : 0.0f;
    float m = sinks ? fmaxf(sinks[h], pm) : pm;
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    const float f = pl > 0.0f ? expf(pm - m) : 0.0f;  // an empty part (sum 0) adds nothing
    float l = pl * f;
    for (int o = 16; o > 0; o >>= 1) l += __shfl_xor_sync(0xffffffffu, l, o);
    if (i < split.count) factor[i] = f;
    if (i == 0) total = l + (sinks ? expf(sinks[h] - m) : 0.0f);
  }
  __syncthreads();
  const float* values = split.values + blk * split.count * a.v_dim;
  for (int d = threadIdx.x; d < a.v_dim; d += blockDim.x) {
    float v = 0.0f;
    for (int i = 0; i < split.count; ++i) v += __ldcg(values + i * a.v_dim + d) * factor[i];
    out[r * a.out_row + h * a.out_head + d] = v / total;
  }
}

// out[r, head] = softmax(scale q·k_j over the visible keys j [, sink]) · v_j,
// a block a (row, head) (and key part: KeySplits): row r = b * seq_len + t at
// position pos = *start + t sees keys max(0, pos - window + 1) .. pos of its
// sequence (window 0: from 0) in the caches (keys and values
// [batch][capacity][kv_row], one buffer or two). An online softmax over
// chunks of kKeyChunk keys: each chunk's scores in shared memory (a warp a
// key), the running maximum and sum rescaled as they grow; each warp sums
// p_j v_j over its keys of the chunk, and the warps' sums are added at the end
// (model::attend_causal's values, in another order of summation). At one
// token a layer has few blocks, each bound by the latency of its reads: a lane
// reads a key's or value's 4 consecutive floats at once (kVec: every width and
// offset a multiple of 4; else 4 scalar reads 32 apart), and the key loops are
// unrolled so each lane has several reads in flight.
template <bool kVec>
__global__ void __launch_bounds__(kAttnThreads) attention_kernel(const float* q, const float* keys,
                                                                 const float* values, float* out, AttentionShape a,
                                                                 int64_t seq_len, const int64_t* start,
                                                                 int64_t capacity, float scale, int64_t window,
                                                                 const float* sinks, KeySplits split) {
  quant::cuda::start_after_previous_grid();
  __shared__ __align__(16) float qs[kMaxScoreDim];
  __shared__ float p[kKeyChunk];
  __shared__ float red[kAttnWarps];
  __shared__ __align__(16) float sums[kAttnWarps][kMaxHeadDim];
  const int64_t r = blockIdx.x / a.heads;
  const int h = static_cast<int>(blockIdx.x % a.heads), g = h / a.group;
  const int64_t b = r / seq_len, pos = *start + r % seq_len;
  int64_t lo = window > 0 ? max(static_cast<int64_t>(0), pos - window + 1) : 0, hi = pos + 1;
  if (split.count > 1) {  // this block's part of the keys
    const int64_t per = (hi - lo + split.count - 1) / split.count;
    lo += per * blockIdx.y;
    hi = min(hi, lo + per);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int d = threadIdx.x; d < a.q_dim; d += kAttnThreads) qs[d] = q[r * a.q_row + h * a.q_head + d];
  const float* kb = keys + b * capacity * a.kv_row + g * a.k_group;
  const float* vb = values + b * capacity * a.kv_row + g * a.v_group;
  float m = -INFINITY, l = 0.0f;
  // Value d of this lane: kVec 4 lane + 128 i + j, else lane + 32 (4 i + j).
  auto value_at = [&](int i, int j) { return kVec ? 4 * lane + 128 * i + j : lane + 32 * (4 * i + j); };
  float4 acc[kValueQuads];
#pragma unroll
  for (int i = 0; i < kValueQuads; ++i) acc[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  __syncthreads();
  for (int64_t c0 = lo; c0 < hi; c0 += kKeyChunk) {
    const int count = static_cast<int>(min(static_cast<int64_t>(kKeyChunk), hi - c0));
#pragma unroll 4
    for (int j = warp; j < count; j += kAttnWarps) {
      const float* kj = kb + (c0 + j) * a.kv_row;
      float s = 0.0f;
      if constexpr (kVec) {
        for (int d = 4 * lane; d < a.q_dim; d += 128) {
          const float4 k4 = *reinterpret_cast<const float4*>(kj + d);
          const float4 q4 = *reinterpret_cast<const float4*>(qs + d);
          s += q4.x * k4.x + q4.y * k4.y + q4.z * k4.z + q4.w * k4.w;
        }
      } else {
        for (int d = lane; d < a.q_dim; d += 32) s += qs[d] * kj[d];
      }
      for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
      if (lane == 0) p[j] = s * scale;
    }
    __syncthreads();
    float cm = -INFINITY;
    for (int j = threadIdx.x; j < count; j += kAttnThreads) cm = fmaxf(cm, p[j]);
    const float nm = fmaxf(m, block_max(cm, red));
    float cs = 0.0f;
    for (int j = threadIdx.x; j < count; j += kAttnThreads) {
      const float e = expf(p[j] - nm);
      p[j] = e;
      cs += e;
    }
    cs = block_sum(cs, red);  // its barriers also publish p
    const float corr = expf(m - nm);
    l = l * corr + cs;
#pragma unroll
    for (int i = 0; i < kValueQuads; ++i) acc[i] = make_float4(acc[i].x * corr, acc[i].y * corr, acc[i].z * corr,
                                                                acc[i].w * corr);
#pragma unroll 4
    for (int j = warp; j < count; j += kAttnWarps) {
      const float pj = p[j];
      const float* vj = vb + (c0 + j) * a.kv_row;
#pragma unroll
      for (int i = 0; i < kValueQuads; ++i) {
        if (value_at(i, 0) >= a.v_dim) break;  // the same for every key
        float4 v4;
        if constexpr (kVec) {
          v4 = *reinterpret_cast<const float4*>(vj + value_at(i, 0));
        } else {
          v4.x = vj[value_at(i, 0)];
          v4.y = value_at(i, 1) < a.v_dim ? vj[value_at(i, 1)] : 0.0f;
          v4.z = value_at(i, 2) < a.v_dim ? vj[value_at(i, 2)] : 0.0f;
          v4.w = value_at(i, 3) < a.v_dim ? vj[value_at(i, 3)] : 0.0f;
        }
        acc[i].x += pj * v4.x;
        acc[i].y += pj * v4.y;
        acc[i].z += pj * v4.z;
        acc[i].w += pj * v4.w;
      }
    }
    m = nm;
    __syncthreads();  // p is rewritten by the next chunk
  }
  if (sinks && split.count == 1) {  // the sink's logit joins the softmax and adds no value
    const float s = sinks[h], nm = fmaxf(m, s), corr = expf(m - nm);
    l = l * corr + expf(s - nm);
#pragma unroll
    for (int i = 0; i < kValueQuads; ++i) acc[i] = make_float4(acc[i].x * corr, acc[i].y * corr, acc[i].z * corr,
                                                                acc[i].w * corr);
  }
#pragma unroll
  for (int i = 0; i < kValueQuads; ++i) {
    const float parts[4] = {acc[i].x, acc[i].y, acc[i].z, acc[i].w};
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (value_at(i, j) < a.v_dim) sums[warp][value_at(i, j)] = parts[j];
  }
  __syncthreads();
  const int64_t part = static_cast<int64_t>(blockIdx.x) * split.count + blockIdx.y;
  for (int d = threadIdx.x; d < a.v_dim; d += kAttnThreads) {
    float v = 0.0f;
    for (int w = 0; w < kAttnWarps; ++w) v += sums[w][d];
    if (split.count > 1)
      split.values[part * a.v_dim + d] = v;
    else
      out[r * a.out_row + h * a.out_head + d] = v / l;
  }
  if (split.count == 1) return;
  if (threadIdx.x == 0) {  // an empty part: maximum -inf, sum 0
    split.max[part] = m;
    split.sum[part] = l;
  }
  // The last part of the (row, head) to finish joins them all.
  __shared__ bool last;
  __threadfence();  // this block's partials are seen before its count
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(split.done + blockIdx.x, 1u) == static_cast<unsigned>(split.count - 1);
  __syncthreads();
  if (!last) return;
  __threadfence();
  combine_key_parts(split, a, sinks, out, blockIdx.x);
  if (threadIdx.x == 0) split.done[blockIdx.x] = 0;
}

// Whether every width and offset of `a` is a multiple of 4 floats (the cache
// rows and q then take float4 reads).
bool quad_aligned(const AttentionShape& a) {
  return a.q_dim % 4 == 0 && a.v_dim % 4 == 0 && a.q_row % 4 == 0 && a.q_head % 4 == 0 && a.kv_row % 4 == 0 &&
         a.k_group % 4 == 0 && a.v_group % 4 == 0;
}

// How many parts the keys of n rows' attention split into: 1 when the
// (row, head) blocks alone fill the GPU twice over, else enough parts for
// that, each of at least kMinSplitKeys of the cache's positions.
int key_splits(int64_t n, int heads, int64_t capacity) {
  static const bool on = env_switch("EXPERTQUANT_GPU_KEY_SPLITS", true);
  static const int64_t sms = quant::cuda::multiprocessor_count();
  const int64_t blocks = n * heads;
  if (!on || blocks == 0 || blocks >= 2 * sms) return 1;
  const int64_t want = (2 * sms + blocks - 1) / blocks;
  return static_cast<int>(std::clamp<int64_t>(std::min(want, capacity / kMinSplitKeys), 1, kMaxKeySplits));
}

}  // namespace

// attention_kernel's launch: one block a (row, head) of the n rows and key
// part, the parts' partials in `parts` and their counts in `done` (grown).
void launch_attention(const float* q, const float* keys, const float* values, float* out, const AttentionShape& a,
                      int64_t n, int64_t seq_len, const int64_t* start, int64_t capacity, float scale,
                      int64_t window, const float* sinks, DeviceBuffer& parts, DeviceBuffer& done, cudaStream_t st) {
  const int64_t blocks = n * a.heads;
  KeySplits split;
  split.count = key_splits(n, a.heads, capacity);
  if (split.count > 1) {
    const int64_t count = blocks * split.count;
    grow(parts, static_cast<size_t>(count * (2 + a.v_dim)) * sizeof(float), st);
    split.max = parts.floats();
    split.sum = split.max + count;
    split.values = split.sum + count;
    if (done.size() < static_cast<size_t>(blocks) * sizeof(unsigned)) {  // every count 0, as each launch leaves them
      grow(done, static_cast<size_t>(blocks) * sizeof(unsigned), st);
      quant::cuda::check(cudaMemsetAsync(done.data(), 0, done.size(), st), "clear the key parts' counts");
    }
    split.done = static_cast<unsigned*>(done.data());
  }
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(split.count));
  const auto kernel = quad_aligned(a) ? attention_kernel<true> : attention_kernel<false>;
  quant::cuda::launch_kernel("attention kernel", kernel, grid, dim3(kAttnThreads), 0, st, q, keys, values, out, a,
                             seq_len, start, capacity, scale, window, sinks, split);
}

}  // namespace eq::exec::cuda
