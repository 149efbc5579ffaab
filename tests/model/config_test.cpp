#include <gtest/gtest.h>

#include <algorithm>
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

TEST(Config, ErrorsNameTheField) {
  auto j = qwen3_json();
  j["model_type"] = "llama";
  auto msg = error_of(j);
  EXPECT_NE(msg.find("'llama' is not supported"), std::string::npos) << msg;
  EXPECT_NE(msg.find("mixtral, olmoe, qwen2_moe, qwen3_moe"), std::string::npos) << msg;
  j = qwen3_json();
  j.erase("num_local_experts");
  EXPECT_NE(error_of(j).find("num_local_experts"), std::string::npos);
  j = qwen3_json();
  j["hidden_size"] = "wide";
  EXPECT_NE(error_of(j).find("'hidden_size' must be an integer"), std::string::npos);
  j = qwen3_json();
  j["num_experts_per_tok"] = 9;
  EXPECT_NE(error_of(j).find("num_experts_per_tok"), std::string::npos);
  j = qwen3_json();
  j["num_key_value_heads"] = 3;
  EXPECT_NE(error_of(j).find("multiple of num_key_value_heads"), std::string::npos);
  // Values that parse but would give NaN logits are refused for every architecture.
  for (const char* type : {"qwen3_moe", "qwen2_moe", "mixtral", "olmoe"}) {
    j = qwen3_json();
    j["model_type"] = type;
    j["intermediate_size"] = 40;
    j["rms_norm_eps"] = -1;
    EXPECT_NE(error_of(j).find("'rms_norm_eps' must be a positive"), std::string::npos) << type;
    j["rms_norm_eps"] = 1e-6;
    j.erase("rope_parameters");
    j["rope_theta"] = 0;
    EXPECT_NE(error_of(j).find("'rope_theta' must be a positive"), std::string::npos) << type;
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

// Every number of config.json is range-checked, naming the field.
TEST(Config, NumbersOutOfRangeNameTheField) {
  auto j = qwen3_json();
  j["moe_intermediate_size"] = 0;
  auto msg = error_of(j);
  EXPECT_NE(msg.find("cfg.json: field 'moe_intermediate_size'"), std::string::npos) << msg;
  j = qwen3_json();
  j["mlp_only_layers"] = {1, 7};
  msg = error_of(j);
  EXPECT_NE(msg.find("field 'mlp_only_layers' holds layer 7, outside [0, 3)"), std::string::npos) << msg;
  j = qwen3_json();
  j["model_type"] = "olmoe";
  j["intermediate_size"] = 40;
  j["clip_qkv"] = -1.0;
  msg = error_of(j);
  EXPECT_NE(msg.find("field 'clip_qkv' must be"), std::string::npos) << msg;
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

}  // namespace
}  // namespace eq
