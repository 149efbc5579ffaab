// Qwen2-MoE (and Qwen1.5-MoE): q/k/v biases, softmax router, a shared expert
// gated by sigmoid(x · shared_expert_gate) added to every token; dense layers
// by decoder_sparse_step / mlp_only_layers.
#include "model/arch/architecture.h"
#include "model/arch/common.h"

namespace eq::model {
namespace {

void parse(const arch::JsonNode& j, ModelConfig& c) {
  c.moe_intermediate_size = arch::parse_expert_size(j, "moe_intermediate_size");
  arch::parse_gated_shared_expert(j, c);
  c.norm_topk_prob = j.bool_or("norm_topk_prob", false);
  c.rope_theta = arch::parse_rope_theta(j, 10000.0);
  c.rms_norm_eps = j.number_or("rms_norm_eps", 1e-6);
  c.attention_bias = true;  // always: the config field is not consulted by the reference
  arch::parse_sparse_step_layers(j, c);
  arch::parse_qwen_sliding_window(j, c);
}

}  // namespace

const Architecture& architecture_qwen2_moe() {
  static const Architecture row{
      .model_type = "qwen2_moe",
      .description = "Qwen2-MoE: GQA with q/k/v bias, softmax top-k router, sigmoid-gated shared expert",
      .naming = {},
      .switches = {.shared_experts = "shared_expert_intermediate_size"},
      .parse = parse,
  };
  return row;
}

}  // namespace eq::model
