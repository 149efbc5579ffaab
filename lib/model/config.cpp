#include "model/config.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "io/json_guard.h"
#include "io/safetensors.h"
#include "io/text_file.h"

namespace eq::model {

using nlohmann::json;

namespace {

struct ArchRow {
  Arch arch;
  const char* model_type;
  const char* moe_prefix;             // "mlp" or "block_sparse_moe"
  const char* proj_names[3];          // gate, up, down
  const char* expert_size_key;        // key holding the routed expert intermediate size
  bool default_norm_topk;
  double default_rope_theta;
  double default_eps;
};

constexpr ArchRow kArchs[] = {
    {Arch::kQwen3Moe, "qwen3_moe", "mlp", {"gate_proj", "up_proj", "down_proj"}, "moe_intermediate_size", false,
     10000.0, 1e-6},
    {Arch::kQwen2Moe, "qwen2_moe", "mlp", {"gate_proj", "up_proj", "down_proj"}, "moe_intermediate_size", false,
     10000.0, 1e-6},
    {Arch::kMixtral, "mixtral", "block_sparse_moe", {"w1", "w3", "w2"}, "intermediate_size", true, 1e6, 1e-5},
    {Arch::kOlmoe, "olmoe", "mlp", {"gate_proj", "up_proj", "down_proj"}, "intermediate_size", false, 10000.0,
     1e-5},
};

const ArchRow& row(Arch a) { return kArchs[static_cast<int>(a)]; }

int64_t get_int(const json& j, const char* key, const std::string& path, std::optional<int64_t> fallback = {}) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (fallback) return *fallback;
    invalid(path + ": field '" + key + "' is missing");
  }
  if (!it->is_number_integer()) invalid(path + ": field '" + key + "' must be an integer");
  int64_t v = it->get<int64_t>();
  if (v < 0) invalid(path + ": field '" + key + "' must be non-negative, got " + std::to_string(v));
  return v;
}

double get_double(const json& j, const char* key, const std::string& path, double fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number()) invalid(path + ": field '" + key + "' must be a number");
  return it->get<double>();
}

bool get_bool(const json& j, const char* key, const std::string& path, bool fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) invalid(path + ": field '" + key + "' must be true or false");
  return it->get<bool>();
}

// json::value() throws nlohmann's type_error when the field has another type;
// this names the file and field instead.
std::string get_string(const json& j, const char* key, const std::string& path, const std::string& fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_string()) invalid(path + ": field '" + key + "' must be a string");
  return it->get<std::string>();
}

void check_max(int64_t v, int64_t max, const char* what, const std::string& path) {
  if (v > max)
    fail(ErrorKind::kResource, path + ": " + what + " is " + std::to_string(v) + ", more than the supported " +
                                   std::to_string(max));
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

}  // namespace

int64_t ModelConfig::num_moe_layers() const {
  return std::count(layer_is_moe.begin(), layer_is_moe.end(), true);
}

std::vector<std::string> supported_model_types() {
  std::vector<std::string> v;
  for (const auto& r : kArchs) v.push_back(r.model_type);
  return v;
}

std::string arch_name(Arch a) { return row(a).model_type; }

ModelConfig parse_config(const json& j, const std::string& path) {
  if (!j.is_object()) invalid(path + ": not a JSON object");
  if (!j.contains("model_type") || !j["model_type"].is_string())
    invalid(path + ": field 'model_type' is missing (supported: " + join(supported_model_types()) + ")");
  ModelConfig c;
  c.model_type = j["model_type"].get<std::string>();
  const ArchRow* r = nullptr;
  for (const auto& a : kArchs)
    if (c.model_type == a.model_type) r = &a;
  if (!r)
    unsupported(path + ": model_type '" + c.model_type + "' is not supported (supported: " +
                join(supported_model_types()) + ")");
  c.arch = r->arch;
  c.vocab_size = get_int(j, "vocab_size", path);
  c.hidden_size = get_int(j, "hidden_size", path);
  c.num_layers = get_int(j, "num_hidden_layers", path);
  c.num_heads = get_int(j, "num_attention_heads", path);
  c.num_kv_heads = get_int(j, "num_key_value_heads", path, c.num_heads);
  if (c.num_heads == 0 || c.hidden_size == 0 || c.num_layers == 0 || c.vocab_size == 0)
    invalid(path + ": hidden_size, num_hidden_layers, num_attention_heads and vocab_size must be positive");
  check_max(c.vocab_size, kMaxConfigDim, "vocab_size", path);
  check_max(c.hidden_size, kMaxConfigDim, "hidden_size", path);
  check_max(c.num_layers, kMaxConfigLayers, "num_hidden_layers", path);
  check_max(c.num_heads, kMaxConfigDim, "num_attention_heads", path);
  c.head_dim = get_int(j, "head_dim", path, c.hidden_size / c.num_heads);
  check_max(c.head_dim, kMaxConfigDim, "head_dim", path);
  if (c.num_kv_heads == 0 || c.num_heads % c.num_kv_heads != 0)
    invalid(path + ": num_attention_heads (" + std::to_string(c.num_heads) +
            ") must be a multiple of num_key_value_heads (" + std::to_string(c.num_kv_heads) + ")");
  if (c.head_dim == 0 || c.head_dim % 2 != 0) invalid(path + ": head_dim must be even and positive");
  if (j.contains("num_experts") && !j["num_experts"].is_null())
    c.num_experts = get_int(j, "num_experts", path);
  else if (j.contains("num_local_experts") && !j["num_local_experts"].is_null())
    c.num_experts = get_int(j, "num_local_experts", path);
  else
    invalid(path + ": neither 'num_experts' nor 'num_local_experts' is present");
  check_max(c.num_experts, kMaxConfigExperts, "the number of experts", path);
  check_max(c.num_experts * c.num_layers, kMaxConfigLayerExperts, "num_hidden_layers x experts", path);
  c.top_k = get_int(j, "num_experts_per_tok", path);
  if (c.num_experts == 0 || c.top_k == 0 || c.top_k > c.num_experts)
    invalid(path + ": need 0 < num_experts_per_tok (" + std::to_string(c.top_k) + ") <= experts (" +
            std::to_string(c.num_experts) + ")");
  c.moe_intermediate_size = get_int(j, r->expert_size_key, path);
  check_max(c.moe_intermediate_size, kMaxConfigDim, r->expert_size_key, path);
  c.intermediate_size = get_int(j, "intermediate_size", path, 0);
  check_max(c.intermediate_size, kMaxConfigDim, "intermediate_size", path);
  if (c.arch == Arch::kQwen2Moe) c.shared_expert_intermediate_size = get_int(j, "shared_expert_intermediate_size", path, 0);
  check_max(c.shared_expert_intermediate_size, kMaxConfigDim, "shared_expert_intermediate_size", path);
  c.norm_topk_prob = c.arch == Arch::kMixtral ? true : get_bool(j, "norm_topk_prob", path, r->default_norm_topk);
  c.rope_theta = r->default_rope_theta;
  if (j.contains("rope_theta") && !j["rope_theta"].is_null())
    c.rope_theta = get_double(j, "rope_theta", path, c.rope_theta);
  else if (j.contains("rope_parameters") && j["rope_parameters"].is_object())
    c.rope_theta = get_double(j["rope_parameters"], "rope_theta", path + " rope_parameters", c.rope_theta);
  if (j.contains("rope_scaling") && j["rope_scaling"].is_object()) {
    const auto& rs = j["rope_scaling"];
    std::string type = get_string(rs, "rope_type", path + " rope_scaling",
                                  get_string(rs, "type", path + " rope_scaling", "default"));
    if (type != "default") unsupported(path + ": rope_scaling type '" + type + "' is not supported");
  }
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
    std::string type = get_string(j["rope_parameters"], "rope_type", path + " rope_parameters", "default");
    if (type != "default") unsupported(path + ": rope_parameters.rope_type '" + type + "' is not supported");
  }
  c.rms_norm_eps = get_double(j, "rms_norm_eps", path, r->default_eps);
  c.tie_word_embeddings = get_bool(j, "tie_word_embeddings", path, false);
  c.attention_bias = c.arch == Arch::kQwen2Moe ? true : get_bool(j, "attention_bias", path, false);
  c.qk_norm = c.arch == Arch::kQwen3Moe;
  c.qk_norm_full = c.arch == Arch::kOlmoe;
  if (c.arch == Arch::kOlmoe) c.clip_qkv = get_double(j, "clip_qkv", path, 0.0);
  c.max_position_embeddings = get_int(j, "max_position_embeddings", path, 0);
  c.source_dtype = get_string(j, "dtype", path, get_string(j, "torch_dtype", path, "unknown"));
  if (c.source_dtype.empty()) c.source_dtype = "unknown";

  // Which layers are MoE (qwen*: decoder_sparse_step and mlp_only_layers).
  c.layer_is_moe.assign(static_cast<size_t>(c.num_layers), true);
  if (c.arch == Arch::kQwen3Moe || c.arch == Arch::kQwen2Moe) {
    const int64_t step = get_int(j, "decoder_sparse_step", path, 1);
    std::set<int64_t> dense;
    if (j.contains("mlp_only_layers") && j["mlp_only_layers"].is_array())
      for (const auto& v : j["mlp_only_layers"]) {
        if (!v.is_number_integer()) invalid(path + ": mlp_only_layers must hold integers");
        dense.insert(v.get<int64_t>());
      }
    for (int64_t l = 0; l < c.num_layers; ++l)
      c.layer_is_moe[static_cast<size_t>(l)] = !dense.count(l) && step > 0 && (l + 1) % step == 0;
    if (c.num_moe_layers() < c.num_layers && c.intermediate_size == 0)
      invalid(path + ": dense MLP layers need 'intermediate_size'");
  }
  return c;
}

ModelConfig parse_config_text(std::string_view text, const std::string& path) {
  io::check_json_depth(text, path);
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e400
    invalid(path + ": not valid JSON: " + e.what());
  }
  return parse_config(j, path);
}

ModelConfig load_config(const std::string& folder) {
  const std::string path = folder + "/config.json";
  std::ifstream in(path);
  if (!in) fail(ErrorKind::kIo, path + ": cannot open (a checkpoint folder needs config.json)");
  in.close();
  // A config.json is a few kilobytes; 64 MiB is far beyond any real one.
  return parse_config_text(io::read_file_bytes(path, 64ull << 20), path);
}

std::string attn_prefix(int64_t layer) { return "model.layers." + std::to_string(layer) + ".self_attn."; }

std::string router_name(const ModelConfig& c, int64_t layer) {
  return "model.layers." + std::to_string(layer) + "." + row(c.arch).moe_prefix + ".gate.weight";
}

std::string expert_weight_name(const ModelConfig& c, int64_t layer, int64_t expert, Proj p) {
  return "model.layers." + std::to_string(layer) + "." + row(c.arch).moe_prefix + ".experts." +
         std::to_string(expert) + "." + row(c.arch).proj_names[static_cast<int>(p)] + ".weight";
}

namespace {
const char* kHfProj[3] = {"gate_proj", "up_proj", "down_proj"};
}

std::string dense_mlp_name(const ModelConfig&, int64_t layer, Proj p) {
  return "model.layers." + std::to_string(layer) + ".mlp." + kHfProj[static_cast<int>(p)] + ".weight";
}

std::string shared_expert_name(const ModelConfig&, int64_t layer, Proj p) {
  return "model.layers." + std::to_string(layer) + ".mlp.shared_expert." + kHfProj[static_cast<int>(p)] + ".weight";
}

std::string shared_expert_gate_name(const ModelConfig&, int64_t layer) {
  return "model.layers." + std::to_string(layer) + ".mlp.shared_expert_gate.weight";
}

namespace {

std::vector<std::pair<std::string, std::vector<int64_t>>> expected_tensors(const ModelConfig& c) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> t;
  const int64_t H = c.hidden_size, D = c.head_dim, q = c.num_heads * D, kv = c.num_kv_heads * D;
  t.push_back({"model.embed_tokens.weight", {c.vocab_size, H}});
  t.push_back({"model.norm.weight", {H}});
  if (!c.tie_word_embeddings) t.push_back({"lm_head.weight", {c.vocab_size, H}});
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string L = "model.layers." + std::to_string(l) + ".";
    const std::string a = attn_prefix(l);
    t.push_back({L + "input_layernorm.weight", {H}});
    t.push_back({L + "post_attention_layernorm.weight", {H}});
    t.push_back({a + "q_proj.weight", {q, H}});
    t.push_back({a + "k_proj.weight", {kv, H}});
    t.push_back({a + "v_proj.weight", {kv, H}});
    t.push_back({a + "o_proj.weight", {H, q}});
    if (c.attention_bias) {
      t.push_back({a + "q_proj.bias", {q}});
      t.push_back({a + "k_proj.bias", {kv}});
      t.push_back({a + "v_proj.bias", {kv}});
    }
    if (c.qk_norm) {
      t.push_back({a + "q_norm.weight", {D}});
      t.push_back({a + "k_norm.weight", {D}});
    }
    if (c.qk_norm_full) {
      t.push_back({a + "q_norm.weight", {q}});
      t.push_back({a + "k_norm.weight", {kv}});
    }
    if (c.layer_is_moe[static_cast<size_t>(l)]) {
      const int64_t I = c.moe_intermediate_size;
      t.push_back({router_name(c, l), {c.num_experts, H}});
      for (int64_t e = 0; e < c.num_experts; ++e) {
        t.push_back({expert_weight_name(c, l, e, Proj::kGate), {I, H}});
        t.push_back({expert_weight_name(c, l, e, Proj::kUp), {I, H}});
        t.push_back({expert_weight_name(c, l, e, Proj::kDown), {H, I}});
      }
      if (c.shared_expert_intermediate_size > 0) {
        const int64_t S = c.shared_expert_intermediate_size;
        t.push_back({shared_expert_name(c, l, Proj::kGate), {S, H}});
        t.push_back({shared_expert_name(c, l, Proj::kUp), {S, H}});
        t.push_back({shared_expert_name(c, l, Proj::kDown), {H, S}});
        t.push_back({shared_expert_gate_name(c, l), {1, H}});
      }
    } else {
      const int64_t I = c.intermediate_size;
      t.push_back({dense_mlp_name(c, l, Proj::kGate), {I, H}});
      t.push_back({dense_mlp_name(c, l, Proj::kUp), {I, H}});
      t.push_back({dense_mlp_name(c, l, Proj::kDown), {H, I}});
    }
  }
  return t;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

}  // namespace

void check_against_checkpoint(const ModelConfig& c, const io::Checkpoint& ckpt, bool routed_experts,
                              const std::vector<std::string>& provided) {
  std::set<std::string> skip(provided.begin(), provided.end());
  if (!routed_experts)
    for (int64_t l = 0; l < c.num_layers; ++l)
      if (c.layer_is_moe[static_cast<size_t>(l)])
        for (int64_t e = 0; e < c.num_experts; ++e)
          for (Proj p : {Proj::kGate, Proj::kUp, Proj::kDown}) skip.insert(expert_weight_name(c, l, e, p));
  for (const auto& [name, shape] : expected_tensors(c)) {
    if (skip.count(name)) continue;
    if (!ckpt.has(name))
      invalid(ckpt.path() + ": tensor '" + name + "' required by " + c.model_type + " config is missing");
    const auto& info = ckpt.info(name);
    if (info.shape != shape)
      invalid(ckpt.path() + ": tensor '" + name + "' has shape " + shape_str(info.shape) + ", config implies " +
              shape_str(shape));
    if (!dtype_is_float(info.dtype))
      invalid(ckpt.path() + ": tensor '" + name + "' has non-float dtype " + std::string(dtype_name(info.dtype)));
  }
}

std::optional<std::vector<int64_t>> expected_shape(const ModelConfig& c, const std::string& name) {
  const int64_t H = c.hidden_size, q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  if (name == "lm_head.weight" || name == "model.embed_tokens.weight") return std::vector<int64_t>{c.vocab_size, H};
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string a = attn_prefix(l);
    if (name.rfind(a, 0) != 0) continue;
    const std::string rest = name.substr(a.size());
    if (rest == "q_proj.weight") return std::vector<int64_t>{q, H};
    if (rest == "k_proj.weight" || rest == "v_proj.weight") return std::vector<int64_t>{kv, H};
    if (rest == "o_proj.weight") return std::vector<int64_t>{H, q};
  }
  return std::nullopt;
}

ParamBreakdown count_parameters(const ModelConfig& c, const io::Checkpoint& ckpt) {
  ParamBreakdown b;
  const std::string moe = std::string(".") + row(c.arch).moe_prefix + ".";
  for (const auto& name : ckpt.tensor_names()) {
    const auto& info = ckpt.info(name);
    const uint64_t n = info.numel(), bytes = info.nbytes();
    auto add = [&](uint64_t& count, uint64_t& nbytes) {
      count += n;
      nbytes += bytes;
    };
    if (name.find(moe + "experts.") != std::string::npos)
      add(b.routed_experts, b.routed_experts_bytes);
    else if (name.find(".shared_expert.") != std::string::npos)
      add(b.shared_experts, b.shared_experts_bytes);
    else if (name.find(".self_attn.") != std::string::npos && name.find("_norm.") == std::string::npos)
      add(b.attention, b.attention_bytes);
    else if (name == "model.embed_tokens.weight" || name == "lm_head.weight")
      add(b.embeddings_head, b.embeddings_head_bytes);
    else if (name.find("norm") != std::string::npos || name.find(moe + "gate.") != std::string::npos ||
             name.find(".shared_expert_gate.") != std::string::npos)
      add(b.norms_router, b.norms_router_bytes);
    else if (name.find(".mlp.") != std::string::npos)
      add(b.dense_mlp, b.dense_mlp_bytes);
    else
      add(b.other, b.other_bytes);
  }
  return b;
}

}  // namespace eq::model
