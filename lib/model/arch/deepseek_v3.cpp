// DeepSeek-V3 (and R1, Kimi-K2): multi-head latent attention with YaRN RoPE
// on the last qk_rope_head_dim dims of a head (interleaved pairs by default)
// and a softmax scale multiplied by mscale(factor, mscale_all_dim)²; grouped
// sigmoid router with a selection-only correction bias and scaled weights;
// ungated shared experts ("shared_experts"); the first
// first_k_dense_replace layers (and those off moe_layer_freq) dense;
// multi-token-prediction layers stored after the last are skipped.
#include "model/arch/architecture.h"
#include "model/arch/common.h"

namespace eq::model {
namespace {

void parse(const arch::JsonNode& j, ModelConfig& c) {
  // Missing fields take the reference configuration's defaults.
  arch::parse_grouped_sigmoid_router(
      j, {.norm_topk_prob = true, .n_group = 8, .topk_group = 4, .routed_scaling_factor = 2.5}, c);
  c.rms_norm_eps = j.number_or("rms_norm_eps", 1e-6);
  c.attention_bias = j.bool_or("attention_bias", false);
  c.attention = AttentionKind::kLatent;
  // q_lora_rank null: queries straight from q_proj; absent: the default rank.
  c.q_lora_rank = j.has_null("q_lora_rank") ? 0 : arch::get_size(j, "q_lora_rank", 1536);
  c.kv_lora_rank = arch::get_size(j, "kv_lora_rank", 512);
  c.qk_nope_head_dim = arch::get_size(j, "qk_nope_head_dim", 128);
  c.qk_rope_head_dim = arch::get_size(j, "qk_rope_head_dim", 64);
  c.v_head_dim = arch::get_size(j, "v_head_dim", 128);
  arch::check_max(j, c.q_lora_rank, kMaxConfigDim, "q_lora_rank");
  arch::check_max(j, c.kv_lora_rank, kMaxConfigDim, "kv_lora_rank");
  arch::check_max(j, c.qk_nope_head_dim, kMaxConfigDim, "qk_nope_head_dim");
  arch::check_max(j, c.qk_rope_head_dim, kMaxConfigDim, "qk_rope_head_dim");
  arch::check_max(j, c.v_head_dim, kMaxConfigDim, "v_head_dim");
  c.num_kv_heads = c.num_heads;  // every head has its own key and value
  c.latent_norm_eps = 1e-6;      // q_a_layernorm and kv_a_layernorm keep the default, whatever rms_norm_eps is
  c.head_dim = c.qk_rope_head_dim;  // the RoPE dims are what the rope fields describe
  arch::parse_rope(j, 10000.0, 1.0, c);
  c.head_dim = c.qk_nope_head_dim + c.qk_rope_head_dim;
  c.rope_interleave = j.bool_or("rope_interleave", true);
  // With YaRN the softmax scale grows by mscale(factor, mscale_all_dim)².
  if (const double all_dim = arch::rope_mscale_all_dim(j); c.rope_yarn.active() && all_dim != 0) {
    const double m = arch::yarn_mscale(c.rope_yarn.factor, all_dim);
    c.attention_scale_factor = m * m;
  }
  arch::parse_first_dense_layers(j, /*default_first=*/3, /*layer_freq=*/true, c);
  arch::parse_mtp_layers(j, c);
}

}  // namespace

const Architecture& architecture_deepseek_v3() {
  static const Architecture row{
      .model_type = "deepseek_v3",
      .description = "DeepSeek-V3: multi-head latent attention with YaRN RoPE, grouped sigmoid router with "
                     "correction bias, ungated shared experts, first layers dense",
      .naming = {.shared_expert = "shared_experts"},
      .switches = {.shared_experts = "n_shared_experts"},
      .parse = parse,
  };
  return row;
}

}  // namespace eq::model
