// GLM-4.5 MoE: grouped-query attention with q/k/v biases, optional per-head
// q/k RMSNorm (use_qk_norm) and RoPE on the first partial_rotary_factor of
// each head; the grouped sigmoid router with a selection-only correction bias
// and scaled weights; ungated shared experts ("shared_experts"); the first
// first_k_dense_replace layers dense; multi-token-prediction layers stored
// after the last are skipped.
#include "model/arch/architecture.h"
#include "model/arch/common.h"

namespace eq::model {
namespace {

void parse(const arch::JsonNode& j, ModelConfig& c) {
  // Missing fields take the reference configuration's defaults.
  arch::parse_grouped_sigmoid_router(
      j, {.norm_topk_prob = true, .n_group = 1, .topk_group = 1, .routed_scaling_factor = 1.0}, c);
  c.rms_norm_eps = j.number_or("rms_norm_eps", 1e-5);
  c.attention_bias = j.bool_or("attention_bias", false);  // q/k/v; o_proj has none
  c.qk_norm = j.bool_or("use_qk_norm", false) ? QkNorm::kPerHead : QkNorm::kNone;
  arch::parse_rope(j, 10000.0, 0.5, c);
  arch::parse_first_dense_layers(j, /*default_first=*/1, /*layer_freq=*/false, c);
  arch::parse_mtp_layers(j, c);
}

}  // namespace

const Architecture& architecture_glm4_moe() {
  static const Architecture row{
      .model_type = "glm4_moe",
      .description = "GLM-4.5 MoE: GQA with q/k/v bias, optional per-head q/k norm and partial RoPE, grouped "
                     "sigmoid router with correction bias, ungated shared experts, first layers dense",
      .naming = {.shared_expert = "shared_experts"},
      .switches = {.qk_norm = "use_qk_norm", .shared_experts = "n_shared_experts"},
      .parse = parse,
  };
  return row;
}

}  // namespace eq::model
