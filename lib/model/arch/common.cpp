#include "model/arch/common.h"

#include <cmath>
#include <functional>
#include <set>

#include "core/error.h"

namespace eq::model::arch {

int64_t get_int(const json& j, const char* key, const std::string& path, std::optional<int64_t> fallback) {
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

void parse_decoder_fields(const json& j, const std::string& path, ModelConfig& c) {
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
  else if (j.contains("n_routed_experts") && !j["n_routed_experts"].is_null())
    c.num_experts = get_int(j, "n_routed_experts", path);
  else
    invalid(path + ": none of 'num_experts', 'num_local_experts', 'n_routed_experts' is present");
  check_max(c.num_experts, kMaxConfigExperts, "the number of experts", path);
  check_max(c.num_experts * c.num_layers, kMaxConfigLayerExperts, "num_hidden_layers x experts", path);
  c.top_k = get_int(j, "num_experts_per_tok", path);
  if (c.num_experts == 0 || c.top_k == 0 || c.top_k > c.num_experts)
    invalid(path + ": need 0 < num_experts_per_tok (" + std::to_string(c.top_k) + ") <= experts (" +
            std::to_string(c.num_experts) + ")");
  c.intermediate_size = get_int(j, "intermediate_size", path, 0);
  check_max(c.intermediate_size, kMaxConfigDim, "intermediate_size", path);
  c.tie_word_embeddings = get_bool(j, "tie_word_embeddings", path, false);
  c.max_position_embeddings = get_int(j, "max_position_embeddings", path, 0);
  check_max(c.max_position_embeddings, int64_t(1) << 40, "max_position_embeddings", path);
  c.source_dtype = get_string(j, "dtype", path, get_string(j, "torch_dtype", path, "unknown"));
  if (c.source_dtype.empty()) c.source_dtype = "unknown";
  c.layer_is_moe.assign(static_cast<size_t>(c.num_layers), true);
  c.rope_dim = c.head_dim;
  c.v_head_dim = c.head_dim;
}

double parse_rope_theta(const json& j, const std::string& path, double fallback) {
  double theta = fallback;
  if (j.contains("rope_theta") && !j["rope_theta"].is_null())
    theta = get_double(j, "rope_theta", path, theta);
  else if (j.contains("rope_parameters") && j["rope_parameters"].is_object())
    theta = get_double(j["rope_parameters"], "rope_theta", path + " rope_parameters", theta);
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
  return theta;
}

namespace {

// The RoPE settings: "rope_parameters" (one dict holding everything), else
// the older top-level "rope_theta" with a "rope_scaling" dict.
struct RopeSource {
  const json* dict = nullptr;  // rope_parameters or rope_scaling (null: none)
  std::string where;           // for errors
};

RopeSource rope_source(const json& j, const std::string& path) {
  for (const char* key : {"rope_parameters", "rope_scaling"})
    if (auto it = j.find(key); it != j.end() && it->is_object()) return {&*it, path + " " + key};
  return {nullptr, path};
}

}  // namespace

double yarn_mscale(double factor, double mscale) {
  return factor <= 1 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0;
}

void parse_rope(const json& j, const std::string& path, double fallback_theta, double fallback_partial,
                ModelConfig& c) {
  const RopeSource src = rope_source(j, path);
  const json empty = json::object();
  const json& d = src.dict ? *src.dict : empty;
  c.rope_theta = get_double(d, "rope_theta", src.where, get_double(j, "rope_theta", path, fallback_theta));
  const double partial =
      get_double(d, "partial_rotary_factor", src.where, get_double(j, "partial_rotary_factor", path, fallback_partial));
  if (!(partial > 0 && partial <= 1))
    invalid(path + ": field 'partial_rotary_factor' must be in (0, 1], got " + std::to_string(partial));
  c.rope_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * partial);  // truncated, as int() does
  const std::string type = get_string(d, "rope_type", src.where, get_string(d, "type", src.where, "default"));
  if (type == "default") return;
  if (type != "yarn") unsupported(src.where + ": rope type '" + type + "' is not supported (default, yarn)");
  YarnScaling& y = c.rope_yarn;
  y.original_max_position_embeddings =
      get_int(d, "original_max_position_embeddings", src.where, c.max_position_embeddings);
  y.factor = get_double(d, "factor", src.where, 0.0);
  if (y.factor == 0 && y.original_max_position_embeddings > 0)
    y.factor = static_cast<double>(c.max_position_embeddings) / static_cast<double>(y.original_max_position_embeddings);
  if (!(y.factor > 0)) invalid(src.where + ": yarn RoPE needs a positive 'factor'");
  // A missing or zero beta takes its default.
  y.beta_fast = get_double(d, "beta_fast", src.where, 0.0);
  y.beta_slow = get_double(d, "beta_slow", src.where, 0.0);
  if (y.beta_fast == 0) y.beta_fast = 32;
  if (y.beta_slow == 0) y.beta_slow = 1;
  y.truncate = get_bool(d, "truncate", src.where, true);
  // cos and sin are scaled by attention_factor when given, else by
  // mscale(factor, mscale) / mscale(factor, mscale_all_dim) when both are
  // set (non-zero), else by mscale(factor, 1).
  const double mscale = get_double(d, "mscale", src.where, 0.0);
  const double mscale_all_dim = get_double(d, "mscale_all_dim", src.where, 0.0);
  y.attention_factor = get_double(d, "attention_factor", src.where, 0.0);
  if (y.attention_factor == 0)
    y.attention_factor = mscale != 0 && mscale_all_dim != 0
                             ? yarn_mscale(y.factor, mscale) / yarn_mscale(y.factor, mscale_all_dim)
                             : yarn_mscale(y.factor, 1.0);
}

double rope_mscale_all_dim(const json& j, const std::string& path) {
  const RopeSource src = rope_source(j, path);
  return src.dict ? get_double(*src.dict, "mscale_all_dim", src.where, 0.0) : 0.0;
}

void parse_first_dense_layers(const json& j, const std::string& path, int64_t default_first, bool layer_freq,
                              ModelConfig& c) {
  const int64_t first_moe = get_int(j, "first_k_dense_replace", path, default_first);
  const int64_t freq = layer_freq ? get_int(j, "moe_layer_freq", path, 1) : 1;
  if (freq == 0) invalid(path + ": field 'moe_layer_freq' must be positive");
  for (int64_t l = 0; l < c.num_layers; ++l) c.layer_is_moe[static_cast<size_t>(l)] = l >= first_moe && l % freq == 0;
  if (c.num_moe_layers() < c.num_layers && c.intermediate_size == 0)
    invalid(path + ": dense MLP layers need 'intermediate_size'");
}

void parse_gated_shared_expert(const json& j, const std::string& path, ModelConfig& c) {
  c.shared_expert_intermediate_size = get_int(j, "shared_expert_intermediate_size", path, 0);
  check_max(c.shared_expert_intermediate_size, kMaxConfigDim, "shared_expert_intermediate_size", path);
  c.shared_expert_gated = true;
}

void parse_mtp_layers(const json& j, const std::string& path, ModelConfig& c) {
  c.num_mtp_layers = get_int(j, "num_nextn_predict_layers", path, 0);
  check_max(c.num_layers + c.num_mtp_layers, kMaxConfigLayers, "num_hidden_layers + num_nextn_predict_layers", path);
}

std::optional<std::vector<std::string>> read_layer_types(const json& j, const std::string& path, int64_t num_layers,
                                                         const std::string& kind) {
  const auto types = j.find("layer_types");
  if (types == j.end() || types->is_null()) return std::nullopt;
  if (!types->is_array()) invalid(path + ": field 'layer_types' must be a list of strings");
  if (static_cast<int64_t>(types->size()) != num_layers)
    invalid(path + ": field 'layer_types' has " + std::to_string(types->size()) + " entries for " +
            std::to_string(num_layers) + " layers (num_hidden_layers)");
  std::vector<std::string> out;
  for (size_t l = 0; l < types->size(); ++l) {
    const json& t = (*types)[l];
    // Read as a string first: comparing the json to a literal builds
    // temporaries that gcc 12's -Warray-bounds misreads.
    std::string type = t.is_string() ? t.get<std::string>() : "";
    if (type != kind && type != "full_attention")
      invalid(path + ": field 'layer_types' entry " + std::to_string(l) + " must be \"" + kind +
              "\" or \"full_attention\"");
    out.push_back(std::move(type));
  }
  return out;
}

void set_attention_windows(const json& j, const std::string& path, int64_t window,
                           const std::function<bool(int64_t)>& sliding_by_default, ModelConfig& c) {
  const auto types = read_layer_types(j, path, c.num_layers, "sliding_attention");
  c.attention_window.assign(static_cast<size_t>(c.num_layers), 0);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const bool sliding = types ? (*types)[static_cast<size_t>(l)] == "sliding_attention" : sliding_by_default(l);
    c.attention_window[static_cast<size_t>(l)] = sliding ? window : 0;
  }
  if (window == 0) c.attention_window.clear();  // every layer full
}

void parse_qwen_sliding_window(const json& j, const std::string& path, ModelConfig& c) {
  const bool use = get_bool(j, "use_sliding_window", path, false);
  const auto sw = j.find("sliding_window");
  const int64_t window = !use || sw == j.end() || sw->is_null() ? 0 : get_int(j, "sliding_window", path);
  const int64_t first = get_int(j, "max_window_layers", path, 28);
  set_attention_windows(j, path, window, [first](int64_t l) { return l >= first; }, c);
}

void parse_grouped_sigmoid_router(const json& j, const std::string& path, const SigmoidRouterDefaults& d,
                                  ModelConfig& c) {
  c.router_scoring = RouterScoring::kSigmoid;
  c.router_correction_bias = true;
  c.norm_topk_prob = get_bool(j, "norm_topk_prob", path, d.norm_topk_prob);
  c.router_groups = get_int(j, "n_group", path, d.n_group);
  c.router_topk_groups = get_int(j, "topk_group", path, d.topk_group);
  c.routed_scaling_factor = get_double(j, "routed_scaling_factor", path, d.routed_scaling_factor);
  c.moe_intermediate_size = parse_expert_size(j, "moe_intermediate_size", path);
  const int64_t shared = get_int(j, "n_shared_experts", path, d.n_shared_experts);
  check_max(shared, kMaxConfigExperts, "n_shared_experts", path);
  c.shared_expert_intermediate_size = c.moe_intermediate_size * shared;
  check_max(c.shared_expert_intermediate_size, kMaxConfigDim, "moe_intermediate_size x n_shared_experts", path);
  c.shared_expert_gated = false;
}

int64_t parse_expert_size(const json& j, const char* key, const std::string& path) {
  const int64_t v = get_int(j, key, path);
  if (v == 0) invalid(path + ": field '" + std::string(key) + "' (the expert intermediate size) must be positive");
  check_max(v, kMaxConfigDim, key, path);
  return v;
}

void parse_sparse_step_layers(const json& j, const std::string& path, ModelConfig& c) {
  const int64_t step = get_int(j, "decoder_sparse_step", path, 1);
  std::set<int64_t> dense;
  if (j.contains("mlp_only_layers") && j["mlp_only_layers"].is_array())
    for (const auto& v : j["mlp_only_layers"]) {
      if (!v.is_number_integer()) invalid(path + ": mlp_only_layers must hold integers");
      const int64_t l = v.get<int64_t>();
      if (l < 0 || l >= c.num_layers)
        invalid(path + ": field 'mlp_only_layers' holds layer " + std::to_string(l) + ", outside [0, " +
                std::to_string(c.num_layers) + ") (num_hidden_layers)");
      dense.insert(l);
    }
  for (int64_t l = 0; l < c.num_layers; ++l)
    c.layer_is_moe[static_cast<size_t>(l)] = !dense.count(l) && step > 0 && (l + 1) % step == 0;
  if (c.num_moe_layers() < c.num_layers && c.intermediate_size == 0)
    invalid(path + ": dense MLP layers need 'intermediate_size'");
}

void parse_gated_delta_layers(const json& j, const std::string& path, bool fused, ModelConfig& c) {
  c.layer_is_linear.assign(static_cast<size_t>(c.num_layers), false);
  if (const auto types = read_layer_types(j, path, c.num_layers, "linear_attention")) {
    for (size_t l = 0; l < types->size(); ++l) c.layer_is_linear[l] = (*types)[l] == "linear_attention";
  } else {
    const int64_t interval = get_int(j, "full_attention_interval", path, 4);
    if (interval == 0) invalid(path + ": field 'full_attention_interval' must be positive");
    for (int64_t l = 0; l < c.num_layers; ++l) c.layer_is_linear[static_cast<size_t>(l)] = (l + 1) % interval != 0;
  }
  LinearAttentionConfig& a = c.linear;
  a.num_key_heads = get_int(j, "linear_num_key_heads", path, 16);
  a.num_value_heads = get_int(j, "linear_num_value_heads", path, 32);
  a.key_head_dim = get_int(j, "linear_key_head_dim", path, 128);
  a.value_head_dim = get_int(j, "linear_value_head_dim", path, 128);
  a.conv_kernel = get_int(j, "linear_conv_kernel_dim", path, 4);
  a.fused_projections = fused;
  check_max(a.num_key_heads, kMaxConfigDim, "linear_num_key_heads", path);
  check_max(a.num_value_heads, kMaxConfigDim, "linear_num_value_heads", path);
  check_max(a.key_head_dim, kMaxConfigDim, "linear_key_head_dim", path);
  check_max(a.value_head_dim, kMaxConfigDim, "linear_value_head_dim", path);
  check_max(a.conv_kernel, 1024, "linear_conv_kernel_dim", path);
  if (a.num_key_heads == 0 || a.num_value_heads % a.num_key_heads != 0 || a.num_value_heads == 0 ||
      a.key_head_dim == 0 || a.value_head_dim == 0 || a.conv_kernel == 0)
    invalid(path + ": the linear attention sizes must be positive and linear_num_value_heads a multiple of "
                   "linear_num_key_heads");
  c.attention_output_gate = true;
  c.norm_zero_centred = true;
  c.qk_norm = QkNorm::kPerHead;
}

}  // namespace eq::model::arch
