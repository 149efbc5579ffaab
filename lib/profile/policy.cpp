#include "profile/policy.h"

#include <algorithm>
#include <set>

#include "core/error.h"
#include "io/json_guard.h"
#include "io/text_file.h"
#include "quant/format.h"

namespace eq::profile {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

class Reader {
 public:
  explicit Reader(std::string label) : label_(std::move(label)) {}
  [[noreturn]] void bad(const std::string& field, const std::string& why) const {
    invalid(label_ + ": field '" + field + "': " + why);
  }
  const json& object(const json& j, const std::string& field, const std::set<std::string>& keys) const {
    if (!j.is_object()) bad(field, "must be an object");
    for (auto it = j.begin(); it != j.end(); ++it)
      if (!keys.count(it.key())) bad(join(field, it.key()), "unknown key");
    return j;
  }
  double number(const json& j, const std::string& parent, const std::string& key, double def, double lo,
                double hi) const {
    if (!j.contains(key)) return def;
    const json& v = j[key];
    if (!v.is_number()) bad(join(parent, key), "must be a number");
    const double d = v.get<double>();
    if (!(d >= lo && d <= hi))
      bad(join(parent, key), "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + v.dump());
    return d;
  }
  int64_t integer(const json& j, const std::string& parent, const std::string& key, int64_t def, int64_t lo) const {
    if (!j.contains(key)) return def;
    const json& v = j[key];
    if (!v.is_number_integer() || v.get<int64_t>() < lo)
      bad(join(parent, key), "must be an integer >= " + std::to_string(lo));
    return v.get<int64_t>();
  }
  std::string format(const json& v, const std::string& field) const {
    if (!v.is_string()) bad(field, "must be a format name (string)");
    const std::string name = v.get<std::string>();
    if (!quant::find_format(name)) {
      std::string known;
      for (const auto& f : quant::all_formats()) known += (known.empty() ? "" : ", ") + std::string(f.name);
      bad(field, "unknown format \"" + name + "\" (known: " + known + ")");
    }
    return name;
  }
  static std::string join(const std::string& a, const std::string& b) { return a.empty() ? b : a + "." + b; }

 private:
  std::string label_;
};

}  // namespace

Policy parse_policy(const json& j, const std::string& label) try {
  Reader r(label);
  r.object(j, "", {"schema", "version", "name", "description", "formats", "shared_expert_format", "dense_mlp_format",
                   "candidates", "lossless_source_formats", "coverage", "sensitivity", "thresholds", "guard_rails",
                   "default_target_bits"});
  Policy p;
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int>() != kPolicyVersion)
    r.bad("version", "missing or unsupported (this reader understands version 1)");
  if (j.contains("schema") && j["schema"] != kPolicySchema)
    r.bad("schema", "expected \"" + std::string(kPolicySchema) + "\"");
  if (j.contains("name")) {
    if (!j["name"].is_string()) r.bad("name", "must be a string");
    p.name = j["name"];
  }
  if (j.contains("description")) {
    if (!j["description"].is_string()) r.bad("description", "must be a string");
    p.description = j["description"];
  }

  if (!j.contains("formats")) r.bad("formats", "missing (the format of critical, standard and deprioritized)");
  const json& f = r.object(j["formats"], "formats", {"critical", "standard", "deprioritized", "pruned"});
  const char* kept[3] = {"critical", "standard", "deprioritized"};
  for (int c = 0; c < 3; ++c) {
    if (!f.contains(kept[c])) r.bad(std::string("formats.") + kept[c], "missing");
    p.class_format[c] = r.format(f[kept[c]], std::string("formats.") + kept[c]);
  }
  if (f.contains("pruned") && !f["pruned"].is_null()) r.bad("formats.pruned", "must be null (pruned experts are removed)");
  for (auto [key, dst] : {std::pair{"shared_expert_format", &p.shared_expert_format},
                          std::pair{"dense_mlp_format", &p.dense_mlp_format}})
    if (j.contains(key) && !j[key].is_null()) *dst = r.format(j[key], key);

  std::set<std::string> seen;
  for (const auto& name : p.class_format)
    if (seen.insert(name).second) p.candidates.push_back(name);
  if (j.contains("candidates")) {
    if (!j["candidates"].is_array()) r.bad("candidates", "must be an array of format names");
    for (size_t i = 0; i < j["candidates"].size(); ++i) {
      const std::string name = r.format(j["candidates"][i], "candidates[" + std::to_string(i) + "]");
      if (seen.insert(name).second) p.candidates.push_back(name);
    }
  }

  if (j.contains("lossless_source_formats")) {
    if (!j["lossless_source_formats"].is_boolean()) r.bad("lossless_source_formats", "must be true or false");
    p.lossless_source_formats = j["lossless_source_formats"];
  }

  if (j.contains("coverage")) {
    const json& c = r.object(j["coverage"], "coverage", {"min_tokens", "under_covered_class"});
    p.min_tokens = r.integer(c, "coverage", "min_tokens", p.min_tokens, 0);
    if (c.contains("under_covered_class")) {
      const auto cls = c["under_covered_class"].is_string()
                           ? pack::parse_class(c["under_covered_class"].get<std::string>())
                           : std::nullopt;
      if (!cls || *cls == pack::ExpertClass::kPruned)
        r.bad("coverage.under_covered_class", "must be critical, standard or deprioritized (never pruned)");
      p.under_covered_class = *cls;
    }
  }
  if (j.contains("sensitivity")) {
    const json& s = r.object(j["sensitivity"], "sensitivity",
                                {"max_samples", "min_samples", "seed", "max_sample_bytes", "proxies",
                                 "proxy_calibration_experts", "sample_rows"});
    p.max_samples = r.integer(s, "sensitivity", "max_samples", p.max_samples, 0);
    p.min_samples = r.integer(s, "sensitivity", "min_samples", p.min_samples, 1);
    p.seed = uint64_t(r.integer(s, "sensitivity", "seed", int64_t(p.seed), 0));
    p.max_sample_bytes = uint64_t(r.integer(s, "sensitivity", "max_sample_bytes", int64_t(p.max_sample_bytes), 1));
    p.proxy_calibration_experts =
        r.integer(s, "sensitivity", "proxy_calibration_experts", p.proxy_calibration_experts, 0);
    p.sample_rows = r.integer(s, "sensitivity", "sample_rows", p.sample_rows, 0);
    if (s.contains("proxies")) {
      if (!s["proxies"].is_object()) r.bad("sensitivity.proxies", "must be an object {format: measured format}");
      for (auto it = s["proxies"].begin(); it != s["proxies"].end(); ++it) {
        const std::string field = "sensitivity.proxies." + it.key();
        const std::string from = r.format(json(it.key()), field);
        const std::string to = r.format(it.value(), field);
        if (std::find(p.candidates.begin(), p.candidates.end(), from) == p.candidates.end())
          r.bad(field, "is not a candidate format");
        if (std::find(p.candidates.begin(), p.candidates.end(), to) == p.candidates.end())
          r.bad(field, "proxy " + to + " must itself be a candidate format");
        if (s["proxies"].contains(to)) r.bad(field, "proxy " + to + " is itself proxied");
        p.proxies.emplace_back(from, to);
      }
    }
  }
  if (j.contains("thresholds")) {
    const json& t = r.object(j["thresholds"], "thresholds", {"critical", "deprioritized", "pruned"});
    const double inf = 1e300;
    if (t.contains("critical")) {
      const json& c = r.object(t["critical"], "thresholds.critical",
                               {"min_usage_ratio", "min_reap_percentile", "min_sensitivity"});
      p.critical_min_usage_ratio = r.number(c, "thresholds.critical", "min_usage_ratio", p.critical_min_usage_ratio, 0, inf);
      p.critical_min_reap_percentile =
          r.number(c, "thresholds.critical", "min_reap_percentile", p.critical_min_reap_percentile, 0, 100);
      p.critical_min_sensitivity = r.number(c, "thresholds.critical", "min_sensitivity", p.critical_min_sensitivity, 0, inf);
    }
    if (t.contains("deprioritized")) {
      const json& d = r.object(t["deprioritized"], "thresholds.deprioritized", {"max_usage_ratio", "max_reap_percentile"});
      p.deprioritized_max_usage_ratio =
          r.number(d, "thresholds.deprioritized", "max_usage_ratio", p.deprioritized_max_usage_ratio, 0, inf);
      p.deprioritized_max_reap_percentile =
          r.number(d, "thresholds.deprioritized", "max_reap_percentile", p.deprioritized_max_reap_percentile, 0, 100);
    }
    if (t.contains("pruned")) {
      const json& d = r.object(t["pruned"], "thresholds.pruned", {"max_usage_ratio", "max_reap_percentile"});
      p.pruned_max_usage_ratio = r.number(d, "thresholds.pruned", "max_usage_ratio", p.pruned_max_usage_ratio, 0, inf);
      p.pruned_max_reap_percentile =
          r.number(d, "thresholds.pruned", "max_reap_percentile", p.pruned_max_reap_percentile, 0, 100);
    }
    if (p.pruned_max_usage_ratio > p.deprioritized_max_usage_ratio)
      r.bad("thresholds.pruned.max_usage_ratio", "must not exceed thresholds.deprioritized.max_usage_ratio");
  }
  if (j.contains("default_target_bits") && !j["default_target_bits"].is_null()) {
    const json& b = j["default_target_bits"];
    if (!b.is_number() || !(b.get<double>() > 0) || b.get<double>() > 16)
      r.bad("default_target_bits", "must be null (threshold classification) or a number of bits in (0, 16]");
    p.default_target_bits = b.get<double>();
  }
  if (j.contains("guard_rails")) {
    const json& g = r.object(j["guard_rails"], "guard_rails",
                             {"max_pruned_fraction", "max_pruned_usage_share", "min_kept_experts", "max_critical_fraction"});
    p.max_pruned_fraction = r.number(g, "guard_rails", "max_pruned_fraction", p.max_pruned_fraction, 0, 1);
    p.max_pruned_usage_share = r.number(g, "guard_rails", "max_pruned_usage_share", p.max_pruned_usage_share, 0, 1);
    p.min_kept_experts = r.integer(g, "guard_rails", "min_kept_experts", p.min_kept_experts, 0);
    p.max_critical_fraction = r.number(g, "guard_rails", "max_critical_fraction", p.max_critical_fraction, 0, 1);
  }
  return p;
} catch (const nlohmann::json::exception& e) {
  // A field of the wrong type (nlohmann type_error/out_of_range) is bad input,
  // reported like every other error: naming the file.
  invalid(label + ": " + e.what());
}

Policy default_policy() {
  // Kept identical to configs/default.json (tests/profile/policy_test.cpp checks).
  static const char* kDefault = R"json({
  "schema": "expertquant.policy",
  "version": 1,
  "name": "default",
  "description": "4.5 bits per expert weight (or the budget asked for) spent where the measured sensitivity lowers the output error most, over int8, nl4, fp4, int4 and trellis 2-4 bit formats and pruning; with --thresholds: few critical (int8), most standard (fp4), some deprioritized (trellis 2-bit) and pruned. Guard rails keep every layer able to route top_k.",
  "formats": {
    "critical": "int8_row",
    "standard": "fp4_g32",
    "deprioritized": "trellis2",
    "pruned": null
  },
  "shared_expert_format": null,
  "dense_mlp_format": null,
  "candidates": ["int8_row", "fp4_g32", "trellis2", "nl4_g32", "int4_g64", "trellis3", "int3_g64", "int2_g64", "trellis4"],
  "lossless_source_formats": true,
  "coverage": {
    "min_tokens": 32,
    "under_covered_class": "standard"
  },
  "sensitivity": {
    "max_samples": 128,
    "min_samples": 16,
    "seed": 1,
    "max_sample_bytes": 1073741824,
    "proxies": {"trellis2": "int2_g64", "trellis3": "int3_g64", "trellis4": "int4_g64"},
    "proxy_calibration_experts": 12,
    "sample_rows": 64
  },
  "default_target_bits": 4.5,
  "thresholds": {
    "critical": {"min_usage_ratio": 3.0, "min_reap_percentile": 95, "min_sensitivity": 0.02},
    "deprioritized": {"max_usage_ratio": 0.5, "max_reap_percentile": 40},
    "pruned": {"max_usage_ratio": 0.05, "max_reap_percentile": 10}
  },
  "guard_rails": {
    "max_pruned_fraction": 0.15,
    "max_pruned_usage_share": 0.002,
    "min_kept_experts": 0,
    "max_critical_fraction": 0.10
  }
}
)json";
  return parse_policy(json::parse(kDefault), "built-in default policy");
}

Policy load_policy(const std::string& path) {
  const std::string text = io::read_file_bytes(path, 1 << 24);
  io::check_json_depth(text, "policy " + path);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e400
    invalid("policy " + path + ": not valid JSON: " + e.what());
  }
  return parse_policy(j, "policy " + path);
}

ordered_json Policy::to_json() const {
  ordered_json j;
  j["schema"] = kPolicySchema;
  j["version"] = kPolicyVersion;
  j["name"] = name;
  j["description"] = description;
  j["formats"] = {{"critical", class_format[0]}, {"standard", class_format[1]},
                  {"deprioritized", class_format[2]}, {"pruned", nullptr}};
  j["shared_expert_format"] = shared_expert_format.empty() ? ordered_json(nullptr) : ordered_json(shared_expert_format);
  j["dense_mlp_format"] = dense_mlp_format.empty() ? ordered_json(nullptr) : ordered_json(dense_mlp_format);
  j["candidates"] = candidates;
  j["lossless_source_formats"] = lossless_source_formats;
  j["coverage"] = {{"min_tokens", min_tokens}, {"under_covered_class", pack::class_name(under_covered_class)}};
  ordered_json prox = ordered_json::object();
  for (const auto& [from, to] : proxies) prox[from] = to;
  j["sensitivity"] = {{"max_samples", max_samples}, {"min_samples", min_samples}, {"seed", seed},
                      {"max_sample_bytes", max_sample_bytes}, {"proxies", prox},
                      {"proxy_calibration_experts", proxy_calibration_experts}, {"sample_rows", sample_rows}};
  j["default_target_bits"] = default_target_bits > 0 ? ordered_json(default_target_bits) : ordered_json(nullptr);
  j["thresholds"] = {
      {"critical", {{"min_usage_ratio", critical_min_usage_ratio}, {"min_reap_percentile", critical_min_reap_percentile},
                    {"min_sensitivity", critical_min_sensitivity}}},
      {"deprioritized", {{"max_usage_ratio", deprioritized_max_usage_ratio},
                         {"max_reap_percentile", deprioritized_max_reap_percentile}}},
      {"pruned", {{"max_usage_ratio", pruned_max_usage_ratio}, {"max_reap_percentile", pruned_max_reap_percentile}}}};
  j["guard_rails"] = {{"max_pruned_fraction", max_pruned_fraction}, {"max_pruned_usage_share", max_pruned_usage_share},
                      {"min_kept_experts", min_kept_experts}, {"max_critical_fraction", max_critical_fraction}};
  return j;
}

}  // namespace eq::profile
