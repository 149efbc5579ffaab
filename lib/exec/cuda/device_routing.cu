// The router on the GPU (device_routing.h): a warp a token, in
// model::route_tokens's order and precision.
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "core/error.h"
#include "exec/cuda/device_routing.h"
#include "quant/cuda/cuda_common.cuh"
#include "quant/cuda/gemv_common.cuh"

namespace eq::exec::cuda {

using quant::cuda::check_launch;
using quant::cuda::stream_of;

namespace {

struct RouteArgs {
  const float* logits = nullptr;
  int experts = 0, top_k = 0, groups = 1, topk_groups = 1;
  int scoring = 0;
  bool renormalize = false;
  float scaling = 1.0f;
  const float* bias = nullptr;
  const uint8_t* allowed = nullptr;
  int32_t* ids = nullptr;
  float* weights = nullptr;
};

size_t shared_bytes(int experts, int groups) {
  return static_cast<size_t>(experts) * (sizeof(double) + 2 * sizeof(float) + 1) +
         static_cast<size_t>(groups) * (sizeof(float) + 1);
}

// A score as an unsigned key in the same order (0.0 and -0.0 equal, as the
// host compares them); 0 stands for nothing (taken, or never chosen).
__device__ inline uint32_t order_key(float s) {
  const uint32_t b = __float_as_uint(s == 0.0f ? 0.0f : s);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// This lane's (e = lane, lane + 32, ...) best expert not taken and not
// never: the largest key, the lowest id of those (route_tokens's take_best
// over the lane's experts).
__device__ inline void lane_best(const float* score, const uint8_t* taken, int E, int lane, float never,
                                 uint32_t* key, int* id) {
  *key = 0;
  *id = -1;
  for (int e = lane; e < E; e += 32) {
    if (taken[e] || score[e] == never) continue;
    const uint32_t k = order_key(score[e]);
    if (k > *key) *key = k, *id = e;
  }
}

__global__ void route_kernel(const RouteArgs a) {
  quant::cuda::start_after_previous_grid();
  extern __shared__ __align__(8) unsigned char smem[];
  const int E = a.experts, lane = threadIdx.x;
  double* ex = reinterpret_cast<double*>(smem);
  float* score = reinterpret_cast<float*>(ex + E);
  float* value = score + E;
  float* group = value + E;
  uint8_t* taken = reinterpret_cast<uint8_t*>(group + a.groups);
  uint8_t* group_taken = taken + E;
  const float never = -INFINITY;
  const float* l = a.logits + static_cast<int64_t>(blockIdx.x) * E;
  auto ok = [&](int e) { return a.allowed == nullptr || a.allowed[e] != 0; };
  for (int e = lane; e < E; e += 32) taken[e] = 0;

  switch (static_cast<model::RouterScoring>(a.scoring)) {
    case model::RouterScoring::kSoftmax: {
      float mx = never;
      for (int e = lane; e < E; e += 32)
        if (ok(e)) mx = fmaxf(mx, l[e]);
      for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
      for (int e = lane; e < E; e += 32) ex[e] = ok(e) ? exp(static_cast<double>(l[e]) - mx) : 0.0;
      // The sum in a fixed order (each lane's experts, then a butterfly: every
      // lane gets the same bits); the host sums in expert order, so the sums
      // may differ in their last bits, the float weights almost never.
      double sum = 0;
      for (int e = lane; e < E; e += 32) sum += ex[e];
      for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
      for (int e = lane; e < E; e += 32) {
        value[e] = ok(e) ? static_cast<float>(ex[e] / sum) : 0.0f;
        score[e] = ok(e) ? value[e] : never;
      }
      break;
    }
    case model::RouterScoring::kSigmoid: {
      for (int e = lane; e < E; e += 32) {
        value[e] = static_cast<float>(1.0 / (1.0 + exp(-static_cast<double>(l[e]))));
        score[e] = ok(e) ? value[e] + (a.bias ? a.bias[e] : 0.0f) : never;
      }
      if (a.groups <= 1) break;
      __syncwarp();
      const int per = E / a.groups;
      for (int g = lane; g < a.groups; g += 32) {  // the sum of the group's two largest scores
        float x = never, y = never;
        for (int e = g * per; e < (g + 1) * per; ++e) {
          const float v = score[e];
          if (v > x) {
            y = x;
            x = v;
          } else if (v > y) {
            y = v;
          }
        }
        group[g] = x == never ? never : y == never ? x : x + y;
        group_taken[g] = 0;
      }
      __syncwarp();
      if (lane == 0)
        for (int j = 0; j < a.topk_groups; ++j) {
          int best = -1;
          for (int g = 0; g < a.groups; ++g)
            if (!group_taken[g] && group[g] != never && (best < 0 || group[g] > group[best])) best = g;
          if (best >= 0) group_taken[best] = 1;
        }
      __syncwarp();
      for (int e = lane; e < E; e += 32)
        if (!group_taken[e / per] && score[e] != never) score[e] = 0.0f;
      break;
    }
    case model::RouterScoring::kTopKSoftmax:
      for (int e = lane; e < E; e += 32) score[e] = ok(e) ? l[e] : never;
      break;
  }
  __syncwarp();

  // Top-k: the warp's largest key, then the lowest id holding it; only the
  // winner's lane looks again. The choices are made in shared memory (lane
  // 0's sums below read them one after another) and written out at the end.
  __shared__ int32_t ids[kMaxDeviceRouterTopK];
  __shared__ float w[kMaxDeviceRouterTopK];
  uint32_t key;
  int id;
  lane_best(score, taken, E, lane, never, &key, &id);
  int chosen = 0;  // experts chosen by score; the rest (none left to choose) take weight 0
  for (int j = 0; j < a.top_k; ++j) {
    const uint32_t best = __reduce_max_sync(0xffffffffu, key);
    if (best == 0) break;
    const int b = static_cast<int>(__reduce_min_sync(0xffffffffu, key == best ? static_cast<uint32_t>(id) : ~0u));
    if (lane == 0) {
      ids[j] = b;
      w[j] = value[b];
    }
    if (lane == (b & 31)) {
      taken[b] = 1;
      lane_best(score, taken, E, lane, never, &key, &id);
    }
    ++chosen;
  }
  __syncwarp();
  if (lane == 0) {
    // Nothing left to choose (-inf or NaN scores): the lowest allowed ids not taken, weight 0.
    for (int j = chosen, e = 0; j < a.top_k && e < E; ++e)
      if (ok(e) && !taken[e]) {
        taken[e] = 1;
        ids[j] = e;
        w[j] = 0.0f;
        ++j;
      }
    if (static_cast<model::RouterScoring>(a.scoring) == model::RouterScoring::kTopKSoftmax && chosen > 0) {
      // score holds the chosen experts' logits; selection order is descending: ids[0] holds the max
      const double top = score[ids[0]];
      double sum = 0;
      for (int j = 0; j < chosen; ++j) sum += exp(static_cast<double>(score[ids[j]]) - top);
      for (int j = 0; j < chosen; ++j) w[j] = static_cast<float>(exp(static_cast<double>(score[ids[j]]) - top) / sum);
    }
    if (a.renormalize) {
      float sum = 0;
      for (int j = 0; j < a.top_k; ++j) sum += w[j];
      if (static_cast<model::RouterScoring>(a.scoring) == model::RouterScoring::kSigmoid) sum += 1e-20f;
      for (int j = 0; j < a.top_k; ++j) w[j] /= sum;
    }
    if (a.scaling != 1.0f)
      for (int j = 0; j < a.top_k; ++j) w[j] *= a.scaling;
  }
  __syncwarp();
  for (int j = lane; j < a.top_k; j += 32) {
    a.ids[static_cast<int64_t>(blockIdx.x) * a.top_k + j] = ids[j];
    a.weights[static_cast<int64_t>(blockIdx.x) * a.top_k + j] = w[j];
  }
}

}  // namespace

DeviceRouter make_device_router(const model::RouterRule& rule, int64_t num_experts, int64_t top_k,
                                const float* correction_bias, const uint8_t* allowed) {
  if (top_k <= 0 || top_k > num_experts)
    invalid("GPU router: top_k " + std::to_string(top_k) + " must be in [1, num_experts=" +
            std::to_string(num_experts) + "]");
  if (rule.groups < 1 || num_experts % rule.groups != 0 || rule.topk_groups < 1 || rule.topk_groups > rule.groups)
    invalid("GPU router: " + std::to_string(rule.topk_groups) + " of " + std::to_string(rule.groups) +
            " groups do not fit " + std::to_string(num_experts) + " experts");
  if (num_experts > kMaxDeviceRouterExperts || top_k > kMaxDeviceRouterTopK)
    invalid("GPU router: " + std::to_string(num_experts) + " experts, top_k " + std::to_string(top_k) +
            " (the kernel takes up to " + std::to_string(kMaxDeviceRouterExperts) + " and " +
            std::to_string(kMaxDeviceRouterTopK) + ")");
  DeviceRouter r;
  r.rule = rule;
  r.num_experts = num_experts;
  r.top_k = top_k;
  const size_t n = static_cast<size_t>(num_experts);
  if (correction_bias != nullptr) {
    r.correction_bias = DeviceBuffer(n * sizeof(float));
    r.correction_bias.upload(correction_bias, n * sizeof(float));
  }
  if (allowed != nullptr) {
    int64_t count = 0;
    for (size_t e = 0; e < n; ++e) count += allowed[e] != 0;
    if (count < top_k)
      invalid("GPU router: " + std::to_string(count) + " experts may be chosen, fewer than top_k " +
              std::to_string(top_k));
    r.allowed = DeviceBuffer(n);
    r.allowed.upload(allowed, n);
  }
  return r;
}

void route_on_device(const DeviceRouter& r, const float* logits, int64_t tokens, int32_t* ids, float* weights,
                     void* stream) {
  if (tokens <= 0) return;
  RouteArgs a;
  a.logits = logits;
  a.experts = static_cast<int>(r.num_experts);
  a.top_k = static_cast<int>(r.top_k);
  a.groups = static_cast<int>(r.rule.groups);
  a.topk_groups = static_cast<int>(r.rule.topk_groups);
  a.scoring = static_cast<int>(r.rule.scoring);
  a.renormalize = r.rule.renormalize;
  a.scaling = r.rule.scaling;
  a.bias = r.correction_bias.size() ? r.correction_bias.floats() : nullptr;
  a.allowed = r.allowed.size() ? static_cast<const uint8_t*>(r.allowed.data()) : nullptr;
  a.ids = ids;
  a.weights = weights;
  quant::cuda::launch_kernel("router kernel", route_kernel, dim3(static_cast<unsigned>(tokens)), dim3(32),
                             shared_bytes(a.experts, a.groups), stream_of(stream), a);
}

}  // namespace eq::exec::cuda
