#include "model/config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <type_traits>

#include "core/error.h"
#include "core/shape.h"
#include "io/json_guard.h"
#include "io/layer_names.h"
#include "io/safetensors.h"
#include "io/text_file.h"
#include "model/arch/common.h"
#include "model/config_fields.h"
#include "model/expert_reader.h"

namespace eq::model {

using nlohmann::json;

namespace {

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

// The grouped selection needs whole groups and enough experts in the kept
// groups for top-k; a scaling factor that is not positive and finite would
// make every combine weight zero or NaN.
void check_router_fields(const ModelConfig& c, const io::JsonNode& j) {
  const int64_t G = c.router_groups, TG = c.router_topk_groups;
  if (G < 1 || c.num_experts % G != 0)
    j.invalid_member("n_group", std::to_string(G) + " must be positive and divide the " +
                                    std::to_string(c.num_experts) + " experts");
  if (TG < 1 || TG > G)
    j.invalid_member("topk_group", std::to_string(TG) + " must be in [1, n_group = " + std::to_string(G) + "]");
  if (TG * (c.num_experts / G) < c.top_k)
    j.invalid("topk_group x experts per group (" + std::to_string(TG * (c.num_experts / G)) +
              ") is less than num_experts_per_tok (" + std::to_string(c.top_k) + ")");
  if (!(c.routed_scaling_factor > 0) || !std::isfinite(c.routed_scaling_factor))
    j.invalid_member("routed_scaling_factor", "must be a positive finite number");
}

// The widths every attention kind sizes its buffers from, and the RoPE and
// softmax factors that would otherwise turn into NaN logits.
void check_attention_fields(const ModelConfig& c, const std::string& path) {
  if (c.attention == AttentionKind::kLatent) {
    if (c.kv_lora_rank <= 0 || c.qk_nope_head_dim <= 0 || c.qk_rope_head_dim <= 0 || c.v_head_dim <= 0)
      invalid(path + ": multi-head latent attention needs positive 'kv_lora_rank', 'qk_nope_head_dim', "
                     "'qk_rope_head_dim' and 'v_head_dim'");
    if (c.head_dim != c.qk_nope_head_dim + c.qk_rope_head_dim || c.rope_dim != c.qk_rope_head_dim)
      invalid(path + ": multi-head latent attention: head_dim must be qk_nope_head_dim + qk_rope_head_dim");
  }
  if (c.v_head_dim <= 0) invalid(path + ": the value width of a head must be positive");
  if (c.rope_dim <= 0 || c.rope_dim % 2 != 0 || c.rope_dim > c.head_dim)
    invalid(path + ": the rotated dims per head (" + std::to_string(c.rope_dim) +
            ", from partial_rotary_factor or qk_rope_head_dim) must be even, positive and at most head_dim (" +
            std::to_string(c.head_dim) + ")");
  const YarnScaling& y = c.rope_yarn;
  if (y.active()) {
    if (!std::isfinite(y.factor) || y.original_max_position_embeddings <= 0 || !(y.beta_fast > 0) ||
        !(y.beta_slow > 0) || !std::isfinite(y.beta_fast) || !std::isfinite(y.beta_slow))
      invalid(path + ": yarn RoPE needs a finite 'factor', positive 'original_max_position_embeddings', "
                     "'beta_fast' and 'beta_slow'");
    if (!(y.attention_factor > 0) || !std::isfinite(y.attention_factor))
      invalid(path + ": yarn RoPE: the attention factor (from 'attention_factor', 'mscale', 'mscale_all_dim') "
                     "must be a positive finite number");
  }
  if (!(c.attention_scale_factor > 0) || !std::isfinite(c.attention_scale_factor))
    invalid(path + ": the softmax scale factor (from 'mscale_all_dim') must be a positive finite number");
  if (!(c.latent_norm_eps > 0)) invalid(path + ": the latent norm epsilon must be positive");
  if (!c.attention_window.empty() && static_cast<int64_t>(c.attention_window.size()) != c.num_layers)
    invalid(path + ": " + std::to_string(c.attention_window.size()) + " attention kinds (layer_types) for " +
            std::to_string(c.num_layers) + " layers (num_hidden_layers)");
  if (c.attention == AttentionKind::kLatent && (c.attention_sinks || !c.attention_window.empty()))
    unsupported(path + ": attention sinks and sliding windows are implemented for grouped-query attention only");
}

}  // namespace

int64_t ModelConfig::num_moe_layers() const {
  return std::count(layer_is_moe.begin(), layer_is_moe.end(), true);
}

int64_t ModelConfig::layer_attention_window(int64_t layer) const {
  return layer >= 0 && static_cast<size_t>(layer) < attention_window.size() ? attention_window[layer] : 0;
}

bool ModelConfig::layer_linear(int64_t layer) const {
  return layer >= 0 && static_cast<size_t>(layer) < layer_is_linear.size() && layer_is_linear[static_cast<size_t>(layer)];
}

std::vector<std::string> supported_model_types() {
  std::vector<std::string> v;
  for (const Architecture* a : all_architectures()) v.emplace_back(a->model_type);
  return v;
}

namespace {

// How fields() prints a value: numbers to 17 digits, enums as their number,
// per-layer flags as a string of 0s and 1s, per-layer windows comma-separated.
template <class T>
std::string field_text(const T& v) {
  std::ostringstream os;
  os.precision(17);
  if constexpr (std::is_enum_v<T>)
    os << static_cast<int>(v);
  else
    os << std::boolalpha << v;
  return os.str();
}
std::string field_text(const std::vector<bool>& bits) {
  std::string s;
  for (bool b : bits) s += b ? '1' : '0';
  return s;
}
std::string field_text(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> ModelConfig::fields() const {
  std::vector<std::pair<std::string, std::string>> f;
  for_each_field(*this, [&](std::string name, const auto& value, std::string_view) {
    f.emplace_back(std::move(name), field_text(value));
  });
  return f;
}

ModelConfig parse_config(const json& j, const std::string& path) {
  if (!j.is_object()) invalid(path + ": not a JSON object");
  if (!j.contains("model_type") || j["model_type"].is_null())
    invalid(path + ": field 'model_type' is missing (supported: " + join(supported_model_types()) + ")");
  if (!j["model_type"].is_string())
    invalid(path + ": field 'model_type' is " + j["model_type"].type_name() + ", expected a string (supported: " +
            join(supported_model_types()) + ")");
  ModelConfig c;
  c.model_type = j["model_type"].get<std::string>();
  c.arch = find_architecture(c.model_type);
  if (!c.arch)
    unsupported(path + ": model_type '" + c.model_type + "' is not supported (supported: " +
                join(supported_model_types()) + ")");
  // Before anything else: a quantization we cannot read must stop the run
  // (exit 4) rather than let its codes be taken for weights.
  c.source_quant = io::parse_quantization_config(j, path);
  io::JsonNode text(j, path);
  if (!c.arch->text_config.empty()) {
    const std::string key(c.arch->text_config);
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) invalid(path + ": field '" + key + "' (the text model's config) is missing");
    if (!it->is_object())
      invalid(path + ": field '" + key + "' (the text model's config) is " + it->type_name() + ", expected an object");
    text = io::JsonNode(*it, path, key);
  }
  arch::parse_decoder_fields(text, c);
  c.arch->parse(text, c);
  // Checked here, for every architecture: a non-positive epsilon or theta
  // gives NaN logits that would otherwise surface as a printed "nan".
  if (!(c.rms_norm_eps > 0) || !std::isfinite(c.rms_norm_eps))
    text.invalid_member("rms_norm_eps", "must be a positive finite number");
  if (!(c.rope_theta > 0) || !std::isfinite(c.rope_theta))
    text.invalid_member("rope_theta", "must be a positive finite number");
  check_router_fields(c, text);
  if (!(c.clip_qkv >= 0) || !std::isfinite(c.clip_qkv))
    text.invalid_member("clip_qkv", "must be a finite number >= 0 (0 = no clipping)");
  check_attention_fields(c, path);
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
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail(ErrorKind::kIo, path + ": cannot open (a checkpoint folder needs config.json)");
  return parse_config_text(io::read_file_bytes(path, kMaxConfigBytes), path);
}

std::string attn_prefix(int64_t layer) { return "model.layers." + std::to_string(layer) + ".self_attn."; }
std::string linear_attn_prefix(int64_t layer) { return "model.layers." + std::to_string(layer) + ".linear_attn."; }

std::string moe_prefix(const ModelConfig& c, int64_t layer) {
  return io::layer_prefix(layer) + std::string(c.arch->naming.moe) + ".";
}

std::string router_name(const ModelConfig& c, int64_t layer) {
  return moe_prefix(c, layer) + std::string(c.arch->naming.router) + ".weight";
}

std::string router_bias_name(const ModelConfig& c, int64_t layer) {
  return moe_prefix(c, layer) + std::string(c.arch->naming.router) + ".bias";
}

std::string router_correction_bias_name(const ModelConfig& c, int64_t layer) {
  return moe_prefix(c, layer) + std::string(c.arch->naming.router) + ".e_score_correction_bias";
}

std::string expert_weight_name(const ModelConfig& c, int64_t layer, int64_t expert, Proj p) {
  return moe_prefix(c, layer) + "experts." + std::to_string(expert) + "." +
         std::string(c.arch->naming.expert_proj[static_cast<size_t>(p)]) + ".weight";
}

std::string dense_mlp_name(const ModelConfig& c, int64_t layer, Proj p) {
  return io::layer_prefix(layer) + "mlp." + std::string(c.arch->naming.dense_proj[static_cast<size_t>(p)]) + ".weight";
}

std::string shared_expert_name(const ModelConfig& c, int64_t layer, Proj p) {
  return moe_prefix(c, layer) + std::string(c.arch->naming.shared_expert) + "." +
         std::string(c.arch->naming.dense_proj[static_cast<size_t>(p)]) + ".weight";
}

std::string shared_expert_gate_name(const ModelConfig& c, int64_t layer) {
  return moe_prefix(c, layer) + std::string(c.arch->naming.shared_expert_gate) + ".weight";
}

namespace {

using NamedShapes = std::vector<std::pair<std::string, std::vector<int64_t>>>;

// The attention matrices of layer l that may run as a LinearOp: every
// projection except kv_b_proj, which latent attention splits per head, and
// in a linear-attention layer the q/k/v/z input and the output projections
// (b, a and ba, 2 nv rows feeding exponentials, stay as stored).
NamedShapes attention_matrices(const ModelConfig& c, int64_t l) {
  if (c.layer_linear(l)) {
    const std::string a = linear_attn_prefix(l);
    const LinearAttentionConfig& d = c.linear;
    const int64_t H = c.hidden_size;
    if (d.fused_projections)
      return {{a + "in_proj_qkvz.weight", {2 * d.key_dim() + 2 * d.value_dim(), H}},
              {a + "out_proj.weight", {H, d.value_dim()}}};
    return {{a + "in_proj_qkv.weight", {d.conv_dim(), H}},
            {a + "in_proj_z.weight", {d.value_dim(), H}},
            {a + "out_proj.weight", {H, d.value_dim()}}};
  }
  const std::string a = attn_prefix(l);
  const int64_t H = c.hidden_size, nh = c.num_heads, q = nh * c.head_dim;
  if (c.attention == AttentionKind::kLatent) {
    NamedShapes t;
    if (c.q_lora_rank > 0) {
      t.push_back({a + "q_a_proj.weight", {c.q_lora_rank, H}});
      t.push_back({a + "q_b_proj.weight", {q, c.q_lora_rank}});
    } else {
      t.push_back({a + "q_proj.weight", {q, H}});
    }
    t.push_back({a + "kv_a_proj_with_mqa.weight", {c.kv_lora_rank + c.qk_rope_head_dim, H}});
    t.push_back({a + "o_proj.weight", {H, nh * c.v_head_dim}});
    return t;
  }
  const int64_t kv = c.num_kv_heads * c.head_dim;
  return {{a + "q_proj.weight", {c.attention_output_gate ? 2 * q : q, H}},
          {a + "k_proj.weight", {kv, H}},
          {a + "v_proj.weight", {kv, H}},
          {a + "o_proj.weight", {H, q}}};
}

// The gated delta net of a linear-attention layer.
NamedShapes linear_attention_tensors(const ModelConfig& c, int64_t l) {
  const std::string a = linear_attn_prefix(l);
  const LinearAttentionConfig& d = c.linear;
  const int64_t H = c.hidden_size, nv = d.num_value_heads;
  NamedShapes t;
  if (d.fused_projections) {
    t.push_back({a + "in_proj_qkvz.weight", {2 * d.key_dim() + 2 * d.value_dim(), H}});
    t.push_back({a + "in_proj_ba.weight", {2 * nv, H}});
  } else {
    t.push_back({a + "in_proj_qkv.weight", {d.conv_dim(), H}});
    t.push_back({a + "in_proj_z.weight", {d.value_dim(), H}});
    t.push_back({a + "in_proj_b.weight", {nv, H}});
    t.push_back({a + "in_proj_a.weight", {nv, H}});
  }
  t.push_back({a + "conv1d.weight", {d.conv_dim(), 1, d.conv_kernel}});
  t.push_back({a + "dt_bias", {nv}});
  t.push_back({a + "A_log", {nv}});
  t.push_back({a + "norm.weight", {d.value_head_dim}});
  t.push_back({a + "out_proj.weight", {H, d.value_dim()}});
  return t;
}

// Every attention tensor of layer l: the matrices, kv_b_proj, norms, biases.
NamedShapes attention_tensors(const ModelConfig& c, int64_t l) {
  if (c.layer_linear(l)) return linear_attention_tensors(c, l);
  const std::string a = attn_prefix(l);
  const int64_t H = c.hidden_size, D = c.head_dim, q = c.num_heads * D, kv = c.num_kv_heads * D;
  NamedShapes t = attention_matrices(c, l);
  if (c.attention == AttentionKind::kLatent) {
    t.push_back({a + "kv_b_proj.weight", {c.num_heads * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank}});
    t.push_back({a + "kv_a_layernorm.weight", {c.kv_lora_rank}});
    if (c.q_lora_rank > 0) t.push_back({a + "q_a_layernorm.weight", {c.q_lora_rank}});
    if (c.attention_bias) {
      if (c.q_lora_rank > 0) t.push_back({a + "q_a_proj.bias", {c.q_lora_rank}});
      t.push_back({a + "kv_a_proj_with_mqa.bias", {c.kv_lora_rank + c.qk_rope_head_dim}});
      t.push_back({a + "o_proj.bias", {H}});
    }
    return t;
  }
  if (c.attention_bias) {
    t.push_back({a + "q_proj.bias", {c.attention_output_gate ? 2 * q : q}});
    t.push_back({a + "k_proj.bias", {kv}});
    t.push_back({a + "v_proj.bias", {kv}});
  }
  if (c.attention_out_bias) t.push_back({a + "o_proj.bias", {H}});
  if (c.attention_sinks) t.push_back({a + "sinks", {c.num_heads}});
  if (c.qk_norm == QkNorm::kPerHead) {
    t.push_back({a + "q_norm.weight", {D}});
    t.push_back({a + "k_norm.weight", {D}});
  }
  if (c.qk_norm == QkNorm::kWhole) {
    t.push_back({a + "q_norm.weight", {q}});
    t.push_back({a + "k_norm.weight", {kv}});
  }
  return t;
}

NamedShapes expected_tensors(const ModelConfig& c) {
  NamedShapes t;
  const int64_t H = c.hidden_size;
  t.push_back({"model.embed_tokens.weight", {c.vocab_size, H}});
  t.push_back({"model.norm.weight", {H}});
  if (!c.tie_word_embeddings) t.push_back({"lm_head.weight", {c.vocab_size, H}});
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string L = "model.layers." + std::to_string(l) + ".";
    t.push_back({L + "input_layernorm.weight", {H}});
    t.push_back({L + "post_attention_layernorm.weight", {H}});
    for (auto& a : attention_tensors(c, l)) t.push_back(std::move(a));
    if (c.layer_is_moe[static_cast<size_t>(l)]) {
      // Routed experts: routed_expert_tensors (their layout is the reader's).
      t.push_back({router_name(c, l), {c.num_experts, H}});
      if (c.router_bias) t.push_back({router_bias_name(c, l), {c.num_experts}});
      if (c.router_correction_bias) t.push_back({router_correction_bias_name(c, l), {c.num_experts}});
      if (c.shared_expert_intermediate_size > 0) {
        const int64_t S = c.shared_expert_intermediate_size;
        t.push_back({shared_expert_name(c, l, Proj::kGate), {S, H}});
        t.push_back({shared_expert_name(c, l, Proj::kUp), {S, H}});
        t.push_back({shared_expert_name(c, l, Proj::kDown), {H, S}});
        if (c.shared_expert_gated) t.push_back({shared_expert_gate_name(c, l), {1, H}});
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


// Tensors of layer l that the config rules out, each with why: present in a
// checkpoint they would be silently ignored (or applied against the config),
// running another model than the config describes.
using RuledOut = std::vector<std::pair<std::string, std::string>>;

RuledOut ruled_out_tensors(const ModelConfig& c, int64_t l) {
  const SwitchFields& sw = c.arch->switches;
  const std::string none = "model_type '" + c.model_type + "' has no such tensor";
  auto by = [&](std::string_view field, const std::string& says) {
    return field.empty() ? none : "config.json field '" + std::string(field) + "' " + says;
  };
  RuledOut out;
  if (!c.layer_linear(l)) {
    const std::string a = attn_prefix(l);
    if (!c.attention_bias) {
      const std::string why = by(sw.attention_bias, "is false");
      if (c.attention == AttentionKind::kLatent) {
        for (const char* n : {"q_a_proj.bias", "kv_a_proj_with_mqa.bias", "o_proj.bias"}) out.push_back({a + n, why});
      } else {
        for (const char* n : {"q_proj.bias", "k_proj.bias", "v_proj.bias"}) out.push_back({a + n, why});
      }
    }
    if (c.attention == AttentionKind::kGrouped && !c.attention_out_bias)
      out.push_back({a + "o_proj.bias", c.attention_bias ? none : by(sw.attention_bias, "is false")});
    if (c.qk_norm == QkNorm::kNone)
      for (const char* n : {"q_norm.weight", "k_norm.weight"}) out.push_back({a + n, by(sw.qk_norm, "is false")});
    if (!c.attention_sinks) out.push_back({a + "sinks", none});
  }
  if (c.layer_is_moe[static_cast<size_t>(l)]) {
    const std::string no_shared = by(sw.shared_experts, "gives the shared expert a size of 0");
    if (c.shared_expert_intermediate_size == 0)
      for (Proj p : {Proj::kGate, Proj::kUp, Proj::kDown}) out.push_back({shared_expert_name(c, l, p), no_shared});
    if (!c.shared_expert_gated)
      out.push_back({shared_expert_gate_name(c, l), none});
    else if (c.shared_expert_intermediate_size == 0)
      out.push_back({shared_expert_gate_name(c, l), no_shared});
    if (!c.router_bias) out.push_back({router_bias_name(c, l), none});
    if (!c.router_correction_bias) out.push_back({router_correction_bias_name(c, l), none});
  }
  return out;
}

}  // namespace

using io::layer_of;

void check_against_checkpoint(const ModelConfig& c, const io::SourceTensors& ckpt, bool routed_experts,
                              const std::vector<std::string>& provided) {
  // The layer count must match the tensors exactly: a num_hidden_layers
  // smaller than the layers present would silently run a truncated model.
  // Multi-token-prediction layers after the last are allowed (and ignored).
  for (const std::string& name : ckpt.names())
    if (const auto layer = layer_of(name); layer && *layer >= c.num_layers && !is_mtp_tensor(c, name))
      invalid(ckpt.checkpoint().path() + ": tensor '" + name + "' belongs to layer " + std::to_string(*layer) +
              ", but config.json field 'num_hidden_layers' is " + std::to_string(c.num_layers) +
              " (layers 0-" + std::to_string(c.num_layers - 1) + ")" +
              (c.num_mtp_layers > 0 ? " and 'num_nextn_predict_layers' " + std::to_string(c.num_mtp_layers) : ""));
  const std::set<std::string> skip(provided.begin(), provided.end());
  const std::string& path = ckpt.checkpoint().path();
  auto check = [&](const std::string& name, const std::vector<int64_t>& shape) {
    const auto& info = ckpt.info(name);
    if (info.shape != shape)
      invalid(path + ": tensor '" + name + "' has shape " + shape_str(info.shape) + ", config implies " +
              shape_str(shape));
    if (info.encoding == io::SourceTensors::Encoding::kPlain && !dtype_is_float(info.stored))
      invalid(path + ": tensor '" + name + "' has non-float dtype " + std::string(dtype_name(info.stored)));
  };
  auto require = [&](const std::string& name, const std::vector<int64_t>& shape) {
    if (skip.count(name)) return;
    if (!ckpt.has(name))
      invalid(path + ": tensor '" + name + "' required by " + c.model_type + " config is missing");
    check(name, shape);
  };
  for (const auto& [name, shape] : expected_tensors(c)) require(name, shape);
  for (int64_t l = 0; l < c.num_layers; ++l)
    for (const auto& [name, why] : ruled_out_tensors(c, l))
      if (ckpt.has(name)) invalid(path + ": tensor '" + name + "' is present, but " + why);
  // Routed-expert weights are required unless a packed folder holds them in
  // bit groups; their biases are optional (present = used) either way.
  for (int64_t l = 0; l < c.num_layers; ++l)
    if (c.layer_is_moe[static_cast<size_t>(l)])
      for (const ExpertTensor& t : routed_expert_tensors(c, ckpt, l)) {
        if (!t.bias && routed_experts) require(t.name, t.shape);
        if (t.bias && ckpt.has(t.name)) check(t.name, t.shape);
      }
}

std::optional<std::vector<int64_t>> expected_shape(const ModelConfig& c, const std::string& name) {
  const int64_t H = c.hidden_size;
  if (name == "lm_head.weight" || name == "model.embed_tokens.weight") return std::vector<int64_t>{c.vocab_size, H};
  if (const auto layer = layer_of(name);
      layer && *layer < c.num_layers &&
      name.rfind(c.layer_linear(*layer) ? linear_attn_prefix(*layer) : attn_prefix(*layer), 0) == 0)
    for (const auto& [n, shape] : attention_matrices(c, *layer))
      if (n == name) return shape;
  if (const auto layer = layer_of(name); layer && *layer < c.num_layers && c.intermediate_size > 0 &&
                                          !c.layer_is_moe[static_cast<size_t>(*layer)]) {
    const int64_t I = c.intermediate_size;
    if (name == dense_mlp_name(c, *layer, Proj::kGate) || name == dense_mlp_name(c, *layer, Proj::kUp))
      return std::vector<int64_t>{I, H};
    if (name == dense_mlp_name(c, *layer, Proj::kDown)) return std::vector<int64_t>{H, I};
  }
  if (c.shared_expert_intermediate_size > 0) {
    const int64_t S = c.shared_expert_intermediate_size;
    for (int64_t l = 0; l < c.num_layers; ++l) {
      if (!c.layer_is_moe[static_cast<size_t>(l)]) continue;
      if (name == shared_expert_name(c, l, Proj::kGate) || name == shared_expert_name(c, l, Proj::kUp))
        return std::vector<int64_t>{S, H};
      if (name == shared_expert_name(c, l, Proj::kDown)) return std::vector<int64_t>{H, S};
    }
  }
  return std::nullopt;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> linear_matrices(const ModelConfig& c) {
  NamedShapes t;
  const int64_t H = c.hidden_size;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    for (auto& a : attention_matrices(c, l)) t.push_back(std::move(a));
    const bool moe = c.layer_is_moe[static_cast<size_t>(l)];
    if (moe && c.shared_expert_intermediate_size > 0) {
      const int64_t S = c.shared_expert_intermediate_size;
      t.push_back({shared_expert_name(c, l, Proj::kGate), {S, H}});
      t.push_back({shared_expert_name(c, l, Proj::kUp), {S, H}});
      t.push_back({shared_expert_name(c, l, Proj::kDown), {H, S}});
    } else if (!moe) {
      const int64_t I = c.intermediate_size;
      t.push_back({dense_mlp_name(c, l, Proj::kGate), {I, H}});
      t.push_back({dense_mlp_name(c, l, Proj::kUp), {I, H}});
      t.push_back({dense_mlp_name(c, l, Proj::kDown), {H, I}});
    }
  }
  t.push_back({c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight", {c.vocab_size, H}});
  return t;
}

bool is_mtp_tensor(const ModelConfig& c, const std::string& name) {
  const auto layer = layer_of(name);
  return layer && *layer >= c.num_layers && *layer < c.num_layers + c.num_mtp_layers;
}

std::string_view tensor_part(const ModelConfig& c, const std::string& name) {
  if (is_mtp_tensor(c, name)) return "other";
  const std::string moe = "." + std::string(c.arch->naming.moe) + ".";
  const std::string shared = "." + std::string(c.arch->naming.shared_expert) + ".";
  const std::string shared_gate = "." + std::string(c.arch->naming.shared_expert_gate) + ".";
  const std::string router = moe + std::string(c.arch->naming.router) + ".";
  if (name.find(moe + "experts.") != std::string::npos) return "routed_experts";
  if (name.find(moe.substr(0, moe.size() - 1) + shared) != std::string::npos) return "shared_experts";
  if ((name.find(".self_attn.") != std::string::npos || name.find(".linear_attn.") != std::string::npos) &&
      name.find("norm.") == std::string::npos)
    return "attention";
  if (name == "model.embed_tokens.weight" || name == "lm_head.weight") return "embeddings_head";
  if (name.find("norm") != std::string::npos || name.find(router) != std::string::npos ||
      name.find(shared_gate) != std::string::npos)
    return "norms_router";
  if (name.find(".mlp.") != std::string::npos) return "dense_mlp";
  return "other";
}

ParamBreakdown count_parameters(const ModelConfig& c, const io::SourceTensors& ckpt) {
  ParamBreakdown b;
  for (const auto& name : ckpt.names()) {
    const auto& info = ckpt.info(name);
    const uint64_t n = info.numel(), bytes = info.stored_bytes;
    auto add = [&](uint64_t& count, uint64_t& nbytes) {
      count += n;
      nbytes += bytes;
    };
    const std::string_view part = tensor_part(c, name);
    if (part == "routed_experts") add(b.routed_experts, b.routed_experts_bytes);
    else if (part == "shared_experts") add(b.shared_experts, b.shared_experts_bytes);
    else if (part == "attention") add(b.attention, b.attention_bytes);
    else if (part == "embeddings_head") add(b.embeddings_head, b.embeddings_head_bytes);
    else if (part == "norms_router") add(b.norms_router, b.norms_router_bytes);
    else if (part == "dense_mlp") add(b.dense_mlp, b.dense_mlp_bytes);
    else add(b.other, b.other_bytes);
  }
  return b;
}

}  // namespace eq::model
