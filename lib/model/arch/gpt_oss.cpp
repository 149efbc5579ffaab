// gpt-oss: grouped-query attention with q/k/v/o biases, one learned sink
// logit per head, and per-layer sliding-window or full attention
// (layer_types); YaRN RoPE over the whole head; a router linear with bias
// whose top-k logits are softmaxed; experts stored stacked with gate and up
// interleaved in one gate_up_proj (bf16 [E, H, 2I], or the MXFP4 release
// layout), per-expert biases and the clamped SwiGLU; every layer MoE, no
// shared expert.
#include "model/arch/architecture.h"
#include "model/arch/common.h"

#include <cmath>

#include "core/error.h"

namespace eq::model {
namespace {

// The YaRN settings the reference configuration uses when config.json
// carries no RoPE dict.
nlohmann::json default_rope(const arch::JsonNode& j) {
  return {{"rope_type", "yarn"},
          {"rope_theta", j.number_or("rope_theta", 150000.0)},
          {"factor", 32.0},
          {"beta_fast", 32.0},
          {"beta_slow", 1.0},
          {"truncate", false},
          {"original_max_position_embeddings", 4096}};
}

// layer_types (default: even layers sliding, odd layers full) with
// sliding_window (default 128); a null sliding_window leaves every layer full.
void parse_attention_windows(const arch::JsonNode& j, ModelConfig& c) {
  const int64_t window = arch::parse_sliding_window(j, 128);
  arch::set_attention_windows(j, window, [](int64_t l) { return l % 2 == 0; }, c);
}

void parse(const arch::JsonNode& j, ModelConfig& c) {
  // Missing fields take the reference configuration's defaults.
  c.moe_intermediate_size = arch::parse_expert_size(j, "intermediate_size");
  c.router_scoring = RouterScoring::kTopKSoftmax;
  c.router_bias = true;
  c.norm_topk_prob = false;  // the softmax over the k logits already sums to 1
  c.rms_norm_eps = j.number_or("rms_norm_eps", 1e-5);
  c.attention_bias = c.attention_out_bias = j.bool_or("attention_bias", true);
  c.attention_sinks = true;
  parse_attention_windows(j, c);
  const auto is_dict = [&](const char* key) { return j.value().contains(key) && j.value()[key].is_object(); };
  const bool has_rope_dict = is_dict("rope_parameters") || is_dict("rope_scaling");
  if (has_rope_dict) {
    arch::parse_rope(j, 150000.0, 1.0, c);
  } else {
    nlohmann::json with_default = j.value();
    with_default["rope_parameters"] = default_rope(j);
    arch::parse_rope(arch::JsonNode(with_default, j.file(), j.path()), 150000.0, 1.0, c);
  }
  c.expert_activation.kind = ActivationKind::kSwiGluClamped;
  c.expert_activation.alpha = static_cast<float>(j.number_or("swiglu_alpha", 1.702));
  c.expert_activation.limit = static_cast<float>(j.number_or("swiglu_limit", 7.0));
  if (!(c.expert_activation.limit > 0) || !std::isfinite(c.expert_activation.limit) ||
      !std::isfinite(c.expert_activation.alpha))
    j.invalid("fields 'swiglu_limit' (positive) and 'swiglu_alpha' must be finite numbers");
}

}  // namespace

const Architecture& architecture_gpt_oss() {
  static const Architecture row{
      .model_type = "gpt_oss",
      .description = "gpt-oss: GQA with q/k/v/o bias, per-head attention sinks and sliding-window layers, YaRN "
                     "RoPE, biased router with softmax over the top-k logits, stacked fused experts with biases "
                     "and clamped SwiGLU",
      .naming = {.router = "router"},
      .expert_storage = ExpertStorage::kStackedFusedInterleaved,
      .parse = parse,
  };
  return row;
}

}  // namespace eq::model
