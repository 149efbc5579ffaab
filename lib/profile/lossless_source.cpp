#include "profile/lossless_source.h"

#include <algorithm>

#include "model/expert_reader.h"
#include "plan/allocation.h"
#include "profile/policy.h"
#include "quant/format.h"

namespace eq::profile {

bool imports_expert_losslessly(const quant::FormatTraits& format, const model::ModelConfig& c,
                               const io::SourceTensors& src, int64_t layer, int64_t e) {
  if (!format.import_mxfp4) return false;
  for (model::Proj p : {model::Proj::kGate, model::Proj::kUp, model::Proj::kDown})
    if (!model::expert_is_mxfp4(c, src, layer, e, p)) return false;
  return true;
}

std::vector<std::string> lossless_source_formats(const model::ModelConfig& c, const io::SourceTensors& src) {
  std::vector<std::string> out;
  for (const quant::FormatTraits& f : quant::all_formats()) {
    bool all = c.num_experts > 0;
    for (int64_t l = 0; l < c.num_layers && all; ++l) {
      if (!c.layer_is_moe[static_cast<size_t>(l)]) continue;
      for (int64_t e = 0; e < c.num_experts && all; ++e) all = imports_expert_losslessly(f, c, src, l, e);
    }
    if (all) out.emplace_back(f.name);
  }
  return out;
}

bool adopt_lossless_formats(Policy& policy, const std::vector<std::string>& formats) {
  if (formats.empty()) return false;
  bool changed = false;
  std::string& standard = policy.class_format[static_cast<size_t>(plan::ExpertClass::kStandard)];
  if (standard != formats.front()) {
    standard = formats.front();
    changed = true;
  }
  for (auto it = formats.rbegin(); it != formats.rend(); ++it) {
    auto at = std::find(policy.candidates.begin(), policy.candidates.end(), *it);
    if (at == policy.candidates.begin()) continue;
    if (at != policy.candidates.end()) policy.candidates.erase(at);
    policy.candidates.insert(policy.candidates.begin(), *it);
    changed = true;
  }
  return changed;
}

}  // namespace eq::profile
