// Qwen3-MoE: per-head q/k RMSNorm, softmax router with optional top-k
// renormalization, no shared expert; dense layers by decoder_sparse_step /
// mlp_only_layers.
#include "model/arch/architecture.h"
#include "model/arch/common.h"

namespace eq::model {
namespace {

void parse(const arch::JsonNode& j, ModelConfig& c) {
  c.moe_intermediate_size = arch::parse_expert_size(j, "moe_intermediate_size");
  c.norm_topk_prob = j.bool_or("norm_topk_prob", false);
  c.rope_theta = arch::parse_rope_theta(j, 10000.0);
  c.rms_norm_eps = j.number_or("rms_norm_eps", 1e-6);
  c.attention_bias = j.bool_or("attention_bias", false);
  c.qk_norm = QkNorm::kPerHead;
  arch::parse_sparse_step_layers(j, c);
  arch::parse_qwen_sliding_window(j, c);
}

}  // namespace

const Architecture& architecture_qwen3_moe() {
  static const Architecture row{
      .model_type = "qwen3_moe",
      .description = "Qwen3-MoE: GQA with per-head q/k norm, softmax top-k router",
      .naming = {},
      .parse = parse,
  };
  return row;
}

}  // namespace eq::model
