#include "model/describe.h"

#include <map>

#include "core/printf_string.h"

namespace eq::model {
namespace {

void add_latent(const nlohmann::ordered_json& a, std::vector<std::string>& out) {
  if (!a.contains("latent_attention")) return;
  const auto& m = a["latent_attention"];
  out.push_back(printed("attention   multi-head latent: q_lora %lld, kv_lora %lld, per head %lld + %lld RoPE key, "
                        "%lld value",
                        m["q_lora_rank"].get<long long>(), m["kv_lora_rank"].get<long long>(),
                        m["qk_nope_head_dim"].get<long long>(), m["qk_rope_head_dim"].get<long long>(),
                        m["v_head_dim"].get<long long>()));
}

void add_linear(const nlohmann::ordered_json& a, std::vector<std::string>& out) {
  if (!a.contains("linear_attention")) return;
  const auto& m = a["linear_attention"];
  std::string linear, full;
  std::vector<bool> is_linear(a["layers"].get<size_t>(), false);
  for (const auto& l : m["layers"]) is_linear.at(l.get<size_t>()) = true;
  for (size_t l = 0; l < is_linear.size(); ++l) {
    std::string& list = is_linear[l] ? linear : full;
    list += (list.empty() ? "" : ", ") + std::to_string(l);
  }
  out.push_back(printed("attention   gated delta net on layers %s (%lld key heads x %lld, %lld value heads x %lld, "
                        "conv %lld, %s projections); full attention on layers %s",
                        linear.c_str(), m["key_heads"].get<long long>(), m["key_head_dim"].get<long long>(),
                        m["value_heads"].get<long long>(), m["value_head_dim"].get<long long>(),
                        m["conv_kernel"].get<long long>(), m["fused_projections"].get<bool>() ? "fused" : "separate",
                        full.empty() ? "none" : full.c_str()));
}

void add_window_and_sinks(const nlohmann::ordered_json& a, std::vector<std::string>& out) {
  if (!a.contains("attention_window") && !a.contains("attention_sinks")) return;
  // Sliding-window layers grouped by window size ("32 on layers 0, 2"), then the sinks.
  std::map<long long, std::string> layers_of;
  if (a.contains("attention_window"))
    for (size_t l = 0; l < a["attention_window"].size(); ++l) {
      const long long w = a["attention_window"][l].get<long long>();
      if (w <= 0) continue;
      std::string& list = layers_of[w];
      list += (list.empty() ? "" : ", ") + std::to_string(l);
    }
  std::string line;
  for (const auto& [w, list] : layers_of)
    line += (line.empty() ? "sliding window " : "; ") + std::to_string(w) + " on layers " + list;
  if (line.empty()) line = "full attention on every layer";
  if (a.value("attention_sinks", false)) line += "; a learned sink logit per head";
  out.push_back("attention   " + line);
}

void add_mtp(const nlohmann::ordered_json& a, std::vector<std::string>& out) {
  if (!a.contains("mtp_layers")) return;
  const auto& m = a["mtp_layers"];
  const long long first = m["first"].get<long long>(), count = m["count"].get<long long>();
  const unsigned long long present = m["tensors_present"].get<unsigned long long>();
  out.push_back(printed("mtp layers  %lld multi-token-prediction layer(s), model.layers.%lld%s: skipped by every "
                        "command%s",
                        count, first, count > 1 ? ("-" + std::to_string(first + count - 1)).c_str() : "",
                        present ? (" (" + std::to_string(present) + " tensors, counted under other)").c_str()
                                : " (none in this checkpoint)"));
}

}  // namespace

std::vector<std::string> describe_architecture(const nlohmann::ordered_json& a) {
  std::vector<std::string> out;
  out.push_back("model_type  " + a["model_type"].get<std::string>());
  out.push_back(printed("layers      %lld (%lld MoE) x %lld experts, top-%lld", a["layers"].get<long long>(),
                        a["moe_layers"].get<long long>(), a["experts"].get<long long>(), a["top_k"].get<long long>()));
  out.push_back(printed("hidden      %lld, expert intermediate %lld, heads %lld/%lld (head_dim %lld), vocab %lld",
                        a["hidden_size"].get<long long>(), a["expert_intermediate_size"].get<long long>(),
                        a["heads"].get<long long>(), a["kv_heads"].get<long long>(), a["head_dim"].get<long long>(),
                        a["vocab_size"].get<long long>()));
  add_latent(a, out);
  add_linear(a, out);
  add_window_and_sinks(a, out);
  add_mtp(a, out);
  return out;
}

}  // namespace eq::model
