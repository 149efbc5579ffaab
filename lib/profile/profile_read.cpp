// Reading profile.json (docs/profile.md) and its importance sidecar: the
// header, the model fingerprint, then the statistics, sensitivity and
// classification, each step checking what it reads and naming the field.
#include <algorithm>
#include <limits>

#include "core/error.h"
#include "io/json_guard.h"
#include "io/text_file.h"
#include "model/config.h"
#include "plan/importance.h"
#include "plan/profile_inputs.h"
#include "profile/profile.h"

namespace eq::profile {

using nlohmann::json;

namespace {

double num_or_nan(const json& v) { return v.is_number() ? v.get<double>() : std::numeric_limits<double>::quiet_NaN(); }

const json& need(const json& j, const std::string& key, const std::string& label, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) invalid(label + ": field '" + where + key + "': missing");
  return j[key];
}

json parse_profile_json(std::string_view text, const std::string& label) {
  io::check_json_depth(text, label);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e400
    invalid(label + ": not valid JSON: " + e.what());
  }
  return j;
}

std::vector<CalibrationSlice> read_calibration(const json& j, const std::string& label) {
  std::vector<CalibrationSlice> slices;
  for (const auto& c : need(need(j, "calibration", label, ""), "slices", label, "calibration.")) {
    CalibrationSlice s;
    s.kind = c.value("kind", "");
    s.path = c.value("path", "");
    s.xxh64 = c.value("xxh64", "");
    // Absent from profiles written before slices: the whole file unknown, token 0 first.
    s.file_xxh64 = c.value("file_xxh64", "");
    s.doc_separator = c.value("doc_separator", "");
    s.first_token = c.value("first_token", int64_t(0));
    s.tokens = c.value("tokens", int64_t(0));
    s.windows = c.value("windows", int64_t(0));
    s.ctx = c.value("ctx", int64_t(0));
    s.seconds = c.value("seconds", 0.0);
    if (s.first_token < 0 || s.tokens < 0 || s.tokens > std::numeric_limits<int64_t>::max() - s.first_token)
      invalid(label + ": field 'calibration.slices': first_token and tokens must be non-negative, their sum an int64");
    slices.push_back(std::move(s));
  }
  return slices;
}

struct StatsDims {
  int64_t hidden = 0, intermediate = 0, num_experts = 0, top_k = 0;
};

// The dims the statistics are sized from, against the model config bounds.
StatsDims read_stats_dims(const json& m, const std::string& label) {
  const auto dim = [&](const std::string& key, int64_t lo, int64_t hi) {
    const json& v = need(m, key, label, "model.");
    if (!v.is_number_integer() || v.get<int64_t>() < lo)
      invalid(label + ": field 'model." + key + "': expected an integer >= " + std::to_string(lo));
    if (v.get<int64_t>() > hi)
      fail(ErrorKind::kResource, label + ": field 'model." + key + "': " + std::to_string(v.get<int64_t>()) +
                                     " exceeds the limit of " + std::to_string(hi));
    return v.get<int64_t>();
  };
  StatsDims d;
  d.hidden = dim("hidden_size", 1, model::kMaxConfigDim);
  d.intermediate = dim("moe_intermediate_size", 1, model::kMaxConfigDim);
  d.num_experts = dim("num_experts", 1, model::kMaxConfigExperts);
  d.top_k = dim("top_k", 1, model::kMaxConfigExperts);
  if (d.top_k > d.num_experts)
    invalid(label + ": field 'model.top_k': " + std::to_string(d.top_k) + " is more than num_experts " +
            std::to_string(d.num_experts));
  return d;
}

// The layer ids, after checking that `layers` holds one JSON entry per expert
// in every layer: the per-expert tables are no larger than the file can hold.
std::vector<int64_t> read_layer_ids(const json& layers, const std::string& label, int64_t num_experts) {
  if (!layers.is_array()) invalid(label + ": field 'layers': not an array");
  if (int64_t(layers.size()) > model::kMaxConfigLayers)
    fail(ErrorKind::kResource, label + ": field 'layers': " + std::to_string(layers.size()) +
                                   " entries exceed the limit of " + std::to_string(model::kMaxConfigLayers));
  std::vector<int64_t> layer_ids;
  for (size_t li = 0; li < layers.size(); ++li) {
    const std::string where = "layers[" + std::to_string(li) + "].";
    layer_ids.push_back(need(layers[li], "layer", label, where).get<int64_t>());
    const json& experts = need(layers[li], "experts", label, where);
    if (!experts.is_array() || int64_t(experts.size()) != num_experts)
      invalid(label + ": field '" + where + "experts': " + std::to_string(experts.size()) + " entries, expected " +
              std::to_string(num_experts));
  }
  return layer_ids;
}

void read_sensitivity_formats(const json& j, SensitivityTable& t) {
  t.formats = j.at("sensitivity_formats").get<std::vector<std::string>>();
  t.proxy_of.assign(t.formats.size(), "");
  if (j.contains("sensitivity_proxies"))
    for (size_t f = 0; f < t.formats.size(); ++f) t.proxy_of[f] = j["sensitivity_proxies"].value(t.formats[f], "");
}

void read_expert_stats(const json& x, const std::string& label, const std::string& where, ExpertStats& es) {
  es.tokens = need(x, "tokens", label, where).get<int64_t>();
  es.gate_sum = x.value("gate_sum", 0.0);
  es.gate_max = x.value("max_gate", 0.0);
  es.prob_sum = x.value("prob_sum", 0.0);
  es.saliency_sum = x.value("saliency_sum", 0.0);
  es.out_norm_sum = x.value("out_norm_sum", 0.0);
  es.gated_out_energy = x.value("gated_out_energy", 0.0);
}

ExpertSensitivity read_expert_sensitivity(const json& x, const std::string& label, const std::string& where,
                                          const std::vector<std::string>& formats) {
  const json& sj = need(x, "sensitivity", label, where);
  ExpertSensitivity se;
  se.source = parse_sample_source(sj.value("source", "none"));
  se.samples = sj.value("samples", int64_t(0));
  for (const auto& f : formats)
    se.rel_mse.push_back(sj.contains("rel_mse") && sj["rel_mse"].contains(f) ? num_or_nan(sj["rel_mse"][f])
                                                                           : std::numeric_limits<double>::quiet_NaN());
  return se;
}

// One entry of "layers": its statistics and, with sensitivity, its row of the table.
void read_layer(const json& l, size_t li, const std::string& label, bool has_sens, LayerStats& ls,
                SensitivityTable& sens) {
  const std::string where = "layers[" + std::to_string(li) + "].";
  ls.tokens = need(l, "tokens", label, where).get<int64_t>();
  ls.routed_output_energy = l.value("routed_output_energy", 0.0);
  const json& experts = l["experts"];  // an array of num_experts entries (read_layer_ids)
  std::vector<ExpertSensitivity> srow;
  for (size_t e = 0; e < experts.size(); ++e) {
    const std::string expert_where = where + "experts[" + std::to_string(e) + "].";
    read_expert_stats(experts[e], label, expert_where, ls.experts[e]);
    if (has_sens) srow.push_back(read_expert_sensitivity(experts[e], label, expert_where, sens.formats));
  }
  if (has_sens) sens.layers.push_back(std::move(srow));
}

// Reconstructed from the classes, formats and rules of the experts.
Classification read_classification(const json& c, const json& layers, const std::string& label) {
  Classification cls;
  cls.mode = c.value("mode", "thresholds");
  cls.target_bits = c.value("target_bits", 0.0);
  cls.target_bytes = c.value("target_bytes", uint64_t(0));
  for (size_t li = 0; li < layers.size(); ++li) {
    std::vector<ExpertDecision> row;
    for (const auto& x : layers[li]["experts"]) {
      ExpertDecision d;
      const auto k = plan::parse_class(x.value("class", "standard"));
      if (!k) invalid(label + ": field 'layers[" + std::to_string(li) + "].experts[].class': unknown class");
      d.cls = *k;
      d.format = x.contains("format") && x["format"].is_string() ? x["format"].get<std::string>() : "";
      d.rule = x.value("rule", "");
      row.push_back(std::move(d));
    }
    cls.layers.push_back(std::move(row));
  }
  return cls;
}

// The energies of the experts the sidecar holds, after checking that it is the
// sidecar this profile.json was written with.
void read_importance_sidecar(const json& j, const std::string& path, Profile& p) {
  const auto record = plan::read_importance_record(j, path);
  if (!record || !p.stats.has_outputs) return;
  p.importance_file = record->file;
  p.importance_xxh64 = record->xxh64;
  const auto file = plan::ImportanceFile::open(record->path, p.stats.hidden, p.stats.intermediate);
  for (auto& ls : p.stats.layers)
    for (size_t e = 0; e < ls.experts.size(); ++e) {
      // Absent for an expert never routed: no energies.
      ls.experts[e].energy_in = file->load_sums(ls.layer, int64_t(e), plan::ImportanceSide::kIn);
      ls.experts[e].energy_mid = file->load_sums(ls.layer, int64_t(e), plan::ImportanceSide::kMid);
    }
}

}  // namespace

Profile read_profile(const std::string& path) { return read_profile_text(io::read_file_bytes(path, 1ull << 32), path); }

Profile read_profile_text(std::string_view text, const std::string& path) try {
  const std::string label = "profile " + path;
  const json j = parse_profile_json(text, label);
  plan::check_profile_header(j, label);
  Profile p;
  const json& m = need(j, "model", label, "");
  p.model = plan::parse_fingerprint(j, label);
  p.calibration = read_calibration(j, label);
  p.policy = parse_policy(need(j, "policy", label, ""), label + " (policy)");
  // Absent from profiles written before quantized sources had lossless formats.
  if (j.contains("lossless_source_formats")) {
    const json& l = j["lossless_source_formats"];
    if (!l.is_array() || !std::all_of(l.begin(), l.end(), [](const json& x) { return x.is_string(); }))
      invalid(label + ": field 'lossless_source_formats': not an array of format names");
    p.lossless_formats = l.get<std::vector<std::string>>();
  }
  const json& meas = need(j, "measured", label, "");
  const bool has_sens = meas.value("sensitivity", false);
  // Everything the statistics are sized from is checked first (dims, then one
  // entry per expert in every layer).
  const StatsDims d = read_stats_dims(m, label);
  const json& layers = need(j, "layers", label, "");
  const std::vector<int64_t> layer_ids = read_layer_ids(layers, label, d.num_experts);
  // Energies are not sized here: only the experts the sidecar holds get them
  // (read_importance_sidecar), from tensors whose bytes the sidecar actually contains.
  p.stats = RoutingStats::make(layer_ids, d.hidden, d.intermediate, d.num_experts, d.top_k,
                               meas.value("router_probabilities", false), false);
  p.stats.has_outputs = meas.value("expert_outputs", false);
  if (has_sens) read_sensitivity_formats(j, p.sensitivity);
  for (size_t li = 0; li < layers.size(); ++li)
    read_layer(layers[li], li, label, has_sens, p.stats.layers[li], p.sensitivity);
  // Absent from profiles written before proxies were calibrated: their proxied formats copied the proxy.
  if (has_sens && j.contains("sensitivity_proxy_fits"))
    p.sensitivity.proxy_fits = parse_proxy_fits(j["sensitivity_proxy_fits"], label, p.sensitivity.formats,
                                                p.sensitivity.proxy_of, layer_ids, d.num_experts);
  p.classification = read_classification(need(j, "classification", label, ""), layers, label);
  summarize(p.classification, p.stats, p.sensitivity, p.policy, p.dims());
  read_importance_sidecar(j, path, p);
  return p;
} catch (const nlohmann::json::exception& e) {
  // A field of the wrong type (nlohmann type_error/out_of_range) is bad input,
  // reported like every other error: naming the file.
  invalid("profile " + path + ": " + e.what());
}

}  // namespace eq::profile
