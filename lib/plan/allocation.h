// The bit allocation: for every MoE layer and expert, its class and the
// registry format it is stored in. Read from an allocation file, from the
// "allocation" key of a profile, or made uniform for a baseline.
// Schema: docs/allocation.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/config.h"

namespace eq::plan {

inline constexpr int kAllocationVersion = 1;
inline constexpr std::string_view kAllocationSchema = "expertquant.allocation";

enum class ExpertClass { kCritical = 0, kStandard = 1, kDeprioritized = 2, kPruned = 3 };
inline constexpr int kNumClasses = 4;
// Tables indexed by the class (names, colours, counts) have kNumClasses rows in enum order.
static_assert(static_cast<int>(ExpertClass::kPruned) == kNumClasses - 1);

std::string_view class_name(ExpertClass c);
std::optional<ExpertClass> parse_class(std::string_view name);

struct ExpertAssignment {
  ExpertClass cls = ExpertClass::kStandard;
  std::string format;  // registry name; empty when pruned
};

struct LayerAllocation {
  int64_t layer = 0;
  std::vector<ExpertAssignment> experts;  // index = expert id
};

struct Allocation {
  std::vector<LayerAllocation> layers;  // one per MoE layer, ascending
  // Null when no layer has it; otherwise the assignment for `layer`.
  const LayerAllocation* find(int64_t layer) const;
};

// Parses and validates the schema (not the model): errors name `label` and the
// JSON path of the bad field ("layers[2].experts[5].format").
Allocation parse_allocation(const nlohmann::json& j, const std::string& label);
// Parses allocation JSON text (depth-guarded JSON, then parse_allocation).
Allocation parse_allocation_text(std::string_view text, const std::string& label);
// Reads an allocation file.
Allocation load_allocation(const std::string& path);

// Every expert of every MoE layer in `format`, class "standard".
Allocation uniform_allocation(const model::ModelConfig& c, const std::string& format);

// Checks the allocation against the model and the format registry: exactly
// the model's MoE layers, num_experts entries each, known formats whose shape
// constraints fit the expert matrices. Errors name `label` and the field.
void check_allocation(const Allocation& a, const model::ModelConfig& c, const std::string& label);

// Each entry as an allocation file holds it (a pruned expert has no format).
void to_json(nlohmann::json& j, const ExpertAssignment& e);
void to_json(nlohmann::json& j, const LayerAllocation& l);
nlohmann::json allocation_to_json(const Allocation& a);

}  // namespace eq::plan
