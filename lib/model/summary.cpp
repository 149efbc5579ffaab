#include "model/summary.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "io/quantized_source.h"
#include "io/safetensors.h"
#include "model/config_fields.h"
#include "model/open_checkpoint.h"

namespace eq::model {

namespace {

// A field's value as inspect shows it; per-layer flags as how many are set.
template <class T>
nlohmann::ordered_json shown_value(const T& v) {
  return v;
}
nlohmann::ordered_json shown_value(const std::vector<bool>& bits) {
  return std::count(bits.begin(), bits.end(), true);
}

}  // namespace

nlohmann::ordered_json summarize_checkpoint(const std::string& path, bool list_tensors) {
  std::error_code ec;
  const bool has_config =
      std::filesystem::exists(std::filesystem::path(io::Checkpoint::folder_of(path)) / "config.json", ec);
  std::unique_ptr<io::Checkpoint> ckpt;
  std::optional<ModelConfig> config;
  if (has_config) {
    ModelCheckpoint opened = open_checkpoint(path);
    ckpt = std::move(opened.checkpoint);
    config = std::move(opened.config);
  } else {
    ckpt = io::Checkpoint::open(path);
  }
  nlohmann::ordered_json out;
  out["path"] = path;
  ParamBreakdown b;
  if (config) {
    const ModelConfig& c = *config;
    const io::SourceTensors source(*ckpt, c.source_quant);
    check_against_checkpoint(c, source);
    b = count_parameters(c, source);
    // How each part is stored: "BF16", "F8_E4M3 + block scales", "MXFP4" ...
    std::map<std::string, std::set<std::string>> stored;
    for (const auto& n : source.names()) {
      const auto& i = source.info(n);
      std::string s(dtype_name(i.stored));
      if (i.encoding == io::SourceTensors::Encoding::kFp8Block) s += " + block scales";
      if (i.encoding == io::SourceTensors::Encoding::kMxfp4) s = "MXFP4";
      stored[std::string(tensor_part(c, n))].insert(s);
    }
    nlohmann::ordered_json q;
    q["method"] = c.source_quant.summary();
    for (const auto& [part, kinds] : stored) q["stored"][part] = kinds;
    out["source_quantization"] = q;
    nlohmann::ordered_json a;
    for_each_field(c, [&](const std::string&, const auto& value, std::string_view shown_as) {
      if (!shown_as.empty()) a[std::string(shown_as)] = shown_value(value);
    });
    a["byte_level"] = c.byte_level();
    if (c.attention == AttentionKind::kLatent)
      a["latent_attention"] = {{"q_lora_rank", c.q_lora_rank},           {"kv_lora_rank", c.kv_lora_rank},
                               {"qk_nope_head_dim", c.qk_nope_head_dim}, {"qk_rope_head_dim", c.qk_rope_head_dim},
                               {"v_head_dim", c.v_head_dim}};
    if (c.attention_sinks) a["attention_sinks"] = true;
    // Hybrid models: which layers run the gated delta net, and its shape.
    std::vector<int64_t> linear_layers;
    for (int64_t l = 0; l < c.num_layers; ++l)
      if (c.layer_linear(l)) linear_layers.push_back(l);
    if (!linear_layers.empty())
      a["linear_attention"] = {{"layers", linear_layers},
                               {"key_heads", c.linear.num_key_heads},
                               {"value_heads", c.linear.num_value_heads},
                               {"key_head_dim", c.linear.key_head_dim},
                               {"value_head_dim", c.linear.value_head_dim},
                               {"conv_kernel", c.linear.conv_kernel},
                               {"fused_projections", c.linear.fused_projections}};
    // Per layer: positions a query sees (0 = all).
    if (!c.attention_window.empty()) a["attention_window"] = c.attention_window;
    if (c.num_mtp_layers > 0) {
      // Multi-token-prediction layers: listed, never loaded.
      uint64_t tensors = 0;
      for (const auto& n : source.names()) tensors += is_mtp_tensor(c, n);
      a["mtp_layers"] = {{"first", c.num_layers}, {"count", c.num_mtp_layers}, {"tensors_present", tensors}};
    }
    out["architecture"] = a;
  } else {
    for (const auto& n : ckpt->tensor_names()) {
      const auto& i = ckpt->info(n);
      b.other += i.numel();
      b.other_bytes += i.nbytes();
    }
  }
  auto cat = [](uint64_t params, uint64_t bytes) {
    return nlohmann::ordered_json{{"parameters", params}, {"bytes", bytes}};
  };
  nlohmann::ordered_json p;
  p["total"] = cat(b.total(), b.total_bytes());
  p["routed_experts"] = cat(b.routed_experts, b.routed_experts_bytes);
  p["shared_experts"] = cat(b.shared_experts, b.shared_experts_bytes);
  p["attention"] = cat(b.attention, b.attention_bytes);
  p["embeddings_head"] = cat(b.embeddings_head, b.embeddings_head_bytes);
  p["norms_router"] = cat(b.norms_router, b.norms_router_bytes);
  p["dense_mlp"] = cat(b.dense_mlp, b.dense_mlp_bytes);
  p["other"] = cat(b.other, b.other_bytes);
  out["parameters"] = p;
  std::map<std::string, uint64_t> dtypes;
  for (const auto& n : ckpt->tensor_names()) dtypes[std::string(dtype_name(ckpt->info(n).dtype))] += 1;
  out["dtypes"] = dtypes;
  nlohmann::ordered_json shards = nlohmann::ordered_json::array();
  for (const auto& s : ckpt->shards())
    shards.push_back({{"file", std::filesystem::path(s->path()).filename().string()},
                      {"bytes", s->file_size()},
                      {"tensors", s->tensors().size()}});
  out["shards"] = shards;
  out["tensor_count"] = ckpt->tensor_names().size();
  if (list_tensors) {
    nlohmann::ordered_json t = nlohmann::ordered_json::array();
    for (const auto& n : ckpt->tensor_names()) {
      const auto& i = ckpt->info(n);
      t.push_back({{"name", n}, {"dtype", std::string(dtype_name(i.dtype))}, {"shape", i.shape},
                   {"bytes", i.nbytes()},
                   {"shard", std::filesystem::path(ckpt->shard_of(n).path()).filename().string()}});
    }
    out["tensors"] = t;
  }
  return out;
}

}  // namespace eq::model
