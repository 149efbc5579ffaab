// Reading profile.json (docs/profile.md) and its importance sidecar: the
// header, the model fingerprint, then the statistics, sensitivity and
// classification, each step checking what it reads and naming the field.
#include <algorithm>
#include <limits>

#include "core/error.h"
#include "io/json_guard.h"
#include "io/json_node.h"
#include "io/text_file.h"
#include "model/config.h"
#include "plan/allocation.h"
#include "plan/importance.h"
#include "plan/profile_inputs.h"
#include "profile/profile.h"

namespace eq::profile {

using nlohmann::json;

namespace {

double num_or_nan(const json& v) { return v.is_number() ? v.get<double>() : std::numeric_limits<double>::quiet_NaN(); }

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

std::vector<CalibrationSlice> read_calibration(const io::JsonNode& j) {
  std::vector<CalibrationSlice> slices;
  const io::JsonNode list = j.at("calibration").at("slices");
  for (size_t i = 0; i < list.size(); ++i) {
    const io::JsonNode c = list.index(i);
    CalibrationSlice s;
    s.kind = c.str_or("kind", "");
    s.path = c.str_or("path", "");
    s.xxh64 = c.str_or("xxh64", "");
    // Absent from profiles written before slices: the whole file unknown, token 0 first.
    s.file_xxh64 = c.str_or("file_xxh64", "");
    s.doc_separator = c.str_or("doc_separator", "");
    s.first_token = c.integer_or("first_token", 0, 0);
    s.tokens = c.integer_or("tokens", 0, 0);
    s.windows = c.integer_or("windows", 0);
    s.ctx = c.integer_or("ctx", 0);
    s.seconds = c.number_or("seconds", 0.0);
    if (s.tokens > std::numeric_limits<int64_t>::max() - s.first_token)
      list.invalid("first_token and tokens must be non-negative, their sum an int64");
    slices.push_back(std::move(s));
  }
  return slices;
}

struct StatsDims {
  int64_t hidden = 0, intermediate = 0, num_experts = 0, top_k = 0;
};

// The dims the statistics are sized from, against the model config bounds.
StatsDims read_stats_dims(const io::JsonNode& m) {
  const auto dim = [&](const char* key, int64_t lo, int64_t hi) {
    const io::JsonNode n = m.at(key);
    const int64_t v = n.integer(lo);
    if (v > hi) n.fail(ErrorKind::kResource, std::to_string(v) + " exceeds the limit of " + std::to_string(hi));
    return v;
  };
  StatsDims d;
  d.hidden = dim("hidden_size", 1, model::kMaxConfigDim);
  d.intermediate = dim("moe_intermediate_size", 1, model::kMaxConfigDim);
  d.num_experts = dim("num_experts", 1, model::kMaxConfigExperts);
  d.top_k = dim("top_k", 1, model::kMaxConfigExperts);
  if (d.top_k > d.num_experts)
    m.invalid_member("top_k", std::to_string(d.top_k) + " is more than num_experts " + std::to_string(d.num_experts));
  return d;
}

// The layer ids, after checking that `layers` holds one JSON entry per expert
// in every layer: the per-expert tables are no larger than the file can hold.
std::vector<int64_t> read_layer_ids(const io::JsonNode& layers, int64_t num_experts) {
  if (int64_t(layers.size()) > model::kMaxConfigLayers)
    layers.fail(ErrorKind::kResource, std::to_string(layers.size()) + " entries exceed the limit of " +
                                          std::to_string(model::kMaxConfigLayers));
  std::vector<int64_t> layer_ids;
  for (size_t li = 0; li < layers.size(); ++li) {
    layer_ids.push_back(layers.index(li).at("layer").integer());
    const io::JsonNode experts = layers.index(li).at("experts");
    if (!experts.value().is_array() || int64_t(experts.size()) != num_experts)
      experts.invalid(std::to_string(experts.value().size()) + " entries, expected " + std::to_string(num_experts));
  }
  return layer_ids;
}

void read_sensitivity_formats(const json& j, SensitivityTable& t) {
  t.formats = j.at("sensitivity_formats").get<std::vector<std::string>>();
  t.proxy_of.assign(t.formats.size(), "");
  if (j.contains("sensitivity_proxies"))
    for (size_t f = 0; f < t.formats.size(); ++f) t.proxy_of[f] = j["sensitivity_proxies"].value(t.formats[f], "");
}

void read_expert_stats(const io::JsonNode& x, ExpertStats& es) {
  es.tokens = x.at("tokens").integer();
  es.gate_sum = x.number_or("gate_sum", 0.0);
  es.gate_max = x.number_or("max_gate", 0.0);
  es.prob_sum = x.number_or("prob_sum", 0.0);
  es.saliency_sum = x.number_or("saliency_sum", 0.0);
  es.out_norm_sum = x.number_or("out_norm_sum", 0.0);
  es.gated_out_energy = x.number_or("gated_out_energy", 0.0);
}

ExpertSensitivity read_expert_sensitivity(const io::JsonNode& x, const std::vector<std::string>& formats) {
  const io::JsonNode s = x.at("sensitivity");
  const json& sj = s.value();
  ExpertSensitivity se;
  se.source = parse_sample_source(s.str_or("source", "none"));
  se.samples = s.integer_or("samples", 0);
  for (const auto& f : formats)
    se.rel_mse.push_back(sj.contains("rel_mse") && sj["rel_mse"].contains(f) ? num_or_nan(sj["rel_mse"][f])
                                                                           : std::numeric_limits<double>::quiet_NaN());
  return se;
}

// One entry of "layers": its statistics and, with sensitivity, its row of the table.
void read_layer(const io::JsonNode& l, bool has_sens, LayerStats& ls, SensitivityTable& sens) {
  ls.tokens = l.at("tokens").integer();
  ls.routed_output_energy = l.number_or("routed_output_energy", 0.0);
  const io::JsonNode experts = l.at("experts");  // an array of num_experts entries (read_layer_ids)
  std::vector<ExpertSensitivity> srow;
  for (size_t e = 0; e < experts.size(); ++e) {
    read_expert_stats(experts.index(e), ls.experts[e]);
    if (has_sens) srow.push_back(read_expert_sensitivity(experts.index(e), sens.formats));
  }
  if (has_sens) sens.layers.push_back(std::move(srow));
}

// Reconstructed from the classes, formats and rules of the experts.
Classification read_classification(const io::JsonNode& c, const io::JsonNode& layers) {
  Classification cls;
  cls.mode = c.str_or("mode", "thresholds");
  cls.target_bits = c.number_or("target_bits", 0.0);
  const auto bytes = c.find("target_bytes");
  cls.target_bytes = bytes ? bytes->unsigned_integer() : 0;
  for (size_t li = 0; li < layers.size(); ++li) {
    std::vector<ExpertDecision> row;
    const io::JsonNode experts = layers.index(li).at("experts");
    for (size_t e = 0; e < experts.size(); ++e) {
      const io::JsonNode x = experts.index(e);
      ExpertDecision d;
      const auto k = plan::parse_class(x.str_or("class", "standard"));
      if (!k) x.invalid_member("class", "unknown class");
      d.cls = *k;
      d.format = x.value().contains("format") && x.value()["format"].is_string() ? x.value()["format"].get<std::string>() : "";
      d.rule = x.str_or("rule", "");
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
  for (size_t li = 0; li < p.stats.layers.size(); ++li) {
    LayerStats& ls = p.stats.layers[li];
    for (size_t e = 0; e < ls.experts.size(); ++e) {
      // Absent for an expert never routed: no energies.
      ls.experts[e].energy_in = file->load_sums(ls.layer, int64_t(e), plan::ImportanceSide::kIn);
      ls.experts[e].energy_mid = file->load_sums(ls.layer, int64_t(e), plan::ImportanceSide::kMid);
      // The writer leaves never-routed experts out: energies for one are another run's.
      if (ls.experts[e].tokens == 0 && !(ls.experts[e].energy_in.empty() && ls.experts[e].energy_mid.empty()))
        invalid("profile " + path + ": importance file " + record->path + " holds energies of expert " +
                std::to_string(e) + " of layer " + std::to_string(ls.layer) + ", which field 'layers[" +
                std::to_string(li) + "].experts[" + std::to_string(e) +
                "].tokens' says was never routed (a sidecar of another profile)");
    }
  }
}

}  // namespace

Profile read_profile(const std::string& path) { return read_profile_text(io::read_file_bytes(path, 1ull << 32), path); }

Profile read_profile_text(std::string_view text, const std::string& path) try {
  const std::string label = "profile " + path;
  const json j = parse_profile_json(text, label);
  plan::check_profile_header(j, label);
  const io::JsonNode root(j, label);
  Profile p;
  const io::JsonNode m = root.at("model");
  p.model = plan::parse_fingerprint(j, label);
  p.calibration = read_calibration(root);
  p.policy = parse_policy(root.at("policy").value(), label + " (policy)");
  // Absent from profiles written before quantized sources had lossless formats.
  if (j.contains("lossless_source_formats")) {
    const json& l = j["lossless_source_formats"];
    if (!l.is_array() || !std::all_of(l.begin(), l.end(), [](const json& x) { return x.is_string(); }))
      invalid(label + ": field 'lossless_source_formats': not an array of format names");
    p.lossless_formats = l.get<std::vector<std::string>>();
  }
  const io::JsonNode meas = root.at("measured");
  const bool has_sens = meas.bool_or("sensitivity", false);
  // Everything the statistics are sized from is checked first (dims, then one
  // entry per expert in every layer).
  const StatsDims d = read_stats_dims(m);
  const io::JsonNode layers = root.at("layers");
  const std::vector<int64_t> layer_ids = read_layer_ids(layers, d.num_experts);
  // Counts and classes against each other and the allocation (a re-sealed
  // edit is refused naming the field), and the profile's own slices disjoint.
  plan::check_profile_values(j, plan::parse_allocation(root.at("allocation").value(), label + " (allocation)"), label);
  {
    std::vector<std::string> slice_labels;
    for (size_t i = 0; i < p.calibration.size(); ++i)
      slice_labels.push_back(label + " field 'calibration.slices[" + std::to_string(i) + "]'");
    if (const std::string o = overlapping_slices(p.calibration, slice_labels); !o.empty())
      invalid(o + ": one profile counts each token once");
  }
  // Energies are not sized here: only the experts the sidecar holds get them
  // (read_importance_sidecar), from tensors whose bytes the sidecar actually contains.
  p.stats = RoutingStats::make(layer_ids, d.hidden, d.intermediate, d.num_experts, d.top_k,
                               meas.bool_or("router_probabilities", false), false);
  p.stats.has_outputs = meas.bool_or("expert_outputs", false);
  if (has_sens) read_sensitivity_formats(j, p.sensitivity);
  for (size_t li = 0; li < layers.size(); ++li)
    read_layer(layers.index(li), has_sens, p.stats.layers[li], p.sensitivity);
  // Absent from profiles written before proxies were calibrated: their proxied formats copied the proxy.
  if (has_sens && j.contains("sensitivity_proxy_fits"))
    p.sensitivity.proxy_fits = parse_proxy_fits(j["sensitivity_proxy_fits"], label, p.sensitivity.formats,
                                                p.sensitivity.proxy_of, layer_ids, d.num_experts);
  p.classification = read_classification(root.at("classification"), layers);
  summarize(p.classification, p.stats, p.sensitivity, p.policy, p.dims());
  plan::check_profile_checksum(j, label);
  read_importance_sidecar(j, path, p);
  return p;
} catch (const nlohmann::json::exception& e) {
  // A field of the wrong type (nlohmann type_error/out_of_range) is bad input,
  // reported like every other error: naming the file.
  invalid("profile " + path + ": " + e.what());
}

}  // namespace eq::profile
