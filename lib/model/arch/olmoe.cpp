// OLMoE: q/k RMSNorm over the whole projection, optional q/k/v clamping
// (clip_qkv), softmax router; every layer MoE.
#include "model/arch/architecture.h"
#include "core/error.h"
#include "model/arch/common.h"

namespace eq::model {
namespace {

void parse(const arch::JsonNode& j, ModelConfig& c) {
  c.moe_intermediate_size = arch::parse_expert_size(j, "intermediate_size");
  c.norm_topk_prob = j.bool_or("norm_topk_prob", false);
  c.rope_theta = arch::parse_rope_theta(j, 10000.0);
  c.rms_norm_eps = j.number_or("rms_norm_eps", 1e-5);
  c.attention_bias = j.bool_or("attention_bias", false);
  c.qk_norm = QkNorm::kWhole;
  c.clip_qkv = j.number_or("clip_qkv", 0.0);
  if (!(c.clip_qkv >= 0)) j.invalid_member("clip_qkv", "must be >= 0 (0 = no clamping)");
}

}  // namespace

const Architecture& architecture_olmoe() {
  static const Architecture row{
      .model_type = "olmoe",
      .description = "OLMoE: GQA with whole-projection q/k norm and optional q/k/v clamp, softmax top-k router",
      .naming = {},
      .parse = parse,
  };
  return row;
}

}  // namespace eq::model
