// Allocation files (per-expert class and format). An allocation that parses
// is also checked against the bundled tinymoe architecture, as pack does.
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz/fuzz_target.h"
#include "model/config.h"
#include "plan/allocation.h"

namespace {

// data/tinymoe/config.json, inlined so the target needs no files.
const eq::model::ModelConfig& tinymoe() {
  static const eq::model::ModelConfig config = eq::model::parse_config(
      nlohmann::json::parse(R"({"model_type": "qwen3_moe", "vocab_size": 256, "hidden_size": 128,
        "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
        "num_local_experts": 32, "num_experts_per_tok": 4, "moe_intermediate_size": 64, "intermediate_size": 256})"),
      "tinymoe");
  return config;
}

}  // namespace

EQ_FUZZ_TARGET(allocation) {
  const auto a = eq::plan::parse_allocation_text(
      std::string_view(reinterpret_cast<const char*>(input.data()), input.size()), "fuzz/allocation.json");
  eq::plan::check_allocation(a, tinymoe(), "fuzz/allocation.json");
  eq::plan::allocation_to_json(a).dump();
}
