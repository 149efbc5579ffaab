// Router math shared by every MoE block implementation (reference and packed):
// softmax over all experts in float32, top-k by probability (lower expert id
// first on exact ties), optional renormalization of the k weights to sum 1.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"

namespace eq::model {

struct Routing {
  int64_t tokens = 0, top_k = 0;
  std::vector<int32_t> expert_ids;  // [tokens, top_k]
  std::vector<float> weights;       // [tokens, top_k]
};

// Whether the architecture renormalizes the top-k weights (its file decides:
// some always do, others per config.json's norm_topk_prob).
bool renormalizes_top_k(const ModelConfig& c);

// logits: [tokens, num_experts]. Parallel over tokens.
Routing route_tokens(const float* logits, int64_t tokens, int64_t num_experts, int64_t top_k, bool renormalize);

// Slots (token * top_k + j) grouped by expert with a counting sort; within an
// expert, slots stay in token order.
struct ExpertGroups {
  std::vector<int64_t> offsets;  // [num_experts + 1]
  std::vector<int64_t> slots;    // [tokens * top_k]
};
ExpertGroups group_by_expert(const Routing& r, int64_t num_experts);

}  // namespace eq::model
