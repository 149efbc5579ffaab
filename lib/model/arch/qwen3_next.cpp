// Qwen3-Next: hybrid layers, most of them a gated delta net (linear
// attention with a causal conv1d and a decaying recurrent state, fused
// in_proj_qkvz / in_proj_ba grouped per key head), the others grouped-query
// attention with an output gate, per-head zero-centred q/k RMSNorm and RoPE
// on the first partial_rotary_factor of each head; zero-centred RMSNorms
// (1 + w); softmax top-k router, a shared expert gated by
// sigmoid(x · shared_expert_gate); dense layers by decoder_sparse_step /
// mlp_only_layers.
#include "model/arch/architecture.h"
#include "model/arch/common.h"

namespace eq::model {
namespace {

void parse(const arch::JsonNode& j, ModelConfig& c) {
  c.moe_intermediate_size = arch::parse_expert_size(j, "moe_intermediate_size");
  arch::parse_gated_shared_expert(j, c);
  c.norm_topk_prob = j.bool_or("norm_topk_prob", true);
  c.rms_norm_eps = j.number_or("rms_norm_eps", 1e-6);
  c.attention_bias = j.bool_or("attention_bias", false);
  arch::parse_rope(j, 10000.0, 0.25, c);
  arch::parse_sparse_step_layers(j, c);
  arch::parse_gated_delta_layers(j, /*fused=*/true, c);
}

}  // namespace

const Architecture& architecture_qwen3_next() {
  static const Architecture row{
      .model_type = "qwen3_next",
      .description = "Qwen3-Next: gated delta net layers (fused projections) with gated GQA layers, partial RoPE, "
                     "zero-centred norms, softmax top-k router, sigmoid-gated shared expert",
      .naming = {},
      .switches = {.shared_experts = "shared_expert_intermediate_size"},
      .parse = parse,
  };
  return row;
}

}  // namespace eq::model
