#include "plan/allocation.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "plan/json_file.h"
#include "quant/format.h"

namespace eq::plan {

using nlohmann::json;

namespace {

constexpr std::string_view kClassNames[kNumClasses] = {"critical", "standard", "deprioritized", "pruned"};

// A short rendering of a value for an error message (dump() of a big value
// would copy the whole file into the message).
std::string brief(const json& v) {
  if (v.is_structured()) return v.is_array() ? "an array" : "an object";
  std::string s = v.dump();
  return s.size() > 80 ? s.substr(0, 80) + "..." : s;
}

std::string format_list() {
  std::string s;
  for (const auto& f : quant::all_formats()) s += (s.empty() ? "" : ", ") + std::string(f.name);
  return s;
}

}  // namespace

std::string_view class_name(ExpertClass c) { return kClassNames[static_cast<int>(c)]; }

std::optional<ExpertClass> parse_class(std::string_view name) {
  for (int i = 0; i < kNumClasses; ++i)
    if (kClassNames[i] == name) return static_cast<ExpertClass>(i);
  return std::nullopt;
}

const LayerAllocation* Allocation::find(int64_t layer) const {
  for (const auto& l : layers)
    if (l.layer == layer) return &l;
  return nullptr;
}

Allocation parse_allocation(const json& j, const std::string& label) {
  auto bad = [&](const std::string& field, const std::string& why) -> void {
    invalid(label + ": field '" + field + "': " + why);
  };
  if (!j.is_object()) invalid(label + ": an allocation must be a JSON object");
  if (!j.contains("version")) bad("version", "missing (this reader understands version 1)");
  if (!j["version"].is_number_integer() || j["version"].get<int64_t>() != kAllocationVersion)
    bad("version", "unsupported value " + brief(j["version"]) + " (this reader understands version 1)");
  if (j.contains("schema") && j["schema"] != kAllocationSchema)
    bad("schema", "expected \"" + std::string(kAllocationSchema) + "\", got " + brief(j["schema"]));
  if (!j.contains("layers") || !j["layers"].is_array()) bad("layers", "missing or not an array");

  Allocation a;
  for (size_t li = 0; li < j["layers"].size(); ++li) {
    const json& lj = j["layers"][li];
    const std::string lpath = "layers[" + std::to_string(li) + "]";
    if (!lj.is_object()) bad(lpath, "not an object");
    if (!lj.contains("layer") || !lj["layer"].is_number_integer() || lj["layer"].get<int64_t>() < 0)
      bad(lpath + ".layer", "missing or not a non-negative integer");
    LayerAllocation la;
    la.layer = lj["layer"].get<int64_t>();
    // Ascending order makes the previous entry the only possible duplicate
    // (a search of all earlier layers would be quadratic in the file size).
    if (!a.layers.empty() && la.layer == a.layers.back().layer)
      bad(lpath + ".layer", "layer " + std::to_string(la.layer) + " listed twice");
    if (!a.layers.empty() && la.layer < a.layers.back().layer)
      bad(lpath + ".layer", "layers must be listed in ascending order");
    if (la.layer >= model::kMaxConfigLayers)
      bad(lpath + ".layer", "layer " + std::to_string(la.layer) + " is beyond the supported " +
                                std::to_string(model::kMaxConfigLayers) + " layers");
    if (!lj.contains("experts") || !lj["experts"].is_array()) bad(lpath + ".experts", "missing or not an array");
    if (int64_t(lj["experts"].size()) > model::kMaxConfigExperts)
      bad(lpath + ".experts", std::to_string(lj["experts"].size()) + " entries, more than the supported " +
                                  std::to_string(model::kMaxConfigExperts) + " experts per layer");
    for (size_t ei = 0; ei < lj["experts"].size(); ++ei) {
      const json& ej = lj["experts"][ei];
      const std::string epath = lpath + ".experts[" + std::to_string(ei) + "]";
      if (!ej.is_object()) bad(epath, "not an object");
      if (ej.contains("expert") && (!ej["expert"].is_number_integer() || ej["expert"].get<int64_t>() != int64_t(ei)))
        bad(epath + ".expert", "must equal its position " + std::to_string(ei) + " in the list");
      if (!ej.contains("class") || !ej["class"].is_string())
        bad(epath + ".class", "missing (one of critical, standard, deprioritized, pruned)");
      auto cls = parse_class(ej["class"].get<std::string>());
      if (!cls) bad(epath + ".class", "unknown class \"" + ej["class"].get<std::string>() +
                                          "\" (one of critical, standard, deprioritized, pruned)");
      ExpertAssignment ea;
      ea.cls = *cls;
      const bool has_format = ej.contains("format") && !ej["format"].is_null();
      if (ea.cls == ExpertClass::kPruned) {
        if (has_format) bad(epath + ".format", "a pruned expert has no format (omit it or use null)");
      } else {
        if (!has_format || !ej["format"].is_string()) bad(epath + ".format", "missing for a non-pruned expert");
        ea.format = ej["format"].get<std::string>();
        if (!quant::find_format(ea.format))
          bad(epath + ".format", "unknown format \"" + ea.format + "\" (known: " + format_list() + ")");
      }
      la.experts.push_back(std::move(ea));
    }
    a.layers.push_back(std::move(la));
  }
  return a;
}

Allocation parse_allocation_text(std::string_view text, const std::string& label) {
  return parse_allocation(parse_json(text, label), label);
}

Allocation load_allocation(const std::string& path) {
  return parse_allocation(read_json_file(path, "allocation"), "allocation " + path);
}

Allocation uniform_allocation(const model::ModelConfig& c, const std::string& format) {
  quant::format_by_name(format);  // throws listing the known names
  Allocation a;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    if (!c.layer_is_moe.empty() && !c.layer_is_moe[l]) continue;
    LayerAllocation la;
    la.layer = l;
    la.experts.assign(c.num_experts, ExpertAssignment{ExpertClass::kStandard, format});
    a.layers.push_back(std::move(la));
  }
  return a;
}

void check_allocation(const Allocation& a, const model::ModelConfig& c, const std::string& label) {
  size_t moe_layers = 0;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const bool moe = c.layer_is_moe.empty() || c.layer_is_moe[l];
    if (!moe) {
      if (a.find(l)) invalid(label + ": field 'layers': layer " + std::to_string(l) + " is not a MoE layer");
      continue;
    }
    ++moe_layers;
    const LayerAllocation* la = a.find(l);
    if (!la) invalid(label + ": field 'layers': MoE layer " + std::to_string(l) + " is missing");
    if (int64_t(la->experts.size()) != c.num_experts)
      invalid(label + ": field 'layers[layer=" + std::to_string(l) + "].experts': " +
              std::to_string(la->experts.size()) + " entries, the model has " + std::to_string(c.num_experts) +
              " experts per layer");
    // The packed model routes each token to top_k of the experts kept: a layer
    // with fewer is refused here, not by every consumer of the pack.
    const auto kept = std::count_if(la->experts.begin(), la->experts.end(),
                                    [](const ExpertAssignment& ea) { return ea.cls != ExpertClass::kPruned; });
    if (kept < c.top_k)
      invalid(label + ": field 'layers[layer=" + std::to_string(l) + "].experts': " + std::to_string(kept) +
              " experts not pruned, the model routes each token to top_k = " + std::to_string(c.top_k));
    for (size_t e = 0; e < la->experts.size(); ++e) {
      const auto& ea = la->experts[e];
      if (ea.cls == ExpertClass::kPruned) continue;
      const auto& f = quant::format_by_name(ea.format);
      // gate/up are [I, H], down is [H, I]: both orientations must fit the format.
      const int64_t dims[2][2] = {{c.moe_intermediate_size, c.hidden_size}, {c.hidden_size, c.moe_intermediate_size}};
      for (const auto& d : dims)
        if ((f.row_multiple > 0 && d[0] % f.row_multiple) || (f.col_multiple > 0 && d[1] % f.col_multiple))
          invalid(label + ": field 'layers[layer=" + std::to_string(l) + "].experts[" + std::to_string(e) +
                  "].format': " + std::string(f.name) + " needs rows % " + std::to_string(f.row_multiple) +
                  " and cols % " + std::to_string(f.col_multiple) + " == 0, expert matrix is [" +
                  std::to_string(d[0]) + ", " + std::to_string(d[1]) + "]");
    }
  }
  if (a.layers.size() != moe_layers) {
    for (const auto& la : a.layers)
      if (la.layer >= c.num_layers)
        invalid(label + ": field 'layers': layer " + std::to_string(la.layer) + " does not exist (the model has " +
                std::to_string(c.num_layers) + " layers)");
  }
}

void to_json(json& j, const ExpertAssignment& e) {
  j = {{"class", class_name(e.cls)}};
  if (e.cls != ExpertClass::kPruned) j["format"] = e.format;
}

void to_json(json& j, const LayerAllocation& l) { j = {{"layer", l.layer}, {"experts", l.experts}}; }

json allocation_to_json(const Allocation& a) {
  return {{"schema", kAllocationSchema}, {"version", kAllocationVersion}, {"layers", a.layers}};
}

}  // namespace eq::plan
