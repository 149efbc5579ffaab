// Building blocks the architecture files share: typed config.json getters
// whose errors name the file and field, the fields every decoder has, and the
// layer-selection rules several families use.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "model/config.h"

namespace eq::model::arch {

using nlohmann::json;

// A missing or null field gives `fallback`, or an error without one. Integers
// must be non-negative.
int64_t get_int(const json& j, const char* key, const std::string& path, std::optional<int64_t> fallback = {});
double get_double(const json& j, const char* key, const std::string& path, double fallback);
bool get_bool(const json& j, const char* key, const std::string& path, bool fallback);
std::string get_string(const json& j, const char* key, const std::string& path, const std::string& fallback);

// Fails (exit 5) when v exceeds the supported maximum, naming the field.
void check_max(int64_t v, int64_t max, const char* what, const std::string& path);

// The fields every supported decoder shares: vocabulary, hidden size, layers,
// attention heads and head_dim, experts and top-k, dense intermediate size,
// tied embeddings, max positions, source dtype; every layer MoE.
void parse_decoder_fields(const json& j, const std::string& path, ModelConfig& c);

// RoPE theta from "rope_theta" or "rope_parameters.rope_theta" (`fallback`
// when neither); any rope scaling other than "default" is refused.
double parse_rope_theta(const json& j, const std::string& path, double fallback);

// The routed expert's intermediate size from `key`.
int64_t parse_expert_size(const json& j, const char* key, const std::string& path);

// MoE layers by "decoder_sparse_step" (every step-th layer, 1-based) and
// "mlp_only_layers" (dense); dense layers need "intermediate_size".
void parse_sparse_step_layers(const json& j, const std::string& path, ModelConfig& c);

}  // namespace eq::model::arch
