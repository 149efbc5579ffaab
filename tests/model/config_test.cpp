#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/quantized_source.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/summary.h"
#include "test_support.h"

namespace eq {
namespace {

using nlohmann::json;

json qwen3_json() {
  return json::parse(R"({"model_type":"qwen3_moe","vocab_size":256,"hidden_size":64,"num_hidden_layers":3,
    "num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"num_local_experts":8,"num_experts_per_tok":2,
    "moe_intermediate_size":32,"intermediate_size":128,"norm_topk_prob":true,"rms_norm_eps":1e-6,
    "rope_parameters":{"rope_theta":5000.0,"rope_type":"default"},"decoder_sparse_step":1,"mlp_only_layers":[1]})");
}

std::string error_of(const json& j) {
  try {
    model::parse_config(j, "cfg.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Config, ParsesQwen3Variants) {
  auto c = model::parse_config(qwen3_json(), "cfg.json");
  EXPECT_EQ(c.arch, model::find_architecture("qwen3_moe"));
  ASSERT_NE(c.arch, nullptr);
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.top_k, 2);
  EXPECT_EQ(c.rope_theta, 5000.0);
  EXPECT_EQ(c.qk_norm, model::QkNorm::kPerHead);
  EXPECT_EQ(c.layer_is_moe, (std::vector<bool>{true, false, true}));
  EXPECT_EQ(c.num_moe_layers(), 2);
  // Older hub naming: num_experts and top-level rope_theta.
  auto j = qwen3_json();
  j.erase("num_local_experts");
  j["num_experts"] = 16;
  j.erase("rope_parameters");
  j["rope_theta"] = 1e6;
  c = model::parse_config(j, "cfg.json");
  EXPECT_EQ(c.num_experts, 16);
  EXPECT_EQ(c.rope_theta, 1e6);
  // decoder_sparse_step 2: layers 1, 3, ... are MoE.
  j = qwen3_json();
  j["decoder_sparse_step"] = 2;
  j["mlp_only_layers"] = json::array();
  c = model::parse_config(j, "cfg.json");
  EXPECT_EQ(c.layer_is_moe, (std::vector<bool>{false, true, false}));
}

TEST(Config, ArchitectureSpecificDefaults) {
  auto j = qwen3_json();
  j["model_type"] = "mixtral";
  j["intermediate_size"] = 48;
  j["norm_topk_prob"] = false;  // ignored: mixtral always renormalizes
  auto c = model::parse_config(j, "cfg.json");
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.moe_intermediate_size, 48);
  EXPECT_EQ(model::expert_weight_name(c, 2, 5, model::Proj::kUp), "model.layers.2.block_sparse_moe.experts.5.w3.weight");
  EXPECT_EQ(model::router_name(c, 0), "model.layers.0.block_sparse_moe.gate.weight");
  EXPECT_EQ(c.layer_is_moe, (std::vector<bool>{true, true, true}));

  j = qwen3_json();
  j["model_type"] = "qwen2_moe";
  j["shared_expert_intermediate_size"] = 96;
  j.erase("norm_topk_prob");
  c = model::parse_config(j, "cfg.json");
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.norm_topk_prob);
  EXPECT_EQ(c.shared_expert_intermediate_size, 96);
  EXPECT_TRUE(c.shared_expert_gated);
  EXPECT_EQ(model::shared_expert_gate_name(c, 1), "model.layers.1.mlp.shared_expert_gate.weight");
  EXPECT_EQ(model::shared_expert_name(c, 1, model::Proj::kDown), "model.layers.1.mlp.shared_expert.down_proj.weight");

  j = qwen3_json();
  j["model_type"] = "olmoe";
  j["intermediate_size"] = 40;
  c = model::parse_config(j, "cfg.json");
  EXPECT_EQ(c.qk_norm, model::QkNorm::kWhole);
  EXPECT_EQ(c.moe_intermediate_size, 40);
}

// Sliding windows outside gpt-oss, as the reference applies them: Mixtral's
// sliding_window on every layer (null: none); Qwen2/Qwen3's only with
// use_sliding_window, from max_window_layers on or as layer_types says.
TEST(Config, SlidingWindowsOfMixtralAndQwen) {
  auto j = qwen3_json();
  j["model_type"] = "mixtral";
  j["intermediate_size"] = 48;
  j["sliding_window"] = nullptr;
  EXPECT_TRUE(model::parse_config(j, "cfg.json").attention_window.empty());
  j["sliding_window"] = 4096;
  EXPECT_EQ(model::parse_config(j, "cfg.json").attention_window, (std::vector<int64_t>{4096, 4096, 4096}));

  j = qwen3_json();
  j["sliding_window"] = 4096;  // without use_sliding_window: not applied
  j["max_window_layers"] = 1;
  EXPECT_TRUE(model::parse_config(j, "cfg.json").attention_window.empty());
  j["use_sliding_window"] = true;
  EXPECT_EQ(model::parse_config(j, "cfg.json").attention_window, (std::vector<int64_t>{0, 4096, 4096}));
  j["layer_types"] = {"sliding_attention", "full_attention", "full_attention"};
  EXPECT_EQ(model::parse_config(j, "cfg.json").attention_window, (std::vector<int64_t>{4096, 0, 0}));
  j["layer_types"] = {"sliding_attention", "linear_attention", "full_attention"};
  EXPECT_NE(error_of(j).find("cfg.json: field 'layer_types[1]': must be \"sliding_attention\" or "
                             "\"full_attention\""),
            std::string::npos)
      << error_of(j);
  j.erase("layer_types");
  j["model_type"] = "qwen2_moe";
  j["max_window_layers"] = 2;
  EXPECT_EQ(model::parse_config(j, "cfg.json").attention_window, (std::vector<int64_t>{0, 0, 4096}));
}

TEST(Config, ErrorsNameTheField) {
  auto j = qwen3_json();
  j["model_type"] = "llama";
  auto msg = error_of(j);
  EXPECT_NE(msg.find("'llama' is not supported"), std::string::npos) << msg;
  EXPECT_NE(msg.find("mixtral, olmoe, qwen2_moe, qwen3_5_moe, qwen3_5_moe_text, qwen3_moe, qwen3_next"), std::string::npos) << msg;
  j = qwen3_json();
  j.erase("num_local_experts");
  EXPECT_NE(error_of(j).find("num_local_experts"), std::string::npos);
  j = qwen3_json();
  j["hidden_size"] = "wide";
  EXPECT_NE(error_of(j).find("cfg.json: field 'hidden_size': expected an integer >= 0, found string"), std::string::npos);
  j = qwen3_json();
  j["num_experts_per_tok"] = 9;
  EXPECT_NE(error_of(j).find("num_experts_per_tok"), std::string::npos);
  j = qwen3_json();
  j["num_key_value_heads"] = 3;
  EXPECT_NE(error_of(j).find("multiple of num_key_value_heads"), std::string::npos);
  // Values that parse but would give NaN logits are refused for every architecture.
  for (const char* type : {"qwen3_moe", "qwen2_moe", "mixtral", "olmoe", "deepseek_v3", "glm4_moe"}) {
    j = qwen3_json();
    j["model_type"] = type;
    j["intermediate_size"] = 40;
    j["rms_norm_eps"] = -1;
    EXPECT_NE(error_of(j).find("'rms_norm_eps': must be a positive"), std::string::npos) << type;
    j["rms_norm_eps"] = 1e-6;
    j.erase("rope_parameters");
    j["rope_theta"] = 0;
    EXPECT_NE(error_of(j).find("'rope_theta': must be a positive"), std::string::npos) << type;
  }
}

// deepseek_v3-small's config.json as transformers 5 writes it.
json deepseek_json() {
  return json::parse(R"({"model_type":"deepseek_v3","vocab_size":256,"hidden_size":192,"num_hidden_layers":3,
    "num_attention_heads":4,"num_key_value_heads":4,"head_dim":16,"n_routed_experts":32,"num_experts_per_tok":8,
    "moe_intermediate_size":16,"intermediate_size":320,"n_shared_experts":1,"n_group":8,"topk_group":4,
    "norm_topk_prob":true,"routed_scaling_factor":2.5,"first_k_dense_replace":1,"num_nextn_predict_layers":1,
    "q_lora_rank":96,"kv_lora_rank":64,"qk_nope_head_dim":32,"qk_rope_head_dim":16,"qk_head_dim":48,"v_head_dim":32,
    "rms_norm_eps":1e-6,"rope_interleave":true,"max_position_embeddings":163840,"attention_bias":false,
    "rope_parameters":{"beta_fast":32.0,"beta_slow":1.0,"factor":40.0,"mscale":1.0,"mscale_all_dim":1.0,
      "original_max_position_embeddings":4096,"rope_theta":10000.0,"rope_type":"yarn"}})");
}

// Kimi-K2 ships the DeepSeek-V3 architecture under model_type kimi_k2, with a
// config.json in the older layout (rope_theta + rope_scaling): it parses to
// exactly the fields the same file gives as deepseek_v3.
TEST(Config, KimiK2IsDeepseekV3UnderItsOwnModelType) {
  json j = json::parse(R"({"model_type":"kimi_k2","vocab_size":163840,"hidden_size":7168,"num_hidden_layers":61,
    "num_attention_heads":64,"num_key_value_heads":64,"n_routed_experts":384,"num_experts_per_tok":8,
    "moe_intermediate_size":2048,"intermediate_size":18432,"n_shared_experts":1,"n_group":1,"topk_group":1,
    "norm_topk_prob":true,"routed_scaling_factor":2.827,"scoring_func":"sigmoid","topk_method":"noaux_tc",
    "first_k_dense_replace":1,"moe_layer_freq":1,"num_nextn_predict_layers":0,"q_lora_rank":1536,"kv_lora_rank":512,
    "qk_nope_head_dim":128,"qk_rope_head_dim":64,"v_head_dim":128,"rms_norm_eps":1e-6,"rope_theta":50000.0,
    "rope_scaling":{"type":"yarn","factor":32.0,"beta_fast":1.0,"beta_slow":1.0,"mscale":1.0,"mscale_all_dim":1.0,
      "original_max_position_embeddings":4096},"max_position_embeddings":131072,"attention_bias":false,
    "tie_word_embeddings":false,"torch_dtype":"bfloat16"})");
  const auto kimi = model::parse_config(j, "kimi.json");
  j["model_type"] = "deepseek_v3";
  const auto deepseek = model::parse_config(j, "deepseek.json");
  EXPECT_EQ(kimi.arch, model::find_architecture("kimi_k2"));
  EXPECT_EQ(kimi.attention, model::AttentionKind::kLatent);
  EXPECT_EQ(kimi.num_experts, 384);
  EXPECT_EQ(kimi.router_groups, 1);
  EXPECT_DOUBLE_EQ(kimi.routed_scaling_factor, 2.827);
  EXPECT_EQ(kimi.rope_yarn.factor, 32.0);
  EXPECT_EQ(model::shared_expert_name(kimi, 1, model::Proj::kUp), "model.layers.1.mlp.shared_experts.up_proj.weight");
  const auto a = kimi.fields(), b = deepseek.fields();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].first == "model_type") continue;
    EXPECT_EQ(a[i], b[i]) << a[i].first;
  }
}

TEST(Config, DeepseekV3) {
  auto c = model::parse_config(deepseek_json(), "cfg.json");
  EXPECT_EQ(c.arch, model::find_architecture("deepseek_v3"));
  EXPECT_EQ(c.attention, model::AttentionKind::kLatent);
  EXPECT_EQ(c.num_experts, 32);
  EXPECT_EQ(c.q_lora_rank, 96);
  EXPECT_EQ(c.kv_lora_rank, 64);
  EXPECT_EQ(c.qk_nope_head_dim, 32);
  EXPECT_EQ(c.qk_rope_head_dim, 16);
  EXPECT_EQ(c.v_head_dim, 32);
  EXPECT_EQ(c.head_dim, 48);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.rope_dim, 16);
  EXPECT_TRUE(c.rope_interleave);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.rope_yarn.factor, 40.0);
  EXPECT_EQ(c.rope_yarn.original_max_position_embeddings, 4096);
  EXPECT_EQ(c.rope_yarn.beta_fast, 32.0);
  EXPECT_EQ(c.rope_yarn.beta_slow, 1.0);
  EXPECT_EQ(c.rope_yarn.attention_factor, 1.0);  // mscale(40, 1) / mscale(40, 1)
  const double m = 0.1 * std::log(40.0) + 1.0;   // 1.368888
  EXPECT_NEAR(c.attention_scale_factor, m * m, 1e-15);
  EXPECT_EQ(c.latent_norm_eps, 1e-6);
  EXPECT_EQ(c.router_scoring, model::RouterScoring::kSigmoid);
  EXPECT_TRUE(c.router_correction_bias);
  EXPECT_EQ(c.router_groups, 8);
  EXPECT_EQ(c.router_topk_groups, 4);
  EXPECT_EQ(c.routed_scaling_factor, 2.5);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.shared_expert_intermediate_size, 16);
  EXPECT_FALSE(c.shared_expert_gated);
  EXPECT_EQ(c.layer_is_moe, (std::vector<bool>{false, true, true}));
  EXPECT_EQ(c.num_mtp_layers, 1);
  EXPECT_EQ(model::shared_expert_name(c, 1, model::Proj::kUp), "model.layers.1.mlp.shared_experts.up_proj.weight");
  EXPECT_EQ(model::router_correction_bias_name(c, 2), "model.layers.2.mlp.gate.e_score_correction_bias");
  EXPECT_EQ(model::expected_shape(c, "model.layers.0.self_attn.q_b_proj.weight"), (std::vector<int64_t>{192, 96}));
  EXPECT_EQ(model::expected_shape(c, "model.layers.2.self_attn.kv_a_proj_with_mqa.weight"),
            (std::vector<int64_t>{80, 192}));
  EXPECT_EQ(model::expected_shape(c, "model.layers.0.self_attn.o_proj.weight"), (std::vector<int64_t>{192, 128}));
  // kv_b_proj is split per head, never a LinearOp.
  EXPECT_EQ(model::expected_shape(c, "model.layers.0.self_attn.kv_b_proj.weight"), std::nullopt);
  EXPECT_TRUE(model::is_mtp_tensor(c, "model.layers.3.eh_proj.weight"));
  EXPECT_FALSE(model::is_mtp_tensor(c, "model.layers.2.mlp.gate.weight"));
  EXPECT_EQ(model::tensor_part(c, "model.layers.3.mlp.experts.0.up_proj.weight"), "other");
  EXPECT_EQ(model::tensor_part(c, "model.layers.0.self_attn.kv_a_layernorm.weight"), "norms_router");
  EXPECT_EQ(model::tensor_part(c, "model.layers.0.self_attn.kv_b_proj.weight"), "attention");

  // The older layout: top-level rope_theta and a rope_scaling dict with "type".
  auto j = deepseek_json();
  json rs = j["rope_parameters"];
  rs.erase("rope_type");
  rs.erase("rope_theta");
  rs["type"] = "yarn";
  j.erase("rope_parameters");
  j["rope_scaling"] = rs;
  j["rope_theta"] = 10000.0;
  const auto old = model::parse_config(j, "cfg.json");
  EXPECT_EQ(old.fields(), c.fields());

  // No query LoRA (q_lora_rank null): q_proj from the hidden state.
  j = deepseek_json();
  j["q_lora_rank"] = nullptr;
  c = model::parse_config(j, "cfg.json");
  EXPECT_EQ(c.q_lora_rank, 0);
  EXPECT_EQ(model::expected_shape(c, "model.layers.0.self_attn.q_proj.weight"), (std::vector<int64_t>{192, 192}));
  EXPECT_EQ(model::expected_shape(c, "model.layers.0.self_attn.q_a_proj.weight"), std::nullopt);

  // Without mscale_all_dim the softmax keeps head_dim^-0.5; cos/sin take mscale(factor).
  j = deepseek_json();
  j["rope_parameters"].erase("mscale_all_dim");
  c = model::parse_config(j, "cfg.json");
  EXPECT_EQ(c.attention_scale_factor, 1.0);
  EXPECT_NEAR(c.rope_yarn.attention_factor, m, 1e-15);
  // No factor: max_position_embeddings / original_max_position_embeddings.
  j = deepseek_json();
  j["rope_parameters"].erase("factor");
  j["max_position_embeddings"] = 16384;
  EXPECT_EQ(model::parse_config(j, "cfg.json").rope_yarn.factor, 4.0);
  // Plain RoPE: no YaRN, no softmax factor.
  j = deepseek_json();
  j["rope_parameters"] = {{"rope_theta", 5e4}, {"rope_type", "default"}};
  c = model::parse_config(j, "cfg.json");
  EXPECT_FALSE(c.rope_yarn.active());
  EXPECT_EQ(c.attention_scale_factor, 1.0);
  EXPECT_EQ(c.rope_theta, 5e4);

  // moe_layer_freq: layers from first_k_dense_replace whose index it divides.
  j = deepseek_json();
  j["num_hidden_layers"] = 6;
  j["moe_layer_freq"] = 2;
  EXPECT_EQ(model::parse_config(j, "cfg.json").layer_is_moe,
            (std::vector<bool>{false, false, true, false, true, false}));
  // Missing fields take the reference configuration's defaults.
  j = deepseek_json();
  for (const char* k : {"n_group", "topk_group", "routed_scaling_factor", "first_k_dense_replace", "rope_interleave"})
    j.erase(k);
  j["num_hidden_layers"] = 4;
  c = model::parse_config(j, "cfg.json");
  EXPECT_EQ(c.router_groups, 8);
  EXPECT_EQ(c.router_topk_groups, 4);
  EXPECT_EQ(c.routed_scaling_factor, 2.5);
  EXPECT_TRUE(c.rope_interleave);
  EXPECT_EQ(c.layer_is_moe, (std::vector<bool>{false, false, false, true}));

  j = deepseek_json();
  j["rope_parameters"]["rope_type"] = "longrope";
  EXPECT_NE(error_of(j).find("rope type 'longrope' is not supported"), std::string::npos) << error_of(j);
  j = deepseek_json();
  j["kv_lora_rank"] = 0;
  EXPECT_NE(error_of(j).find("kv_lora_rank"), std::string::npos) << error_of(j);
  j = deepseek_json();
  j["n_group"] = 5;
  EXPECT_NE(error_of(j).find("field 'n_group': 5 must be positive"), std::string::npos) << error_of(j);
}

// glm4_moe-small's config.json as transformers 5 writes it.
json glm4_json() {
  return json::parse(R"({"model_type":"glm4_moe","vocab_size":256,"hidden_size":128,"num_hidden_layers":4,
    "num_attention_heads":8,"num_key_value_heads":2,"head_dim":32,"n_routed_experts":32,"num_experts_per_tok":8,
    "moe_intermediate_size":16,"intermediate_size":256,"n_shared_experts":1,"n_group":1,"topk_group":1,
    "norm_topk_prob":true,"routed_scaling_factor":2.5,"first_k_dense_replace":1,"num_nextn_predict_layers":1,
    "attention_bias":true,"use_qk_norm":true,"partial_rotary_factor":0.5,"rms_norm_eps":1e-5,
    "max_position_embeddings":131072,
    "rope_parameters":{"partial_rotary_factor":0.5,"rope_theta":1000000.0,"rope_type":"default"}})");
}

TEST(Config, Glm4Moe) {
  auto c = model::parse_config(glm4_json(), "cfg.json");
  EXPECT_EQ(c.arch, model::find_architecture("glm4_moe"));
  EXPECT_EQ(c.attention, model::AttentionKind::kGrouped);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.v_head_dim, 32);
  EXPECT_EQ(c.rope_dim, 16);
  EXPECT_FALSE(c.rope_interleave);
  EXPECT_FALSE(c.rope_yarn.active());
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.attention_scale_factor, 1.0);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_EQ(c.qk_norm, model::QkNorm::kPerHead);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.router_scoring, model::RouterScoring::kSigmoid);
  EXPECT_TRUE(c.router_correction_bias);
  EXPECT_EQ(c.router_groups, 1);
  EXPECT_EQ(c.routed_scaling_factor, 2.5);
  EXPECT_EQ(c.shared_expert_intermediate_size, 16);
  EXPECT_FALSE(c.shared_expert_gated);
  EXPECT_EQ(c.layer_is_moe, (std::vector<bool>{false, true, true, true}));
  EXPECT_EQ(c.num_mtp_layers, 1);
  EXPECT_EQ(model::expected_shape(c, "model.layers.1.self_attn.k_proj.weight"), (std::vector<int64_t>{64, 128}));
  // partial_rotary_factor at top level only, and its default; use_qk_norm off.
  auto j = glm4_json();
  j["rope_parameters"].erase("partial_rotary_factor");
  j["partial_rotary_factor"] = 0.25;
  j["use_qk_norm"] = false;
  c = model::parse_config(j, "cfg.json");
  EXPECT_EQ(c.rope_dim, 8);
  EXPECT_EQ(c.qk_norm, model::QkNorm::kNone);
  j.erase("partial_rotary_factor");
  EXPECT_EQ(model::parse_config(j, "cfg.json").rope_dim, 16);
  j["partial_rotary_factor"] = 1.5;
  EXPECT_NE(error_of(j).find("'partial_rotary_factor': must be in (0, 1]"), std::string::npos) << error_of(j);
  j["partial_rotary_factor"] = 0.1;  // 3.2 dims: truncated to 3, odd
  EXPECT_NE(error_of(j).find("must be even"), std::string::npos) << error_of(j);
}

// gpt-oss as transformers saves it; without layer_types / rope_parameters the
// reference configuration's defaults (even layers sliding; YaRN factor 32,
// theta 150000, no truncation).
json gpt_oss_json() {
  return json::parse(R"({"model_type":"gpt_oss","vocab_size":256,"hidden_size":96,"num_hidden_layers":3,
    "num_attention_heads":6,"num_key_value_heads":2,"head_dim":32,"num_local_experts":16,"num_experts_per_tok":4,
    "intermediate_size":64,"attention_bias":true,"rms_norm_eps":1e-5,"sliding_window":32,"swiglu_limit":7.0,
    "layer_types":["sliding_attention","full_attention","sliding_attention"],"max_position_embeddings":131072,
    "rope_parameters":{"beta_fast":32.0,"beta_slow":1.0,"factor":32.0,"original_max_position_embeddings":4096,
    "rope_theta":150000.0,"rope_type":"yarn","truncate":false}})");
}

TEST(Config, GptOss) {
  auto c = model::parse_config(gpt_oss_json(), "cfg.json");
  EXPECT_EQ(c.arch, model::find_architecture("gpt_oss"));
  EXPECT_EQ(c.arch->expert_storage, model::ExpertStorage::kStackedFusedInterleaved);
  EXPECT_EQ(c.attention, model::AttentionKind::kGrouped);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.rope_dim, 32);
  EXPECT_EQ(c.moe_intermediate_size, 64);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_TRUE(c.attention_out_bias);
  EXPECT_TRUE(c.attention_sinks);
  EXPECT_EQ(c.attention_window, (std::vector<int64_t>{32, 0, 32}));
  EXPECT_EQ(c.router_scoring, model::RouterScoring::kTopKSoftmax);
  EXPECT_TRUE(c.router_bias);
  EXPECT_FALSE(c.norm_topk_prob);
  EXPECT_EQ(c.shared_expert_intermediate_size, 0);
  EXPECT_EQ(c.expert_activation.kind, model::ActivationKind::kSwiGluClamped);
  EXPECT_EQ(c.expert_activation.limit, 7.0f);
  EXPECT_EQ(c.expert_activation.alpha, 1.702f);
  EXPECT_TRUE(c.rope_yarn.active());
  EXPECT_EQ(c.rope_yarn.factor, 32.0);
  EXPECT_FALSE(c.rope_yarn.truncate);
  EXPECT_EQ(c.rope_yarn.original_max_position_embeddings, 4096);
  EXPECT_NEAR(c.rope_yarn.attention_factor, 1.3465735902799727, 1e-15);  // the README's recorded scaling
  EXPECT_EQ(c.rope_theta, 150000.0);
  EXPECT_EQ(model::router_name(c, 2), "model.layers.2.mlp.router.weight");
  EXPECT_EQ(model::router_bias_name(c, 2), "model.layers.2.mlp.router.bias");
  EXPECT_EQ(model::tensor_part(c, "model.layers.0.self_attn.sinks"), "attention");
  EXPECT_EQ(model::tensor_part(c, "model.layers.0.mlp.router.bias"), "norms_router");
  EXPECT_EQ(model::tensor_part(c, "model.layers.0.mlp.experts.gate_up_proj_bias"), "routed_experts");

  // The reference configuration's defaults.
  auto j = gpt_oss_json();
  j.erase("layer_types");
  j.erase("rope_parameters");
  j.erase("sliding_window");
  j["swiglu_limit"] = 5.0;
  c = model::parse_config(j, "cfg.json");
  EXPECT_EQ(c.attention_window, (std::vector<int64_t>{128, 0, 128}));
  EXPECT_EQ(c.rope_theta, 150000.0);
  EXPECT_EQ(c.rope_yarn.factor, 32.0);
  EXPECT_FALSE(c.rope_yarn.truncate);
  EXPECT_EQ(c.expert_activation.limit, 5.0f);
  j["sliding_window"] = nullptr;  // no window at all: every layer full
  EXPECT_TRUE(model::parse_config(j, "cfg.json").attention_window.empty());
  j = gpt_oss_json();
  j["layer_types"] = {"sliding_attention", "full_attention"};
  EXPECT_NE(error_of(j).find("'layer_types': has 2 entries for 3 layers"), std::string::npos) << error_of(j);
  j["layer_types"] = {"sliding_attention", "chunked_attention", "full_attention"};
  EXPECT_NE(error_of(j).find("'layer_types[1]'"), std::string::npos) << error_of(j);
  // The layout of the released checkpoints' config: top-level rope_theta with
  // a rope_scaling dict.
  j = gpt_oss_json();
  j["rope_scaling"] = j["rope_parameters"];
  j["rope_scaling"].erase("rope_theta");
  j.erase("rope_parameters");
  j["rope_theta"] = 150000;
  c = model::parse_config(j, "cfg.json");
  EXPECT_EQ(c.rope_theta, 150000.0);
  EXPECT_EQ(c.rope_yarn.factor, 32.0);
  EXPECT_FALSE(c.rope_yarn.truncate);
  EXPECT_NEAR(c.rope_yarn.attention_factor, 1.3465735902799727, 1e-15);
  j = gpt_oss_json();
  j["attention_bias"] = false;
  c = model::parse_config(j, "cfg.json");
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.attention_out_bias);
}

// Figures from gpt_oss-small's README (1,098,690 parameters, 895,488 in routed
// experts), in bf16 and as the MXFP4 release (whose expert blocks count as the
// values they hold).
TEST(Config, GptOssSummaryMatchesReadme) {
  EQ_REQUIRE_SHARED();
  for (const char* m : {"gpt_oss-small", "gpt_oss-small-mxfp4"}) {
    auto s = model::summarize_checkpoint((test::shared_dir() / "models" / m).string(), false);
    EXPECT_EQ(s["architecture"]["model_type"], "gpt_oss") << m;
    EXPECT_EQ(s["architecture"]["moe_layers"], 3) << m;
    EXPECT_EQ(s["architecture"]["experts"], 16) << m;
    EXPECT_EQ(s["architecture"]["attention_sinks"], true) << m;
    EXPECT_EQ(s["architecture"]["attention_window"], nlohmann::json::array({32, 0, 32})) << m;
    EXPECT_EQ(s["parameters"]["total"]["parameters"], 1098690u) << m;
    EXPECT_EQ(s["parameters"]["routed_experts"]["parameters"], 895488u) << m;
  }
}

// The registry holds one row per file under lib/model/arch/, sorted, each
// parsing a config of its own model_type.
TEST(Config, RegistryListsEveryArchitectureFile) {
  std::vector<std::string> types;
  for (const model::Architecture* a : model::all_architectures()) {
    types.emplace_back(a->model_type);
    EXPECT_NE(a->parse, nullptr) << a->model_type;
    EXPECT_FALSE(a->description.empty()) << a->model_type;
    EXPECT_EQ(model::find_architecture(a->model_type), a);
  }
  EXPECT_TRUE(std::is_sorted(types.begin(), types.end()));
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(test::source_dir() / "lib/model/arch")) {
    const std::string stem = e.path().stem().string();
    if (e.path().extension() == ".cpp" && stem != "common" && stem != "registry") files.push_back(stem);
  }
  std::sort(files.begin(), files.end());
  EXPECT_EQ(types, files);
  EXPECT_EQ(model::find_architecture("llama"), nullptr);
}

TEST(Config, BundledModelMatchesItsTensors) {
  const auto path = (test::data_dir() / "tinymoe").string();
  auto c = model::load_config(path);
  auto file = io::Checkpoint::open(path);
  const io::SourceTensors source(*file, c.source_quant);
  const io::SourceTensors* ckpt = &source;
  EXPECT_NO_THROW(model::check_against_checkpoint(c, *ckpt));
  auto b = model::count_parameters(c, *ckpt);
  // Figures from the model's README: 3,425,664 total; experts 3,145,728.
  EXPECT_EQ(b.total(), 3425664u);
  EXPECT_EQ(b.routed_experts, 3145728u);
  // A config that disagrees with the tensors names the tensor.
  c.moe_intermediate_size = 32;
  try {
    model::check_against_checkpoint(c, *ckpt);
    FAIL() << "expected a shape error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.0.mlp.experts.0.gate_proj.weight"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("[64, 128]"), std::string::npos) << e.what();
  }
  c = model::load_config(path);
  c.num_layers = 5;
  c.layer_is_moe.push_back(true);
  EXPECT_THROW(model::check_against_checkpoint(c, *ckpt), Error);
}

TEST(Config, SharedModelSummaryMatchesReadme) {
  EQ_REQUIRE_SHARED();
  auto s = model::summarize_checkpoint((test::shared_dir() / "models/qwen3moe-small").string(), false);
  EXPECT_EQ(s["architecture"]["model_type"], "qwen3_moe");
  EXPECT_EQ(s["architecture"]["layers"], 6);
  EXPECT_EQ(s["architecture"]["experts"], 64);
  EXPECT_EQ(s["architecture"]["top_k"], 4);
  EXPECT_EQ(s["architecture"]["hidden_size"], 192);
  EXPECT_EQ(s["architecture"]["expert_intermediate_size"], 64);
  EXPECT_EQ(s["parameters"]["total"]["parameters"], 14920512u);
  EXPECT_EQ(s["parameters"]["routed_experts"]["parameters"], 14155776u);
  EXPECT_EQ(s["shards"].size(), 3u);
}

// Figures from deepseek_v3-small's README: 1,184,608 parameters, 589,824 in
// routed experts; its config declares one multi-token-prediction layer that
// the checkpoint does not hold.
TEST(Config, DeepseekSummaryMatchesReadme) {
  EQ_REQUIRE_SHARED();
  for (const char* m : {"deepseek_v3-small", "deepseek_v3-small-fp8"}) {
    auto s = model::summarize_checkpoint((test::shared_dir() / "models" / m).string(), false);
    EXPECT_EQ(s["architecture"]["model_type"], "deepseek_v3");
    EXPECT_EQ(s["architecture"]["moe_layers"], 2);
    EXPECT_EQ(s["architecture"]["latent_attention"]["kv_lora_rank"], 64);
    EXPECT_EQ(s["architecture"]["latent_attention"]["q_lora_rank"], 96);
    EXPECT_EQ(s["architecture"]["mtp_layers"]["first"], 3);
    EXPECT_EQ(s["architecture"]["mtp_layers"]["count"], 1);
    EXPECT_EQ(s["architecture"]["mtp_layers"]["tensors_present"], 0u);
    EXPECT_EQ(s["parameters"]["total"]["parameters"], 1184608u) << m;
    EXPECT_EQ(s["parameters"]["routed_experts"]["parameters"], 589824u) << m;
  }
}

// Every number of config.json is range-checked, naming the field.
TEST(Config, NumbersOutOfRangeNameTheField) {
  auto j = qwen3_json();
  j["moe_intermediate_size"] = 0;
  auto msg = error_of(j);
  EXPECT_NE(msg.find("cfg.json: field 'moe_intermediate_size'"), std::string::npos) << msg;
  j = qwen3_json();
  j["mlp_only_layers"] = {1, 7};
  msg = error_of(j);
  EXPECT_NE(msg.find("field 'mlp_only_layers': holds layer 7, outside [0, 3)"), std::string::npos) << msg;
  j = qwen3_json();
  j["model_type"] = "olmoe";
  j["intermediate_size"] = 40;
  j["clip_qkv"] = -1.0;
  msg = error_of(j);
  EXPECT_NE(msg.find("field 'clip_qkv': must be"), std::string::npos) << msg;
  j["clip_qkv"] = 8.0;
  EXPECT_EQ(error_of(j), "");
  j = qwen3_json();
  j["num_experts_per_tok"] = 9;
  msg = error_of(j);
  EXPECT_NE(msg.find("num_experts_per_tok (9) <= experts (8)"), std::string::npos) << msg;
  j = qwen3_json();
  j["max_position_embeddings"] = int64_t(1) << 50;
  msg = error_of(j);
  EXPECT_NE(msg.find("max_position_embeddings"), std::string::npos) << msg;
}

// Fields that hold a value we would silently misread are errors naming the
// field (and, for an enumeration, the allowed values).
TEST(Config, UnknownOrContradictoryValuesNameTheField) {
  auto j = qwen3_json();
  j["num_experts"] = 16;  // num_local_experts is 8
  EXPECT_NE(error_of(j).find("fields 'num_experts' (16) and 'num_local_experts' (8) disagree"), std::string::npos)
      << error_of(j);
  j["num_experts"] = 8;  // agreeing names are fine
  EXPECT_EQ(model::parse_config(j, "cfg.json").num_experts, 8);

  j = deepseek_json();
  j["scoring_func"] = "softmax";
  EXPECT_NE(error_of(j).find("field 'scoring_func': is 'softmax'; allowed: sigmoid"), std::string::npos)
      << error_of(j);
  j["scoring_func"] = "sigmoid";
  j["topk_method"] = "greedy";
  EXPECT_NE(error_of(j).find("field 'topk_method': is 'greedy'; allowed: noaux_tc"), std::string::npos)
      << error_of(j);
  j["topk_method"] = "noaux_tc";
  EXPECT_EQ(error_of(j), "");

  // sliding_window 0 leaves a query no key in the reference's mask; only
  // null means full attention.
  j = gpt_oss_json();
  j["sliding_window"] = 0;
  EXPECT_NE(error_of(j).find("field 'sliding_window': is 0"), std::string::npos) << error_of(j);
  j["sliding_window"] = nullptr;
  EXPECT_TRUE(model::parse_config(j, "cfg.json").attention_window.empty());
  j = qwen3_json();
  j["model_type"] = "mixtral";
  j["sliding_window"] = 0;
  EXPECT_NE(error_of(j).find("field 'sliding_window': is 0"), std::string::npos) << error_of(j);
  j = qwen3_json();
  j["use_sliding_window"] = true;
  j["sliding_window"] = 0;
  EXPECT_NE(error_of(j).find("field 'sliding_window': is 0"), std::string::npos) << error_of(j);
}

// A field of the wrong type is reported as such, never as missing.
TEST(Config, WrongTypesAreNotReportedAsMissing) {
  auto j = qwen3_json();
  j["model_type"] = 7;
  EXPECT_NE(error_of(j).find("cfg.json: field 'model_type' is number, expected a string"), std::string::npos)
      << error_of(j);
  j.erase("model_type");
  EXPECT_NE(error_of(j).find("field 'model_type' is missing"), std::string::npos) << error_of(j);
  j = json{{"model_type", "qwen3_5_moe"}, {"text_config", "qwen3_5_moe_text"}};
  EXPECT_NE(error_of(j).find("field 'text_config' (the text model's config) is string, expected an object"),
            std::string::npos)
      << error_of(j);
  j.erase("text_config");
  EXPECT_NE(error_of(j).find("field 'text_config' (the text model's config) is missing"), std::string::npos)
      << error_of(j);
}

// Each linear-attention size names its field, and so does a mrope_section
// that cannot split the rotated pairs.
TEST(Config, HybridSizesAndMropeSectionNameTheirField) {
  const json base = json::parse(R"({"model_type":"qwen3_next","vocab_size":256,"hidden_size":64,
    "num_hidden_layers":4,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"num_experts":8,
    "num_experts_per_tok":2,"moe_intermediate_size":32,"rms_norm_eps":1e-6,
    "rope_parameters":{"rope_theta":1e7,"rope_type":"default","partial_rotary_factor":0.25},
    "linear_num_key_heads":2,"linear_num_value_heads":4,"linear_key_head_dim":16,"linear_value_head_dim":8,
    "linear_conv_kernel_dim":4})");
  EXPECT_EQ(error_of(base), "");
  for (const char* field : {"linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                            "linear_value_head_dim", "linear_conv_kernel_dim"}) {
    json j = base;
    j[field] = 0;
    EXPECT_NE(error_of(j).find("field '" + std::string(field) + "': must be positive"), std::string::npos)
        << error_of(j);
  }
  // mrope_section: a list of integers summing to the rotated pairs (head_dim
  // 16 x partial_rotary_factor 0.25 = 4 dims, 2 pairs).
  json j = base;
  j["rope_parameters"]["mrope_section"] = "1,1";
  EXPECT_NE(error_of(j).find("field 'rope_parameters.mrope_section': must be a list of integers, found string"),
            std::string::npos)
      << error_of(j);
  j["rope_parameters"]["mrope_section"] = {2, 1, 1};
  EXPECT_NE(error_of(j).find("sums to 4 rotated pairs, the rotated dims per head are 4 (2 pairs)"),
            std::string::npos)
      << error_of(j);
  j["rope_parameters"]["mrope_section"] = {1, 1, 0};
  EXPECT_EQ(error_of(j), "");
  j = base;
  j["linear_num_value_heads"] = 3;
  EXPECT_NE(error_of(j).find("field 'linear_num_value_heads': 3 must be a multiple of linear_num_key_heads (2)"),
            std::string::npos)
      << error_of(j);
}

}  // namespace
}  // namespace eq
