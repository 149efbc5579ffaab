// Router math shared by every MoE block implementation (reference and packed)
// and by profile: the architecture's scoring rule (RouterScoring) applied to
// one layer's logits in float32, top-k with the lower expert id first on exact
// ties, then the configured renormalization and scaling.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/weights.h"

namespace eq::model {

struct Routing {
  int64_t tokens = 0, top_k = 0;
  std::vector<int32_t> expert_ids;  // [tokens, top_k], in selection order
  std::vector<float> weights;       // [tokens, top_k]
};

// How a layer's logits become experts and weights (from ModelConfig):
//  kSoftmax:     p = softmax over the allowed experts; top-k of p; w = p.
//  kSigmoid:     s = sigmoid(logit); c = s + correction bias; the experts form
//                `groups` consecutive groups, a group scores the sum of its two
//                largest c, the `topk_groups` best groups are kept and the c of
//                every other expert becomes 0.0 (not -inf: an expert of a
//                dropped group can still win over negative c); top-k of c;
//                w = s of the chosen experts.
//  kTopKSoftmax: top-k of the logits; w = softmax over those k logits.
// Then, when `renormalize`, w /= (sum of the k weights) (+1e-20 for kSigmoid),
// and w *= `scaling`.
struct RouterRule {
  RouterScoring scoring = RouterScoring::kSoftmax;
  bool renormalize = false;
  int64_t groups = 1, topk_groups = 1;
  float scaling = 1.0f;
};
RouterRule router_rule(const ModelConfig& c);

// logits: [tokens, num_experts]. `correction_bias` [num_experts] (kSigmoid
// only; null = zeros). `allowed` [num_experts] (null = all): experts with 0
// are never chosen and, for kSoftmax, take no probability mass (exactly the
// softmax over the allowed experts' logits). Parallel over tokens.
Routing route_tokens(const float* logits, int64_t tokens, int64_t num_experts, int64_t top_k, const RouterRule& rule,
                     const float* correction_bias = nullptr, const uint8_t* allowed = nullptr);

// One layer's router tensors: the weight [E, H], and the bias and correction
// bias [E] where the config has them (else null).
struct LayerRouter {
  Tensor32Ptr weight, bias, correction_bias;
};
LayerRouter load_router(const ModelConfig& c, const WeightStore& w, int64_t layer);
// logits[n, E] = x[n, H] W^T (+ bias).
void router_logits(const ModelConfig& c, const LayerRouter& r, const float* x, int64_t n, float* logits);
// Both steps for one layer.
Routing route_layer(const ModelConfig& c, const LayerRouter& r, const float* logits, int64_t tokens,
                    const uint8_t* allowed = nullptr);

// Slots (token * top_k + j) grouped by expert with a counting sort; within an
// expert, slots stay in token order.
struct ExpertGroups {
  std::vector<int64_t> offsets;  // [num_experts + 1]
  std::vector<int64_t> slots;    // [tokens * top_k]
};
ExpertGroups group_by_expert(const Routing& r, int64_t num_experts);

}  // namespace eq::model
