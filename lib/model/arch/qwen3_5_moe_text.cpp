// Qwen3.5-MoE text model: the Qwen3-Next layers with the gated delta net's
// projections stored apart (in_proj_qkv, in_proj_z, in_proj_b, in_proj_a);
// every layer MoE; the router always renormalizes its top-k. Its
// multimodal RoPE turns text-only positions (the same position on all three
// axes) exactly as plain RoPE, so plain RoPE is what runs.
#include "model/arch/architecture.h"
#include "model/arch/common.h"

namespace eq::model {
namespace {

void parse(const arch::JsonNode& j, ModelConfig& c) {
  c.moe_intermediate_size = arch::parse_expert_size(j, "moe_intermediate_size");
  arch::parse_gated_shared_expert(j, c);
  c.norm_topk_prob = true;  // the config has no such field
  c.rms_norm_eps = j.number_or("rms_norm_eps", 1e-6);
  c.attention_bias = j.bool_or("attention_bias", false);
  arch::parse_rope(j, 10000.0, 0.25, c);
  arch::parse_gated_delta_layers(j, /*fused=*/false, c);
}

}  // namespace

const Architecture& architecture_qwen3_5_moe_text() {
  static const Architecture row{
      .model_type = "qwen3_5_moe_text",
      .description = "Qwen3.5-MoE text: gated delta net layers (separate projections) with gated GQA layers, "
                     "partial RoPE, zero-centred norms, softmax top-k router, sigmoid-gated shared expert",
      .naming = {},
      .switches = {.shared_experts = "shared_expert_intermediate_size"},
      .parse = parse,
  };
  return row;
}

}  // namespace eq::model
