// Which of a policy's formats a model's experts can take. Every routed expert
// of a model has the same matrices (gate and up [I, H], down [H, I]), so a
// format fits every expert of every layer or none: a candidate that does not
// fit is skipped (never measured, never chosen), a class format that does not
// fit is replaced by the nearest wider format that does, and a proxy that does
// not fit stops standing in (its format is measured itself). docs/policy.md,
// "Formats a model cannot take".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "profile/policy.h"
#include "quant/format.h"

namespace eq::profile {

// The expert matrices a format cannot take, and why: reason is e.g.
// "down [64, 32] needs cols % 64 == 0". Empty when all three fit.
struct ShapeMisfit {
  std::vector<std::string> matrices;  // of "gate", "up", "down"
  std::string reason;
  bool fits() const { return matrices.empty(); }
};
ShapeMisfit expert_misfit(const quant::FormatTraits& format, int64_t hidden, int64_t intermediate);
bool fits_experts(const std::string& format, int64_t hidden, int64_t intermediate);

// The format a class whose format `wanted` cannot take the experts gets: among
// the registry rows that fit, those with more bits per weight than `wanted`;
// of these the fewest bits, ties going to a policy candidate, then to
// `wanted`'s family, then to registry order. bf16 fits any shape, so only a
// format of 16 or more bits could find none (an eq::Error).
std::string nearest_wider_fit(const std::string& wanted, const std::vector<std::string>& candidates, int64_t hidden,
                              int64_t intermediate);

struct SkippedFormat {
  std::string format;
  ShapeMisfit misfit;
};
struct ClassSubstitute {
  plan::ExpertClass cls = plan::ExpertClass::kStandard;
  std::string wanted, used;  // the policy's format, the one the class gets
  ShapeMisfit misfit;        // of `wanted`
};
struct DroppedProxy {
  std::string format, proxy;  // `format` is measured itself
  ShapeMisfit misfit;         // of `proxy`
};

struct CandidateFit {
  // The policy as this model can use it: class formats substituted, the
  // candidates that fit (class formats first), the proxies that still apply.
  Policy policy;
  std::vector<SkippedFormat> skipped;  // candidates, in policy order
  std::vector<ClassSubstitute> substitutes;
  std::vector<DroppedProxy> dropped_proxies;
  bool changed() const { return !skipped.empty() || !substitutes.empty() || !dropped_proxies.empty(); }
};
// Idempotent: fitting a fitted policy changes nothing.
CandidateFit fit_policy(const Policy& policy, int64_t hidden, int64_t intermediate);

// One line per skip, substitution and dropped proxy, naming the MoE layers
// ("candidate int4_g64 skipped: down [64, 32] needs cols % 64 == 0 (every
// expert of all 8 MoE layers)").
std::vector<std::string> describe_fit(const CandidateFit& fit, size_t moe_layers);
// The same as JSON: skipped_candidates, class_substitutes, dropped_proxies,
// each entry with the format(s), matrices, reason and the MoE layer ids.
nlohmann::ordered_json fit_to_json(const CandidateFit& fit, const std::vector<int64_t>& moe_layer_ids);

}  // namespace eq::profile
