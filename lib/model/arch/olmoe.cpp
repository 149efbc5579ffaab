// OLMoE: q/k RMSNorm over the whole projection, optional q/k/v clamping
// (clip_qkv), softmax router; every layer MoE.
#include "model/arch/architecture.h"
#include "core/error.h"
#include "model/arch/common.h"

namespace eq::model {
namespace {

void parse(const nlohmann::json& j, const std::string& path, ModelConfig& c) {
  c.moe_intermediate_size = arch::parse_expert_size(j, "intermediate_size", path);
  c.norm_topk_prob = arch::get_bool(j, "norm_topk_prob", path, false);
  c.rope_theta = arch::parse_rope_theta(j, path, 10000.0);
  c.rms_norm_eps = arch::get_double(j, "rms_norm_eps", path, 1e-5);
  c.attention_bias = arch::get_bool(j, "attention_bias", path, false);
  c.qk_norm = QkNorm::kWhole;
  c.clip_qkv = arch::get_double(j, "clip_qkv", path, 0.0);
  if (!(c.clip_qkv >= 0)) invalid(path + ": field 'clip_qkv' must be >= 0 (0 = no clamping)");
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
