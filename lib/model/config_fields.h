// ModelConfig's members as one table (field_table.h): ModelConfig::fields()
// (what a packed folder's config and its source's must agree on) and the
// architecture that `inspect` shows (summary.cpp) are generated from it, in
// its order. A member without a row fails to compile (the static_asserts
// below), so a new field cannot be left out of the comparison by accident.
#pragma once

#include <tuple>
#include <type_traits>

#include "model/activation.h"
#include "model/config.h"
#include "model/field_table.h"

namespace eq::model {

constexpr auto field_rows(std::type_identity<YarnScaling>) {
  using Y = YarnScaling;
  return std::tuple{field("factor", &Y::factor),
                    field("original_max_position_embeddings", &Y::original_max_position_embeddings),
                    field("beta_fast", &Y::beta_fast),
                    field("beta_slow", &Y::beta_slow),
                    field("truncate", &Y::truncate),
                    field("attention_factor", &Y::attention_factor)};
}

constexpr auto field_rows(std::type_identity<LinearAttentionConfig>) {
  using L = LinearAttentionConfig;
  return std::tuple{field("num_key_heads", &L::num_key_heads),
                    field("num_value_heads", &L::num_value_heads),
                    field("key_head_dim", &L::key_head_dim),
                    field("value_head_dim", &L::value_head_dim),
                    field("conv_kernel_dim", &L::conv_kernel),
                    field("fused_projections", &L::fused_projections)};
}

constexpr auto field_rows(std::type_identity<Activation>) {
  return std::tuple{field("", &Activation::kind), field("alpha", &Activation::alpha),
                    field("limit", &Activation::limit)};
}

// The rows shown by inspect come first, in the order it shows them.
constexpr auto field_rows(std::type_identity<ModelConfig>) {
  using C = ModelConfig;
  return std::tuple{
      field("model_type", &C::model_type, "model_type"),
      field("num_hidden_layers", &C::num_layers, "layers"),
      field("moe_layers", &C::layer_is_moe, "moe_layers"),  // shown as a count
      field("num_experts", &C::num_experts, "experts"),
      field("num_experts_per_tok", &C::top_k, "top_k"),
      field("hidden_size", &C::hidden_size, "hidden_size"),
      field("moe_intermediate_size", &C::moe_intermediate_size, "expert_intermediate_size"),
      field("shared_expert_intermediate_size", &C::shared_expert_intermediate_size, "shared_expert_intermediate_size"),
      field("num_attention_heads", &C::num_heads, "heads"),
      field("num_key_value_heads", &C::num_kv_heads, "kv_heads"),
      field("head_dim", &C::head_dim, "head_dim"),
      field("vocab_size", &C::vocab_size, "vocab_size"),
      field("norm_topk_prob", &C::norm_topk_prob, "norm_topk_prob"),
      field("rope_theta", &C::rope_theta, "rope_theta"),
      field("rms_norm_eps", &C::rms_norm_eps, "rms_norm_eps"),
      field("tie_word_embeddings", &C::tie_word_embeddings, "tie_word_embeddings"),
      field("intermediate_size", &C::intermediate_size),
      field("shared_expert_gated", &C::shared_expert_gated),
      field("router_scoring", &C::router_scoring),
      field("router_bias", &C::router_bias),
      field("router_correction_bias", &C::router_correction_bias),
      field("router_groups", &C::router_groups),
      field("router_topk_groups", &C::router_topk_groups),
      field("routed_scaling_factor", &C::routed_scaling_factor),
      field("rope_dim", &C::rope_dim),
      field("rope_interleave", &C::rope_interleave),
      nested("rope_yarn", &C::rope_yarn),
      field("attention_bias", &C::attention_bias),
      field("attention_out_bias", &C::attention_out_bias),
      field("attention_sinks", &C::attention_sinks),
      field("attention_window", &C::attention_window),
      field("qk_norm", &C::qk_norm),
      field("clip_qkv", &C::clip_qkv),
      field("attention", &C::attention),
      field("v_head_dim", &C::v_head_dim),
      field("q_lora_rank", &C::q_lora_rank),
      field("kv_lora_rank", &C::kv_lora_rank),
      field("qk_nope_head_dim", &C::qk_nope_head_dim),
      field("qk_rope_head_dim", &C::qk_rope_head_dim),
      field("latent_norm_eps", &C::latent_norm_eps),
      field("attention_scale_factor", &C::attention_scale_factor),
      field("max_position_embeddings", &C::max_position_embeddings),
      nested("expert_activation", &C::expert_activation),
      field("num_mtp_layers", &C::num_mtp_layers),
      field("attention_output_gate", &C::attention_output_gate),
      field("norm_zero_centred", &C::norm_zero_centred),
      field("linear_layers", &C::layer_is_linear),
      nested("linear", &C::linear),
      // Follows from model_type.
      unlisted(&C::arch),
      // How the checkpoint stores its weights (the declared dtype, the
      // quantization), not what the model computes; SourceTensors checks the
      // tensors against the quantization when they are opened.
      unlisted(&C::source_dtype),
      unlisted(&C::source_quant)};
}

static_assert(covers_every_member<YarnScaling>(field_rows(std::type_identity<YarnScaling>{})),
              "every member of YarnScaling needs a row in field_rows (config_fields.h)");
static_assert(covers_every_member<LinearAttentionConfig>(field_rows(std::type_identity<LinearAttentionConfig>{})),
              "every member of LinearAttentionConfig needs a row in field_rows (config_fields.h)");
static_assert(covers_every_member<Activation>(field_rows(std::type_identity<Activation>{})),
              "every member of Activation needs a row in field_rows (config_fields.h)");
static_assert(covers_every_member<ModelConfig>(field_rows(std::type_identity<ModelConfig>{})),
              "every member of ModelConfig needs a row in field_rows (config_fields.h)");

}  // namespace eq::model
