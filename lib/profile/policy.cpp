#include "profile/policy.h"

#include <algorithm>
#include <set>

#include "core/error.h"
#include "io/json_guard.h"
#include "io/json_node.h"
#include "io/text_file.h"
#include "quant/format.h"

namespace eq::profile {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

// A format name the registry knows.
std::string format_name(const io::JsonNode& v) {
  if (!v.value().is_string()) v.invalid("must be a format name (string)");
  const std::string name = v.value().get<std::string>();
  if (!quant::find_format(name)) {
    std::string known;
    for (const auto& f : quant::all_formats()) known += (known.empty() ? "" : ", ") + std::string(f.name);
    v.invalid("unknown format \"" + name + "\" (known: " + known + ")");
  }
  return name;
}

// An optional member: absent (or null) keeps `def`.
double number_or(const io::JsonNode& o, const char* key, double def, double lo, double hi) {
  const auto v = o.find(key);
  return v ? v->number(lo, hi) : def;
}

}  // namespace

Policy parse_policy(const json& j, const std::string& label) try {
  const io::JsonNode root(j, label);
  root.allow_only({"schema", "version", "name", "description", "formats", "shared_expert_format", "dense_mlp_format",
                   "candidates", "lossless_source_formats", "coverage", "sensitivity", "thresholds", "guard_rails",
                   "default_target_bits"});
  Policy p;
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int>() != kPolicyVersion)
    root.invalid_member("version", "missing or unsupported (this reader understands version 1)");
  if (j.contains("schema") && j["schema"] != kPolicySchema)
    root.invalid_member("schema", "expected \"" + std::string(kPolicySchema) + "\"");
  p.name = root.str_or("name", p.name);
  p.description = root.str_or("description", p.description);

  if (!j.contains("formats")) root.invalid_member("formats", "missing (the format of critical, standard and deprioritized)");
  const io::JsonNode f = root.member("formats");
  f.allow_only({"critical", "standard", "deprioritized", "pruned"});
  const char* kept[3] = {"critical", "standard", "deprioritized"};
  for (int c = 0; c < 3; ++c) p.class_format[c] = format_name(f.member(kept[c]));
  if (f.has("pruned")) f.invalid_member("pruned", "must be null (pruned experts are removed)");
  for (auto [key, dst] : {std::pair{"shared_expert_format", &p.shared_expert_format},
                          std::pair{"dense_mlp_format", &p.dense_mlp_format}})
    if (const auto v = root.find(key)) *dst = format_name(*v);

  std::set<std::string> seen;
  for (const auto& name : p.class_format)
    if (seen.insert(name).second) p.candidates.push_back(name);
  if (const auto candidates = root.find("candidates")) {
    if (!candidates->value().is_array()) candidates->invalid("must be an array of format names");
    for (size_t i = 0; i < candidates->size(); ++i) {
      const std::string name = format_name(candidates->index(i));
      if (seen.insert(name).second) p.candidates.push_back(name);
    }
  }

  p.lossless_source_formats = root.bool_or("lossless_source_formats", p.lossless_source_formats);

  if (const auto c = root.find("coverage")) {
    c->allow_only({"min_tokens", "under_covered_class"});
    p.min_tokens = c->integer_or("min_tokens", p.min_tokens, 0);
    if (const auto under = c->find("under_covered_class")) {
      const auto cls = under->value().is_string() ? plan::parse_class(under->value().get<std::string>()) : std::nullopt;
      if (!cls || *cls == plan::ExpertClass::kPruned)
        under->invalid("must be critical, standard or deprioritized (never pruned)");
      p.under_covered_class = *cls;
    }
  }
  if (const auto s = root.find("sensitivity")) {
    s->allow_only({"max_samples", "min_samples", "seed", "max_sample_bytes", "proxies", "proxy_calibration_experts",
                   "sample_rows"});
    p.max_samples = s->integer_or("max_samples", p.max_samples, 0);
    p.min_samples = s->integer_or("min_samples", p.min_samples, 1);
    p.seed = uint64_t(s->integer_or("seed", int64_t(p.seed), 0));
    p.max_sample_bytes = uint64_t(s->integer_or("max_sample_bytes", int64_t(p.max_sample_bytes), 1));
    p.proxy_calibration_experts = s->integer_or("proxy_calibration_experts", p.proxy_calibration_experts, 0);
    p.sample_rows = s->integer_or("sample_rows", p.sample_rows, 0);
    if (const auto proxies = s->find("proxies")) {
      if (!proxies->value().is_object()) proxies->invalid("must be an object {format: measured format}");
      for (auto it = proxies->value().begin(); it != proxies->value().end(); ++it) {
        const io::JsonNode entry = proxies->member(it.key());
        const json key(it.key());
        const std::string from = format_name(io::JsonNode(key, label, entry.path()));
        const std::string to = format_name(entry);
        if (std::find(p.candidates.begin(), p.candidates.end(), from) == p.candidates.end())
          entry.invalid("is not a candidate format");
        if (std::find(p.candidates.begin(), p.candidates.end(), to) == p.candidates.end())
          entry.invalid("proxy " + to + " must itself be a candidate format");
        if (proxies->value().contains(to)) entry.invalid("proxy " + to + " is itself proxied");
        p.proxies.emplace_back(from, to);
      }
    }
  }
  if (const auto t = root.find("thresholds")) {
    t->allow_only({"critical", "deprioritized", "pruned"});
    const double inf = 1e300;
    if (const auto c = t->find("critical")) {
      c->allow_only({"min_usage_ratio", "min_reap_percentile", "min_sensitivity"});
      p.critical_min_usage_ratio = number_or(*c, "min_usage_ratio", p.critical_min_usage_ratio, 0, inf);
      p.critical_min_reap_percentile = number_or(*c, "min_reap_percentile", p.critical_min_reap_percentile, 0, 100);
      p.critical_min_sensitivity = number_or(*c, "min_sensitivity", p.critical_min_sensitivity, 0, inf);
    }
    if (const auto d = t->find("deprioritized")) {
      d->allow_only({"max_usage_ratio", "max_reap_percentile"});
      p.deprioritized_max_usage_ratio = number_or(*d, "max_usage_ratio", p.deprioritized_max_usage_ratio, 0, inf);
      p.deprioritized_max_reap_percentile =
          number_or(*d, "max_reap_percentile", p.deprioritized_max_reap_percentile, 0, 100);
    }
    if (const auto d = t->find("pruned")) {
      d->allow_only({"max_usage_ratio", "max_reap_percentile"});
      p.pruned_max_usage_ratio = number_or(*d, "max_usage_ratio", p.pruned_max_usage_ratio, 0, inf);
      p.pruned_max_reap_percentile = number_or(*d, "max_reap_percentile", p.pruned_max_reap_percentile, 0, 100);
    }
    if (p.pruned_max_usage_ratio > p.deprioritized_max_usage_ratio)
      root.invalid_member("thresholds.pruned.max_usage_ratio", "must not exceed thresholds.deprioritized.max_usage_ratio");
  }
  if (const auto b = root.find("default_target_bits")) {
    if (!b->value().is_number() || !(b->value().get<double>() > 0) || b->value().get<double>() > 16)
      b->invalid("must be null (threshold classification) or a number of bits in (0, 16]");
    p.default_target_bits = b->value().get<double>();
  }
  if (const auto g = root.find("guard_rails")) {
    g->allow_only({"max_pruned_fraction", "max_pruned_usage_share", "min_kept_experts", "max_critical_fraction"});
    p.max_pruned_fraction = number_or(*g, "max_pruned_fraction", p.max_pruned_fraction, 0, 1);
    p.max_pruned_usage_share = number_or(*g, "max_pruned_usage_share", p.max_pruned_usage_share, 0, 1);
    p.min_kept_experts = g->integer_or("min_kept_experts", p.min_kept_experts, 0);
    p.max_critical_fraction = number_or(*g, "max_critical_fraction", p.max_critical_fraction, 0, 1);
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
  j["coverage"] = {{"min_tokens", min_tokens}, {"under_covered_class", plan::class_name(under_covered_class)}};
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
