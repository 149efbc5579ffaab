// Classification policy (configs/*.json, docs/policy.md): which formats are
// measured, which format each class gets, the thresholds that assign classes,
// and the guard rails that neither thresholds nor a bit budget may cross.
// Parsed strictly: unknown keys and bad values are errors naming the field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/config.h"
#include "plan/allocation.h"

namespace eq::profile {

inline constexpr int kPolicyVersion = 1;
inline constexpr std::string_view kPolicySchema = "expertquant.policy";

struct Policy {
  std::string name, description;
  // Format of each kept class, indexed by plan::ExpertClass (critical, standard, deprioritized).
  std::string class_format[3];
  // Formats whose sensitivity is measured (class formats first, then extras);
  // the bit-budget allocator chooses among these (and pruning). Those a
  // model's experts cannot take are skipped for it (profile/candidate_fit.h).
  std::vector<std::string> candidates;
  // Formats of the matrices outside the routed allocation that pack quantizes
  // (pack --profile; --shared-format / --dense-format override): the shared
  // experts and the dense MLPs of the non-MoE layers. Empty (null in JSON):
  // copied as stored.
  std::string shared_expert_format, dense_mlp_format;
  // When every routed expert is stored in a form a format imports bit for bit
  // (an MXFP4 checkpoint and mxfp4), that format becomes the standard class
  // and a candidate, measured at zero error (profile/lossless_source.h).
  bool lossless_source_formats = true;

  // Coverage: experts routed fewer times are under-covered and get this class.
  int64_t min_tokens = 32;
  plan::ExpertClass under_covered_class = plan::ExpertClass::kStandard;

  // Sensitivity sampling.
  int64_t max_samples = 128;   // routed input rows kept per expert
  int64_t min_samples = 16;    // fewer routed rows: forced calibration tokens instead
  uint64_t seed = 1;
  uint64_t max_sample_bytes = 1ull << 30;
  // format -> measured format whose rel. MSE, times a fitted ratio, stands in
  // for it (trellis is far slower to quantize than the affine formats).
  // Recorded in profile.json.
  std::vector<std::pair<std::string, std::string>> proxies;
  // Experts of the whole model (spread over layers) on which each proxied format is also measured itself,
  // to fit the ratio (profile/proxy_fit.h); 0 = no fit, the proxy's value is copied.
  int64_t proxy_calibration_experts = 12;
  // Rows of each expert matrix quantized to measure a format (the estimate of
  // profile/row_sampled_error.h); 0 = the exact measurement, every row and the
  // expert's whole quantized output.
  int64_t sample_rows = 64;

  // Thresholds (usage ratio = share of routed slots × num_experts; 1 = uniform).
  double critical_min_usage_ratio = 3.0;      // critical when usage ratio >= this, or
  double critical_min_reap_percentile = 95;   //   REAP percentile >= this and
  double critical_min_sensitivity = 0.02;     //   rel. MSE of the standard format >= this
  double deprioritized_max_usage_ratio = 0.5; // deprioritized when usage ratio <= this and
  double deprioritized_max_reap_percentile = 40;
  double pruned_max_usage_ratio = 0.05;       // pruned when usage ratio <= this and
  double pruned_max_reap_percentile = 10;

  // Bit budget (average bits per expert weight) used when profile is given
  // none: 0 = threshold classification. A default is never an error: below
  // the minimum the guard rails allow, that minimum is allocated.
  double default_target_bits = 0;

  // Guard rails (per layer).
  double max_pruned_fraction = 0.15;      // of the layer's experts
  double max_pruned_usage_share = 0.002;  // never prune an expert above this share of routed slots
  int64_t min_kept_experts = 0;           // 0 = top_k
  double max_critical_fraction = 0.10;

  nlohmann::ordered_json to_json() const;
  int64_t kept_floor(int64_t top_k) const { return min_kept_experts > 0 ? min_kept_experts : top_k; }
};

// Errors name `label` and the field ("thresholds.pruned.max_usage_ratio").
Policy parse_policy(const nlohmann::json& j, const std::string& label);
Policy load_policy(const std::string& path);
// The built-in policy, identical to configs/default.json.
Policy default_policy();

}  // namespace eq::profile
