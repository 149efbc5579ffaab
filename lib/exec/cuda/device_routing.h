// A MoE layer's router on the GPU: model::route_tokens (model/routing.h)
// step for step on logits already there, so that a decode step's experts are
// chosen without a round trip to the host (device_moe.h, "routed decode").
//
// Each token's rule runs in one warp in route_tokens's order: the scores in
// double where the host's are (softmax's exponentials and their sum, the
// sigmoid), the group limit, top-k with the lower id first on exact ties,
// then the weights, their renormalization and scaling in the same order and
// precision. So ids and weights equal the host's up to the last bits of a
// double (the GPU's exponential and the C library's may differ by one ulp,
// and the warp sums the softmax's terms in another order), which the float
// weights almost never keep. Two differences, on inputs the host rejects or
// never meets:
// where the host throws because fewer than top_k experts can be chosen (logits
// of -inf), the GPU fills the rest with the lowest allowed ids at weight 0;
// NaN logits choose experts in another order than the host's.
#pragma once

#include <cstdint>

#include "exec/cuda/device_exec.h"
#include "model/routing.h"

namespace eq::exec::cuda {

// The most experts and top_k the kernel takes (a warp's shared memory).
inline constexpr int64_t kMaxDeviceRouterExperts = 1024;
inline constexpr int64_t kMaxDeviceRouterTopK = 32;

struct DeviceRouter {
  model::RouterRule rule;
  int64_t num_experts = 0, top_k = 0;
  DeviceBuffer correction_bias;  // [num_experts] floats (kSigmoid), or empty: zeros
  DeviceBuffer allowed;          // [num_experts] bytes, 0: never chosen (pruned), or empty: all
};

// Checks the rule as route_tokens does and copies the host arrays (either
// may be null). Throws eq::Error (invalid) for a rule route_tokens rejects,
// fewer allowed experts than top_k, or sizes past the kernel's.
DeviceRouter make_device_router(const model::RouterRule& rule, int64_t num_experts, int64_t top_k,
                                const float* correction_bias, const uint8_t* allowed);

// ids [tokens, top_k] (int32) and weights [tokens, top_k] for logits [tokens,
// num_experts], all device arrays; enqueued on `stream`, not synchronized.
void route_on_device(const DeviceRouter& router, const float* logits, int64_t tokens, int32_t* ids, float* weights,
                     void* stream = nullptr);

}  // namespace eq::exec::cuda
