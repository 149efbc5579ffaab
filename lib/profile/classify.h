// From statistics to an allocation: per-expert metrics (usage share and
// ratio, REAP and its percentile, coverage), threshold classification with
// guard rails, and the bytes / predicted error of any assignment. Every
// decision records the rule that made it (profile.json "rule").
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "model/config.h"
#include "plan/allocation.h"
#include "plan/format_tally.h"
#include "profile/policy.h"
#include "profile/routing_stats.h"
#include "profile/sensitivity.h"

namespace eq::profile {

struct ExpertMetrics {
  double share = 0;            // of the layer's routed slots
  double usage_ratio = 0;      // share × num_experts (1 = uniform)
  double reap = 0;             // mean gate·‖y‖ (or mean gate when outputs are unknown)
  double reap_percentile = 0;  // within the layer's covered experts, 0..100
  bool under_covered = false;  // tokens < policy.min_tokens
  double error_weight = 0;     // gated output energy / layer routed output energy
};

// Metrics of every expert, [layer index][expert].
std::vector<std::vector<ExpertMetrics>> expert_metrics(const RoutingStats& stats, const Policy& policy);

struct ExpertDecision {
  plan::ExpertClass cls = plan::ExpertClass::kStandard;
  std::string format;  // empty when pruned
  std::string rule;    // why
};

struct Classification {
  std::string mode;  // "thresholds" or "budget"
  std::vector<std::vector<ExpertDecision>> layers;  // [layer index][expert]
  // Filled for every mode by summarize():
  uint64_t expert_bytes = 0, expert_weights = 0;
  double avg_bits = 0;
  plan::FormatTally format_mix;  // the formats chosen, with their experts and bytes
  double predicted_error = 0;  // mean over layers of the predicted relative output MSE (NaN without sensitivity)
  // Budget mode only:
  double target_bits = 0;
  uint64_t target_bytes = 0;
  double max_pack_seconds = 0;  // the pack-time limit (0 = none)
  // The predicted pack time of this allocation (pack_time.h; NaN until
  // predicted), filled by reclassify.
  double predicted_pack_seconds = std::numeric_limits<double>::quiet_NaN();
  // Guard rails that changed the allocation, each with what it cost in
  // predicted error (bit_budget.h); shown by --summary, not stored.
  std::vector<std::string> budget_notes;
};

Classification classify_by_thresholds(const RoutingStats& stats, const SensitivityTable& sens, const Policy& policy);

// Bytes of one expert (gate, up, down) in `format` ("" = pruned: 0).
uint64_t expert_bytes(const model::ModelConfig& c, const std::string& format);
// Predicted relative error of one expert in `format` (pruned: its whole weight).
double expert_error(const ExpertMetrics& m, const ExpertSensitivity* s, const SensitivityTable& sens,
                    const std::string& format);
// Fills bytes, bits and predicted error of `cls`.
void summarize(Classification& cls, const RoutingStats& stats, const SensitivityTable& sens, const Policy& policy,
               const model::ModelConfig& c);

// Class a format stands for when the budget picks it: the policy's class
// formats map to their class; another format to the class whose format's
// bits per weight are nearest (ties to the wider class).
plan::ExpertClass class_of_format(const Policy& policy, const std::string& format);

plan::Allocation to_allocation(const Classification& cls, const RoutingStats& stats);

}  // namespace eq::profile
