// Building blocks the architecture files share: the fields every decoder has
// and the layer-selection rules several families use. config.json is read
// through io::JsonNode, whose errors name the file and the field.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "io/json_node.h"
#include "model/config.h"

namespace eq::model::arch {

using io::JsonNode;

// A size field: a non-negative integer; missing or null gives `fallback`, or
// an error without one.
int64_t get_size(const JsonNode& j, const char* key, std::optional<int64_t> fallback = {});

// Fails (exit 5) when v exceeds the supported maximum, naming the field.
void check_max(const JsonNode& j, int64_t v, int64_t max, const std::string& what);

// The fields every supported decoder shares: vocabulary, hidden size, layers,
// attention heads and head_dim, experts and top-k, dense intermediate size,
// tied embeddings, max positions, source dtype; every layer MoE.
void parse_decoder_fields(const JsonNode& j, ModelConfig& c);

// RoPE theta from "rope_theta" or "rope_parameters.rope_theta" (`fallback`
// when neither); any rope scaling other than "default" is refused.
double parse_rope_theta(const JsonNode& j, double fallback);

// RoPE from "rope_parameters" (theta, partial_rotary_factor, rope_type and
// its fields), else top-level "rope_theta"/"partial_rotary_factor" with a
// "rope_scaling" dict: sets rope_theta, rope_dim (head_dim x the partial
// factor, truncated) and rope_yarn. Types "default" and "yarn" are accepted.
void parse_rope(const JsonNode& j, double fallback_theta, double fallback_partial,
                ModelConfig& c);
// YaRN's magnitude correction: 0.1 mscale ln(factor) + 1, or 1 for factor <= 1.
double yarn_mscale(double factor, double mscale);
// The rope dict's "mscale_all_dim" (0 when absent).
double rope_mscale_all_dim(const JsonNode& j);

// Layers before "first_k_dense_replace" (`default_first` when absent) are dense, and with `layer_freq`
// also those whose index is not a multiple of "moe_layer_freq" (default 1).
void parse_first_dense_layers(const JsonNode& j, int64_t default_first, bool layer_freq,
                              ModelConfig& c);
// The Qwen-family shared expert: "shared_expert_intermediate_size" (0 or
// absent: none), gated by sigmoid(x · shared_expert_gate).
void parse_gated_shared_expert(const JsonNode& j, ModelConfig& c);

// "num_nextn_predict_layers": multi-token-prediction layers stored after the last.
void parse_mtp_layers(const JsonNode& j, ModelConfig& c);

// "layer_types" when config.json has it: one entry per layer, each "full_attention"
// or `kind` ("sliding_attention", "linear_attention"); errors name the field
// and entry. nullopt when absent or null.
std::optional<std::vector<std::string>> read_layer_types(const JsonNode& j, int64_t num_layers,
                                                         const std::string& kind);

// Per-layer attention windows (ModelConfig::attention_window): a layer is
// sliding when its "layer_types" entry says "sliding_attention" ("full_attention"
// otherwise; any other entry is an error), or without "layer_types" when
// `sliding_by_default(layer)`; a sliding layer sees the last `window` keys.
// window 0 leaves every layer full.
void set_attention_windows(const JsonNode& j, int64_t window,
                           const std::function<bool(int64_t)>& sliding_by_default, ModelConfig& c);
// "sliding_window": null gives 0 (every layer full), absent gives `absent`;
// an explicit 0 is an error naming the field (the reference's window mask
// would leave a query no key; only null means full attention).
int64_t parse_sliding_window(const JsonNode& j, int64_t absent);
// The Qwen2/Qwen3 rule: "sliding_window" applies only with "use_sliding_window"
// (default false), to the layers from "max_window_layers" (default 28) on
// unless "layer_types" lists them.
void parse_qwen_sliding_window(const JsonNode& j, ModelConfig& c);

// The grouped sigmoid router with a selection-only correction bias and the
// ungated shared experts of the DeepSeek-V3 family: norm_topk_prob, n_group,
// topk_group, routed_scaling_factor, moe_intermediate_size, n_shared_experts
// (shared size = moe_intermediate_size x n_shared_experts); a missing field
// takes the family's default.
struct SigmoidRouterDefaults {
  bool norm_topk_prob = true;
  int64_t n_group = 1, topk_group = 1;
  double routed_scaling_factor = 1.0;
  int64_t n_shared_experts = 1;
};
void parse_grouped_sigmoid_router(const JsonNode& j, const SigmoidRouterDefaults& d,
                                  ModelConfig& c);

// The routed expert's intermediate size from `key`.
int64_t parse_expert_size(const JsonNode& j, const char* key);

// MoE layers by "decoder_sparse_step" (every step-th layer, 1-based) and
// "mlp_only_layers" (dense); dense layers need "intermediate_size".
void parse_sparse_step_layers(const JsonNode& j, ModelConfig& c);

// The hybrid layers of the Qwen3-Next family: each layer's token mixer from
// "layer_types" ("linear_attention" / "full_attention"), else every
// "full_attention_interval"-th layer (default 4) full attention and the
// others linear; the gated delta net's "linear_*" sizes (`fused`: the
// projection layout, LinearAttentionConfig); full attention with an output
// gate and zero-centred RMSNorms everywhere.
void parse_gated_delta_layers(const JsonNode& j, bool fused, ModelConfig& c);

}  // namespace eq::model::arch
