// Mixtral: plain GQA (every layer sliding when sliding_window is set), softmax
// router whose top-k weights are always renormalized, experts named w1
// (gate), w3 (up), w2 (down) under block_sparse_moe; every layer MoE.
#include "model/arch/architecture.h"
#include "model/arch/common.h"

namespace eq::model {
namespace {

void parse(const arch::JsonNode& j, ModelConfig& c) {
  c.moe_intermediate_size = arch::parse_expert_size(j, "intermediate_size");
  c.norm_topk_prob = true;  // the reference renormalizes unconditionally
  c.rope_theta = arch::parse_rope_theta(j, 1e6);
  c.rms_norm_eps = j.number_or("rms_norm_eps", 1e-5);
  c.attention_bias = j.bool_or("attention_bias", false);
  // A sliding_window (null in the released configs) applies to every layer.
  const int64_t window = arch::parse_sliding_window(j, 0);
  arch::set_attention_windows(j, window, [](int64_t) { return true; }, c);
}

}  // namespace

const Architecture& architecture_mixtral() {
  static const Architecture row{
      .model_type = "mixtral",
      .description = "Mixtral: GQA, softmax top-k router with renormalized weights",
      .naming = {.moe = "block_sparse_moe", .expert_proj = {"w1", "w3", "w2"}},
      .parse = parse,
  };
  return row;
}

}  // namespace eq::model
