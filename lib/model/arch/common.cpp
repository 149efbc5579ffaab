#include "model/arch/common.h"

#include <cmath>
#include <functional>
#include <set>

#include "core/error.h"
#include "model/expert_axis.h"

namespace eq::model::arch {

int64_t get_size(const JsonNode& j, const char* key, std::optional<int64_t> fallback) {
  if (!fallback) return j.at(key).integer(0);
  return j.integer_or(key, *fallback, 0);
}

void check_max(const JsonNode& j, int64_t v, int64_t max, const std::string& what) {
  if (v > max) j.fail(ErrorKind::kResource, what + " is " + std::to_string(v) + ", more than the supported " +
                                                std::to_string(max));
}

void parse_decoder_fields(const JsonNode& j, ModelConfig& c) {
  c.vocab_size = get_size(j, "vocab_size");
  c.hidden_size = get_size(j, "hidden_size");
  c.num_layers = get_size(j, "num_hidden_layers");
  c.num_heads = get_size(j, "num_attention_heads");
  c.num_kv_heads = get_size(j, "num_key_value_heads", c.num_heads);
  if (c.num_heads == 0 || c.hidden_size == 0 || c.num_layers == 0 || c.vocab_size == 0)
    j.invalid("hidden_size, num_hidden_layers, num_attention_heads and vocab_size must be positive");
  check_max(j, c.vocab_size, kMaxConfigDim, "vocab_size");
  check_max(j, c.hidden_size, kMaxConfigDim, "hidden_size");
  check_max(j, c.num_layers, kMaxConfigLayers, "num_hidden_layers");
  check_max(j, c.num_heads, kMaxConfigDim, "num_attention_heads");
  c.head_dim = get_size(j, "head_dim", c.hidden_size / c.num_heads);
  check_max(j, c.head_dim, kMaxConfigDim, "head_dim");
  if (c.num_kv_heads == 0 || c.num_heads % c.num_kv_heads != 0)
    j.invalid("num_attention_heads (" + std::to_string(c.num_heads) +
            ") must be a multiple of num_key_value_heads (" + std::to_string(c.num_kv_heads) + ")");
  if (c.head_dim == 0 || c.head_dim % 2 != 0) j.invalid("head_dim must be even and positive");
  // The expert count under any of its names; two names that disagree are an
  // error (which one the reference reads depends on the model class).
  std::string experts_field;
  for (const std::string_view field : kExpertCountFields) {
    const std::string key(field);
    if (!j.has(key.c_str())) continue;
    const int64_t n = get_size(j, key.c_str());
    if (!experts_field.empty() && n != c.num_experts)
      j.invalid("fields '" + experts_field + "' (" + std::to_string(c.num_experts) + ") and '" + key +
                "' (" + std::to_string(n) + ") disagree on the number of experts");
    if (experts_field.empty()) c.num_experts = n;
    experts_field = key;
  }
  if (experts_field.empty()) j.invalid("none of 'num_experts', 'num_local_experts', 'n_routed_experts' is present");
  check_max(j, c.num_experts, kMaxConfigExperts, "the number of experts");
  check_max(j, c.num_experts * c.num_layers, kMaxConfigLayerExperts, "num_hidden_layers x experts");
  c.top_k = get_size(j, "num_experts_per_tok");
  if (c.num_experts == 0 || c.top_k == 0 || c.top_k > c.num_experts)
    j.invalid("need 0 < num_experts_per_tok (" + std::to_string(c.top_k) + ") <= experts (" +
            std::to_string(c.num_experts) + ")");
  c.intermediate_size = get_size(j, "intermediate_size", 0);
  check_max(j, c.intermediate_size, kMaxConfigDim, "intermediate_size");
  c.tie_word_embeddings = j.bool_or("tie_word_embeddings", false);
  c.max_position_embeddings = get_size(j, "max_position_embeddings", 0);
  check_max(j, c.max_position_embeddings, int64_t(1) << 40, "max_position_embeddings");
  c.source_dtype = j.str_or("dtype", j.str_or("torch_dtype", "unknown"));
  if (c.source_dtype.empty()) c.source_dtype = "unknown";
  c.layer_is_moe.assign(static_cast<size_t>(c.num_layers), true);
  c.rope_dim = c.head_dim;
  c.v_head_dim = c.head_dim;
}

namespace {

// `key` when it is an object (other values are ignored, as the reference does).
std::optional<JsonNode> dict(const JsonNode& j, const char* key) {
  auto d = j.find(key);
  if (d && !d->value().is_object()) return std::nullopt;
  return d;
}

// The RoPE settings: "rope_parameters" (one dict holding everything), else
// the older top-level "rope_theta" with a "rope_scaling" dict.
std::optional<JsonNode> rope_source(const JsonNode& j) {
  for (const char* key : {"rope_parameters", "rope_scaling"})
    if (auto d = dict(j, key)) return d;
  return std::nullopt;
}

// "mrope_section": how a multimodal model splits the rotated pairs between its
// position axes. A text-only run gives every axis the token's position, so it
// does not change the result, but a value that cannot be such a split is a
// config we do not understand: a list of integers >= 0 summing to the
// rotated pairs (rope_dim / 2), or null.
void check_mrope_section(const JsonNode& d, int64_t rope_dim) {
  const auto m = d.find("mrope_section");
  if (!m) return;
  if (!m->value().is_array())
    m->invalid(std::string("must be a list of integers, found ") + m->value().type_name());
  int64_t sum = 0;
  for (size_t i = 0; i < m->size(); ++i) sum += m->index(i).integer(0, kMaxConfigDim);
  if (sum * 2 != rope_dim)
    m->invalid("sums to " + std::to_string(sum) + " rotated pairs, the rotated dims per head are " +
               std::to_string(rope_dim) + " (" + std::to_string(rope_dim / 2) + " pairs)");
}

}  // namespace

double parse_rope_theta(const JsonNode& j, double fallback) {
  const auto parameters = dict(j, "rope_parameters");
  double theta = fallback;
  if (j.has("rope_theta"))
    theta = j.number_or("rope_theta", theta);
  else if (parameters)
    theta = parameters->number_or("rope_theta", theta);
  if (const auto rs = dict(j, "rope_scaling")) {
    std::string type = rs->str_or("rope_type", rs->str_or("type", "default"));
    if (type != "default") j.unsupported("rope_scaling type '" + type + "' is not supported");
  }
  if (parameters) {
    std::string type = parameters->str_or("rope_type", "default");
    if (type != "default") j.unsupported("rope_parameters.rope_type '" + type + "' is not supported");
  }
  return theta;
}

double yarn_mscale(double factor, double mscale) {
  return factor <= 1 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0;
}

void parse_rope(const JsonNode& j, double fallback_theta, double fallback_partial,
                ModelConfig& c) {
  static const nlohmann::json kEmpty = nlohmann::json::object();
  const auto src = rope_source(j);
  const JsonNode d = src ? *src : JsonNode(kEmpty, j.file(), j.path());
  c.rope_theta = d.number_or("rope_theta", j.number_or("rope_theta", fallback_theta));
  const double partial = d.number_or("partial_rotary_factor", j.number_or("partial_rotary_factor", fallback_partial));
  if (!(partial > 0 && partial <= 1))
    j.invalid_member("partial_rotary_factor", "must be in (0, 1], got " + std::to_string(partial));
  c.rope_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * partial);  // truncated, as int() does
  check_mrope_section(d, c.rope_dim);
  const std::string type = d.str_or("rope_type", d.str_or("type", "default"));
  if (type == "default") return;
  if (type != "yarn") d.unsupported("rope type '" + type + "' is not supported (default, yarn)");
  YarnScaling& y = c.rope_yarn;
  y.original_max_position_embeddings =
      get_size(d, "original_max_position_embeddings", c.max_position_embeddings);
  y.factor = d.number_or("factor", 0.0);
  if (y.factor == 0 && y.original_max_position_embeddings > 0)
    y.factor = static_cast<double>(c.max_position_embeddings) / static_cast<double>(y.original_max_position_embeddings);
  if (!(y.factor > 0)) d.invalid("yarn RoPE needs a positive 'factor'");
  // A missing or zero beta takes its default.
  y.beta_fast = d.number_or("beta_fast", 0.0);
  y.beta_slow = d.number_or("beta_slow", 0.0);
  if (y.beta_fast == 0) y.beta_fast = 32;
  if (y.beta_slow == 0) y.beta_slow = 1;
  y.truncate = d.bool_or("truncate", true);
  // cos and sin are scaled by attention_factor when given, else by
  // mscale(factor, mscale) / mscale(factor, mscale_all_dim) when both are
  // set (non-zero), else by mscale(factor, 1).
  const double mscale = d.number_or("mscale", 0.0);
  const double mscale_all_dim = d.number_or("mscale_all_dim", 0.0);
  y.attention_factor = d.number_or("attention_factor", 0.0);
  if (y.attention_factor == 0)
    y.attention_factor = mscale != 0 && mscale_all_dim != 0
                             ? yarn_mscale(y.factor, mscale) / yarn_mscale(y.factor, mscale_all_dim)
                             : yarn_mscale(y.factor, 1.0);
}

double rope_mscale_all_dim(const JsonNode& j) {
  const auto src = rope_source(j);
  return src ? src->number_or("mscale_all_dim", 0.0) : 0.0;
}

void parse_first_dense_layers(const JsonNode& j, int64_t default_first, bool layer_freq,
                              ModelConfig& c) {
  const int64_t first_moe = get_size(j, "first_k_dense_replace", default_first);
  const int64_t freq = layer_freq ? get_size(j, "moe_layer_freq", 1) : 1;
  if (freq == 0) j.invalid_member("moe_layer_freq", "must be positive");
  for (int64_t l = 0; l < c.num_layers; ++l) c.layer_is_moe[static_cast<size_t>(l)] = l >= first_moe && l % freq == 0;
  if (c.num_moe_layers() < c.num_layers && c.intermediate_size == 0)
    j.invalid("dense MLP layers need 'intermediate_size'");
}

void parse_gated_shared_expert(const JsonNode& j, ModelConfig& c) {
  c.shared_expert_intermediate_size = get_size(j, "shared_expert_intermediate_size", 0);
  check_max(j, c.shared_expert_intermediate_size, kMaxConfigDim, "shared_expert_intermediate_size");
  c.shared_expert_gated = true;
}

void parse_mtp_layers(const JsonNode& j, ModelConfig& c) {
  c.num_mtp_layers = get_size(j, "num_nextn_predict_layers", 0);
  check_max(j, c.num_layers + c.num_mtp_layers, kMaxConfigLayers, "num_hidden_layers + num_nextn_predict_layers");
}

std::optional<std::vector<std::string>> read_layer_types(const JsonNode& j, int64_t num_layers,
                                                         const std::string& kind) {
  const auto types = j.find("layer_types");
  if (!types) return std::nullopt;
  if (!types->value().is_array()) types->invalid("must be a list of strings");
  if (static_cast<int64_t>(types->size()) != num_layers)
    types->invalid("has " + std::to_string(types->size()) + " entries for " + std::to_string(num_layers) +
                   " layers (num_hidden_layers)");
  std::vector<std::string> out;
  for (size_t l = 0; l < types->size(); ++l) {
    const nlohmann::json& t = types->value()[l];
    // Read as a string first: comparing the json to a literal builds
    // temporaries that gcc 12's -Warray-bounds misreads.
    std::string type = t.is_string() ? t.get<std::string>() : "";
    if (type != kind && type != "full_attention")
      types->index(l).invalid("must be \"" + kind + "\" or \"full_attention\"");
    out.push_back(std::move(type));
  }
  return out;
}

void set_attention_windows(const JsonNode& j, int64_t window,
                           const std::function<bool(int64_t)>& sliding_by_default, ModelConfig& c) {
  const auto types = read_layer_types(j, c.num_layers, "sliding_attention");
  c.attention_window.assign(static_cast<size_t>(c.num_layers), 0);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const bool sliding = types ? (*types)[static_cast<size_t>(l)] == "sliding_attention" : sliding_by_default(l);
    c.attention_window[static_cast<size_t>(l)] = sliding ? window : 0;
  }
  if (window == 0) c.attention_window.clear();  // every layer full
}

int64_t parse_sliding_window(const JsonNode& j, int64_t absent) {
  if (j.has_null("sliding_window")) return 0;
  const int64_t window = get_size(j, "sliding_window", absent);
  if (j.has("sliding_window") && window == 0)
    j.invalid_member("sliding_window", "is 0, a window that shows a query no key (null means full attention)");
  return window;
}

void parse_qwen_sliding_window(const JsonNode& j, ModelConfig& c) {
  const bool use = j.bool_or("use_sliding_window", false);
  const int64_t window = use ? parse_sliding_window(j, 0) : 0;
  const int64_t first = get_size(j, "max_window_layers", 28);
  set_attention_windows(j, window, [first](int64_t l) { return l >= first; }, c);
}

void parse_grouped_sigmoid_router(const JsonNode& j, const SigmoidRouterDefaults& d,
                                  ModelConfig& c) {
  c.router_scoring = RouterScoring::kSigmoid;
  c.router_correction_bias = true;
  // The only scoring and selection this family implements: another value
  // would run a different router than the config describes.
  if (const auto f = j.find("scoring_func"); f && f->str() != "sigmoid")
    f->invalid("is '" + f->str() + "'; allowed: sigmoid");
  if (const auto f = j.find("topk_method"); f && f->str() != "noaux_tc")
    f->invalid("is '" + f->str() + "'; allowed: noaux_tc");
  c.norm_topk_prob = j.bool_or("norm_topk_prob", d.norm_topk_prob);
  c.router_groups = get_size(j, "n_group", d.n_group);
  c.router_topk_groups = get_size(j, "topk_group", d.topk_group);
  c.routed_scaling_factor = j.number_or("routed_scaling_factor", d.routed_scaling_factor);
  c.moe_intermediate_size = parse_expert_size(j, "moe_intermediate_size");
  const int64_t shared = get_size(j, "n_shared_experts", d.n_shared_experts);
  check_max(j, shared, kMaxConfigExperts, "n_shared_experts");
  c.shared_expert_intermediate_size = c.moe_intermediate_size * shared;
  check_max(j, c.shared_expert_intermediate_size, kMaxConfigDim, "moe_intermediate_size x n_shared_experts");
  c.shared_expert_gated = false;
}

int64_t parse_expert_size(const JsonNode& j, const char* key) {
  const int64_t v = get_size(j, key);
  if (v == 0) j.invalid_member(key, "the expert intermediate size must be positive");
  check_max(j, v, kMaxConfigDim, key);
  return v;
}

void parse_sparse_step_layers(const JsonNode& j, ModelConfig& c) {
  const int64_t step = get_size(j, "decoder_sparse_step", 1);
  std::set<int64_t> dense;
  if (const auto layers = j.find("mlp_only_layers"); layers && layers->value().is_array())
    for (size_t i = 0; i < layers->size(); ++i) {
      const int64_t l = layers->index(i).integer();
      if (l < 0 || l >= c.num_layers)
        layers->invalid("holds layer " + std::to_string(l) + ", outside [0, " + std::to_string(c.num_layers) +
                        ") (num_hidden_layers)");
      dense.insert(l);
    }
  for (int64_t l = 0; l < c.num_layers; ++l)
    c.layer_is_moe[static_cast<size_t>(l)] = !dense.count(l) && step > 0 && (l + 1) % step == 0;
  if (c.num_moe_layers() < c.num_layers && c.intermediate_size == 0)
    j.invalid("dense MLP layers need 'intermediate_size'");
}

void parse_gated_delta_layers(const JsonNode& j, bool fused, ModelConfig& c) {
  c.layer_is_linear.assign(static_cast<size_t>(c.num_layers), false);
  if (const auto types = read_layer_types(j, c.num_layers, "linear_attention")) {
    for (size_t l = 0; l < types->size(); ++l) c.layer_is_linear[l] = (*types)[l] == "linear_attention";
  } else {
    const int64_t interval = get_size(j, "full_attention_interval", 4);
    if (interval == 0) j.invalid_member("full_attention_interval", "must be positive");
    for (int64_t l = 0; l < c.num_layers; ++l) c.layer_is_linear[static_cast<size_t>(l)] = (l + 1) % interval != 0;
  }
  LinearAttentionConfig& a = c.linear;
  a.num_key_heads = get_size(j, "linear_num_key_heads", 16);
  a.num_value_heads = get_size(j, "linear_num_value_heads", 32);
  a.key_head_dim = get_size(j, "linear_key_head_dim", 128);
  a.value_head_dim = get_size(j, "linear_value_head_dim", 128);
  a.conv_kernel = get_size(j, "linear_conv_kernel_dim", 4);
  a.fused_projections = fused;
  check_max(j, a.num_key_heads, kMaxConfigDim, "linear_num_key_heads");
  check_max(j, a.num_value_heads, kMaxConfigDim, "linear_num_value_heads");
  check_max(j, a.key_head_dim, kMaxConfigDim, "linear_key_head_dim");
  check_max(j, a.value_head_dim, kMaxConfigDim, "linear_value_head_dim");
  check_max(j, a.conv_kernel, 1024, "linear_conv_kernel_dim");
  const std::pair<const char*, int64_t> sizes[] = {{"linear_num_key_heads", a.num_key_heads},
                                                   {"linear_num_value_heads", a.num_value_heads},
                                                   {"linear_key_head_dim", a.key_head_dim},
                                                   {"linear_value_head_dim", a.value_head_dim},
                                                   {"linear_conv_kernel_dim", a.conv_kernel}};
  for (const auto& [key, v] : sizes)
    if (v == 0) j.invalid_member(key, "must be positive");
  if (a.num_value_heads % a.num_key_heads != 0)
    j.invalid_member("linear_num_value_heads", std::to_string(a.num_value_heads) + " must be a multiple of " +
                                                   "linear_num_key_heads (" + std::to_string(a.num_key_heads) + ")");
  c.attention_output_gate = true;
  c.norm_zero_centred = true;
  c.qk_norm = QkNorm::kPerHead;
}

}  // namespace eq::model::arch
