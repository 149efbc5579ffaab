#include "support/random_moe.h"

#include <cmath>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "io/text_file.h"
#include "tokenizer/tokenizer.h"

namespace eq::test {

std::filesystem::path write_random_moe(const std::filesystem::path& dir, const RandomMoeSpec& s) {
  constexpr int64_t kHeads = 2, kKvHeads = 1, kHeadDim = 16;
  const int64_t H = s.hidden, I = s.intermediate;
  std::filesystem::create_directories(dir);
  int64_t vocab = 256;
  if (!s.tokenizer.empty()) {
    const auto json = s.tokenizer / "tokenizer.json";
    const std::string text = io::read_file_bytes(std::filesystem::exists(json) ? json.string() : json.string() + ".zst");
    std::ofstream(dir / "tokenizer.json", std::ios::binary) << text;
    std::filesystem::copy_file(s.tokenizer / "tokenizer_config.json", dir / "tokenizer_config.json",
                               std::filesystem::copy_options::overwrite_existing);
    vocab = tokenizer::parse_tokenizer_json(text, json.string())->vocab_size();
  }
  const nlohmann::json config = {
      {"architectures", {"Qwen3MoeForCausalLM"}}, {"model_type", "qwen3_moe"}, {"vocab_size", vocab},
      {"hidden_size", H}, {"intermediate_size", 2 * H}, {"moe_intermediate_size", I},
      {"num_hidden_layers", s.layers}, {"num_attention_heads", kHeads}, {"num_key_value_heads", kKvHeads},
      {"head_dim", kHeadDim}, {"num_experts", s.experts}, {"num_experts_per_tok", s.top_k},
      {"norm_topk_prob", true}, {"decoder_sparse_step", 1}, {"mlp_only_layers", nlohmann::json::array()},
      {"rms_norm_eps", 1e-6}, {"rope_theta", 10000.0}, {"max_position_embeddings", 512},
      {"tie_word_embeddings", false}, {"torch_dtype", "float32"}};
  std::ofstream(dir / "config.json") << config.dump(2);

  std::mt19937 rng(s.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>> weights;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float scale, float offset = 0) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = offset + scale * normal(rng);
    weights[name] = {std::move(shape), std::move(v)};
  };
  const float lin = 1.0f / std::sqrt(static_cast<float>(H));
  add("model.embed_tokens.weight", {vocab, H}, 1.0f);
  add("lm_head.weight", {vocab, H}, lin);
  add("model.norm.weight", {H}, 0.1f, 1.0f);
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {H}, 0.1f, 1.0f);
    add(p + "post_attention_layernorm.weight", {H}, 0.1f, 1.0f);
    add(p + "self_attn.q_proj.weight", {kHeads * kHeadDim, H}, lin);
    add(p + "self_attn.k_proj.weight", {kKvHeads * kHeadDim, H}, lin);
    add(p + "self_attn.v_proj.weight", {kKvHeads * kHeadDim, H}, lin);
    add(p + "self_attn.o_proj.weight", {H, kHeads * kHeadDim}, 1.0f / std::sqrt(float(kHeads * kHeadDim)));
    add(p + "self_attn.q_norm.weight", {kHeadDim}, 0.1f, 1.0f);
    add(p + "self_attn.k_norm.weight", {kHeadDim}, 0.1f, 1.0f);
    add(p + "mlp.gate.weight", {s.experts, H}, 2.0f * lin);
    for (int64_t e = 0; e < s.experts; ++e) {
      const std::string x = p + "mlp.experts." + std::to_string(e) + ".";
      add(x + "gate_proj.weight", {I, H}, lin);
      add(x + "up_proj.weight", {I, H}, lin);
      add(x + "down_proj.weight", {H, I}, 1.0f / std::sqrt(static_cast<float>(I)));
    }
  }
  std::vector<io::TensorToWrite> tensors;
  for (const auto& [name, w] : weights)
    tensors.push_back({name, DType::kF32, w.first,
                       {reinterpret_cast<const uint8_t*>(w.second.data()), w.second.size() * sizeof(float)}});
  io::write_safetensors((dir / "model.safetensors").string(), tensors);
  return dir;
}

}  // namespace eq::test
