#include "profile/profile.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>

#include "core/error.h"
#include "core/hash.h"
#include "io/atomic_file.h"
#include "io/json_guard.h"
#include "io/safetensors.h"
#include "io/text_file.h"
#include "model/config.h"
#include "pack/importance.h"
#include "profile/bit_budget.h"

namespace eq::profile {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

double num_or_nan(const json& v) { return v.is_number() ? v.get<double>() : std::numeric_limits<double>::quiet_NaN(); }

const json& need(const json& j, const std::string& key, const std::string& label, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) invalid(label + ": field '" + where + key + "': missing");
  return j[key];
}

}  // namespace

model::ModelConfig Profile::dims() const {
  model::ModelConfig c;
  c.hidden_size = stats.hidden;
  c.moe_intermediate_size = stats.intermediate;
  c.num_experts = stats.num_experts;
  c.top_k = stats.top_k;
  c.num_layers = model.num_layers;
  return c;
}

ModelFingerprint fingerprint_model(const std::string& model_path) {
  const std::unique_ptr<io::Checkpoint> ckpt = io::Checkpoint::open(model_path);
  ModelFingerprint f = fingerprint_metadata(*ckpt, model_path);
  io::add_full_hashes(*ckpt, f.tensors);
  return f;
}

std::string fingerprint_difference(const ModelFingerprint& a, const std::string& a_label, const ModelFingerprint& b,
                                   const std::string& b_label) {
  const std::string both = " differs between " + a_label + " and " + b_label;
  if (a.model_type != b.model_type)
    return "model_type" + both + " ('" + a.model_type + "' vs '" + b.model_type + "')";
  if (a.config_xxh64 != b.config_xxh64)
    return "config.json" + both + " (xxh64 " + a.config_xxh64 + " vs " + b.config_xxh64 + ")";
  if (a.tensor_index_xxh64 != b.tensor_index_xxh64)
    return "the tensor index (names, dtypes, shapes)" + both;
  if (const auto d = io::first_difference(a.tensors, b.tensors))
    return "tensor '" + d->tensor + "'" + both + " (" + d->a + " vs " + d->b + ")";
  return {};
}

ModelFingerprint fingerprint_metadata(const io::Checkpoint& ckpt_ref, const std::string& model_path) {
  ModelFingerprint f;
  f.path = model_path;
  const io::Checkpoint* ckpt = &ckpt_ref;
  const std::string config = io::read_file_bytes(ckpt->folder() + "/config.json", model::kMaxConfigBytes);
  f.config_xxh64 = hash_hex(xxhash64(config));
  Xxhash64 h;
  for (const auto& name : ckpt->tensor_names()) {
    const io::TensorInfo& t = ckpt->info(name);
    std::string line = name + " " + std::to_string(int(t.dtype));
    for (int64_t d : t.shape) line += " " + std::to_string(d);
    line += "\n";
    h.update(line.data(), line.size());
  }
  f.tensor_index_xxh64 = hash_hex(h.digest());
  const model::ModelConfig c = model::load_config(ckpt->folder());
  f.model_type = c.model_type;
  f.num_layers = c.num_layers;
  f.tensors = io::sample_tensor_hashes(*ckpt);
  return f;
}

ordered_json profile_to_json(const Profile& p) {
  const RoutingStats& s = p.stats;
  const auto metrics = expert_metrics(s, p.policy);
  ordered_json j;
  j["schema"] = kProfileSchema;
  j["version"] = kProfileVersion;
  j["tool"] = std::string("expertquant ") + EQ_VERSION;
  j["model"] = {{"path", p.model.path},
                {"model_type", p.model.model_type},
                {"config_xxh64", p.model.config_xxh64},
                {"tensor_index_xxh64", p.model.tensor_index_xxh64},
                {"num_layers", p.model.num_layers},
                {"tensors", io::tensor_hashes_to_json(p.model.tensors)},
                {"hidden_size", s.hidden},
                {"moe_intermediate_size", s.intermediate},
                {"num_experts", s.num_experts},
                {"top_k", s.top_k}};
  ordered_json cal = ordered_json::array();
  int64_t total_tokens = 0;
  for (const auto& c : p.calibration) {
    cal.push_back({{"kind", c.kind}, {"path", c.path}, {"xxh64", c.xxh64}, {"tokens", c.tokens},
                   {"windows", c.windows}, {"ctx", c.ctx}, {"seconds", c.seconds}});
    total_tokens += c.tokens;
  }
  j["calibration"] = {{"tokens", total_tokens}, {"slices", cal}};
  j["measured"] = {{"router_probabilities", s.has_probs}, {"expert_outputs", s.has_outputs},
                   {"sensitivity", !p.sensitivity.empty()}};
  ordered_json per_format;
  for (size_t f = 0; f < p.sensitivity.formats.size(); ++f)
    per_format[p.sensitivity.formats[f]] = p.sensitivity.seconds_per_format(f);
  j["timing"] = {{"pass_seconds", p.seconds_pass}, {"sensitivity_seconds", p.seconds_sensitivity},
                 {"sensitivity_seconds_per_format", per_format}};
  j["policy"] = p.policy.to_json();
  j["sensitivity_formats"] = p.sensitivity.formats;
  ordered_json proxies = ordered_json::object();
  for (size_t f = 0; f < p.sensitivity.proxy_of.size(); ++f)
    if (!p.sensitivity.proxy_of[f].empty()) proxies[p.sensitivity.formats[f]] = p.sensitivity.proxy_of[f];
  j["sensitivity_proxies"] = proxies;

  const Classification& cls = p.classification;
  ordered_json layers = ordered_json::array();
  std::vector<int64_t> total_counts(pack::kNumClasses, 0);
  for (size_t li = 0; li < s.layers.size(); ++li) {
    const LayerStats& ls = s.layers[li];
    ordered_json experts = ordered_json::array();
    std::vector<int64_t> under, never;
    std::vector<int64_t> counts(pack::kNumClasses, 0);
    for (size_t e = 0; e < ls.experts.size(); ++e) {
      const ExpertStats& es = ls.experts[e];
      const ExpertMetrics& m = metrics[li][e];
      if (es.tokens == 0) never.push_back(int64_t(e));
      if (m.under_covered) under.push_back(int64_t(e));
      ordered_json x;
      x["expert"] = e;
      x["tokens"] = es.tokens;
      x["share"] = m.share;
      x["usage_ratio"] = m.usage_ratio;
      x["gate_sum"] = es.gate_sum;
      x["mean_gate"] = es.mean_gate();
      x["max_gate"] = es.gate_max;
      if (s.has_probs) {
        x["prob_sum"] = es.prob_sum;
        x["mean_router_prob"] = ls.tokens ? es.prob_sum / double(ls.tokens) : 0.0;
      }
      if (s.has_outputs) {
        x["saliency_sum"] = es.saliency_sum;
        x["reap"] = es.reap();
        x["out_norm_sum"] = es.out_norm_sum;
        x["mean_out_norm"] = es.mean_out_norm();
        x["gated_out_energy"] = es.gated_out_energy;
      }
      x["reap_percentile"] = m.reap_percentile;
      x["under_covered"] = m.under_covered;
      if (!p.sensitivity.empty()) {
        const ExpertSensitivity& se = p.sensitivity.layers[li][e];
        ordered_json r;
        for (size_t f = 0; f < p.sensitivity.formats.size(); ++f) r[p.sensitivity.formats[f]] = se.rel_mse[f];
        x["sensitivity"] = {{"source", sample_source_name(se.source)}, {"samples", se.samples}, {"rel_mse", r}};
      }
      if (li < cls.layers.size()) {
        const ExpertDecision& d = cls.layers[li][e];
        x["class"] = pack::class_name(d.cls);
        x["format"] = d.format.empty() ? json(nullptr) : json(d.format);
        x["rule"] = d.rule;
        ++counts[int(d.cls)];
        ++total_counts[int(d.cls)];
      }
      experts.push_back(std::move(x));
    }
    ordered_json l;
    l["layer"] = ls.layer;
    l["tokens"] = ls.tokens;
    l["routed_slots"] = ls.routed_slots(s.top_k);
    l["routed_output_energy"] = ls.routed_output_energy;
    l["coverage"] = {{"never_routed", never}, {"under_covered", under},
                     {"covered_experts", int64_t(ls.experts.size() - under.size())}};
    l["class_counts"] = {{"critical", counts[0]}, {"standard", counts[1]}, {"deprioritized", counts[2]},
                         {"pruned", counts[3]}};
    l["experts"] = std::move(experts);
    layers.push_back(std::move(l));
  }
  j["layers"] = std::move(layers);
  ordered_json c;
  c["mode"] = cls.mode;
  if (cls.mode == "budget") {
    c["target_bits"] = cls.target_bits;
    c["target_bytes"] = cls.target_bytes;
  }
  c["achieved_bits"] = cls.avg_bits;
  c["expert_bytes"] = cls.expert_bytes;
  c["expert_weights"] = cls.expert_weights;
  c["predicted_error"] = std::isnan(cls.predicted_error) ? json(nullptr) : json(cls.predicted_error);
  c["class_counts"] = {{"critical", total_counts[0]}, {"standard", total_counts[1]},
                       {"deprioritized", total_counts[2]}, {"pruned", total_counts[3]}};
  j["classification"] = c;
  j["allocation"] = pack::allocation_to_json(to_allocation(cls, s));
  j["importance_file"] = p.importance_file.empty() ? json(nullptr) : json(p.importance_file);
  j["importance_xxh64"] = p.importance_file.empty() ? json(nullptr) : json(p.importance_xxh64);
  return j;
}

void write_profile(Profile& p, const std::string& path, const std::vector<io::FileText>& also) {
  p.importance_file.clear();
  p.importance_xxh64.clear();
  std::vector<io::StagedFile> staged;
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  if (p.stats.has_outputs) {
    p.importance_file = sidecar_name(path);
    const std::string side = (std::filesystem::path(path).parent_path() / p.importance_file).string();
    std::vector<io::TensorToWrite> tensors;
    for (const auto& ls : p.stats.layers)
      for (size_t e = 0; e < ls.experts.size(); ++e) {
        const ExpertStats& es = ls.experts[e];
        // Never routed (or read from a profile without its energies): absent, pack quantizes it unweighted.
        if (es.tokens == 0 || es.energy_in.empty() || es.energy_mid.empty()) continue;
        auto add = [&](pack::ImportanceSide side_kind, const std::vector<double>& v) {
          tensors.push_back({pack::ImportanceFile::tensor_name(ls.layer, int64_t(e), side_kind), DType::kF64,
                             {int64_t(v.size())},
                             {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(double)}});
        };
        add(pack::ImportanceSide::kIn, es.energy_in);
        add(pack::ImportanceSide::kMid, es.energy_mid);
      }
    // Staged under a temporary name and renamed only together with
    // profile.json: a failed write never pairs a previous profile.json with a
    // new sidecar (or leaves either half-written).
    io::write_safetensors(side + ".partial", tensors, {{"producer", "expertquant profile"}});
    staged.push_back({side + ".partial", side});
    // Recorded in profile.json: a kill between the final renames can leave
    // this sidecar beside a previous profile.json (or the reverse); readers
    // compare the hash and refuse the pair.
    try {
      p.importance_xxh64 = hash_hex(pack::importance_file_xxh64(side + ".partial"));
    } catch (...) {
      std::remove((side + ".partial").c_str());
      throw;
    }
  }
  std::vector<io::FileText> files{{path, profile_to_json(p).dump(1) + "\n"}};
  files.insert(files.end(), also.begin(), also.end());
  io::write_files_atomic(files, staged);
}

std::string sidecar_name(const std::string& profile_path) {
  std::filesystem::path p(profile_path);
  std::string stem = p.filename().string();
  if (stem.size() > 5 && stem.compare(stem.size() - 5, 5, ".json") == 0) stem.resize(stem.size() - 5);
  return stem + ".importance.safetensors";
}

std::string sidecar_path(const std::string& profile_path) {
  return (std::filesystem::path(profile_path).parent_path() / sidecar_name(profile_path)).string();
}

void check_profile_header(const json& j, const std::string& label) {
  const auto schema = j.is_object() ? j.find("schema") : j.end();
  if (!j.is_object() || schema == j.end() || !schema->is_string() || *schema != kProfileSchema)
    invalid(label + ": field 'schema': expected \"" + std::string(kProfileSchema) + "\"");
  const auto v = j.find("version");
  if (v == j.end() || !v->is_number_integer())
    invalid(label + ": field 'version': missing or not an integer");
  if (v->get<int64_t>() == 1)
    invalid(label + ": field 'version': 1 predates the per-tensor model hashes (version " +
            std::to_string(kProfileVersion) + "); re-run `expertquant profile` with this expertquant");
  if (v->get<int64_t>() != kProfileVersion)
    invalid(label + ": field 'version': unsupported " + std::to_string(v->get<int64_t>()) +
            " (this reader understands version " + std::to_string(kProfileVersion) + ")");
}

ModelFingerprint parse_profile_model(const json& j, const std::string& label) {
  const json& m = need(j, "model", label, "");
  auto str = [&](const char* key) {
    const json& v = need(m, key, label, "model.");
    if (!v.is_string()) invalid(label + ": field 'model." + key + "': not a string");
    return v.get<std::string>();
  };
  ModelFingerprint f;
  if (m.contains("path") && m["path"].is_string()) f.path = m["path"].get<std::string>();
  f.model_type = str("model_type");
  f.config_xxh64 = str("config_xxh64");
  f.tensor_index_xxh64 = str("tensor_index_xxh64");
  const json& nl = need(m, "num_layers", label, "model.");
  if (!nl.is_number_integer()) invalid(label + ": field 'model.num_layers': not an integer");
  f.num_layers = nl.get<int64_t>();
  f.tensors = io::parse_tensor_hashes(need(m, "tensors", label, "model."), label, "model.tensors");
  return f;
}

Profile read_profile(const std::string& path) { return read_profile_text(io::read_file_bytes(path, 1ull << 32), path); }

Profile read_profile_text(std::string_view text, const std::string& path) try {
  const std::string label = "profile " + path;
  io::check_json_depth(text, label);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e400
    invalid(label + ": not valid JSON: " + e.what());
  }
  check_profile_header(j, label);
  Profile p;
  const json& m = need(j, "model", label, "");
  p.model = parse_profile_model(j, label);
  for (const auto& c : need(need(j, "calibration", label, ""), "slices", label, "calibration."))
    p.calibration.push_back({c.value("kind", ""), c.value("path", ""), c.value("xxh64", ""), c.value("tokens", int64_t(0)),
                             c.value("windows", int64_t(0)), c.value("ctx", int64_t(0)), c.value("seconds", 0.0)});
  p.policy = parse_policy(need(j, "policy", label, ""), label + " (policy)");
  const json& meas = need(j, "measured", label, "");
  const bool has_sens = meas.value("sensitivity", false);
  // Everything the statistics are sized from is checked first: the dims
  // against the model config bounds, and one JSON entry per expert in every
  // layer, so the per-expert tables are no larger than the file can hold.
  const auto dim = [&](const std::string& key, int64_t lo, int64_t hi) {
    const json& v = need(m, key, label, "model.");
    if (!v.is_number_integer() || v.get<int64_t>() < lo)
      invalid(label + ": field 'model." + key + "': expected an integer >= " + std::to_string(lo));
    if (v.get<int64_t>() > hi)
      fail(ErrorKind::kResource, label + ": field 'model." + key + "': " + std::to_string(v.get<int64_t>()) +
                                     " exceeds the limit of " + std::to_string(hi));
    return v.get<int64_t>();
  };
  const int64_t hidden = dim("hidden_size", 1, model::kMaxConfigDim);
  const int64_t intermediate = dim("moe_intermediate_size", 1, model::kMaxConfigDim);
  const int64_t num_experts = dim("num_experts", 1, model::kMaxConfigExperts);
  const int64_t top_k = dim("top_k", 1, model::kMaxConfigExperts);
  if (top_k > num_experts)
    invalid(label + ": field 'model.top_k': " + std::to_string(top_k) + " is more than num_experts " +
            std::to_string(num_experts));
  const json& layers = need(j, "layers", label, "");
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
  // Energies are not sized here: only the experts the sidecar holds get them
  // (below), from tensors whose bytes the sidecar actually contains.
  p.stats = RoutingStats::make(layer_ids, hidden, intermediate, num_experts, top_k,
                               meas.value("router_probabilities", false), false);
  p.stats.has_outputs = meas.value("expert_outputs", false);
  if (has_sens) {
    p.sensitivity.formats = j.at("sensitivity_formats").get<std::vector<std::string>>();
    p.sensitivity.proxy_of.assign(p.sensitivity.formats.size(), "");
    if (j.contains("sensitivity_proxies"))
      for (size_t f = 0; f < p.sensitivity.formats.size(); ++f)
        p.sensitivity.proxy_of[f] = j["sensitivity_proxies"].value(p.sensitivity.formats[f], "");
  }
  for (size_t li = 0; li < layers.size(); ++li) {
    const json& l = layers[li];
    const std::string where = "layers[" + std::to_string(li) + "].";
    LayerStats& ls = p.stats.layers[li];
    ls.tokens = need(l, "tokens", label, where).get<int64_t>();
    ls.routed_output_energy = l.value("routed_output_energy", 0.0);
    const json& experts = l["experts"];  // an array of num_experts entries (checked above)
    std::vector<ExpertSensitivity> srow;
    for (size_t e = 0; e < experts.size(); ++e) {
      const json& x = experts[e];
      ExpertStats& es = ls.experts[e];
      es.tokens = need(x, "tokens", label, where + "experts[" + std::to_string(e) + "].").get<int64_t>();
      es.gate_sum = x.value("gate_sum", 0.0);
      es.gate_max = x.value("max_gate", 0.0);
      es.prob_sum = x.value("prob_sum", 0.0);
      es.saliency_sum = x.value("saliency_sum", 0.0);
      es.out_norm_sum = x.value("out_norm_sum", 0.0);
      es.gated_out_energy = x.value("gated_out_energy", 0.0);
      if (has_sens) {
        const json& sj = need(x, "sensitivity", label, where + "experts[" + std::to_string(e) + "].");
        ExpertSensitivity se;
        se.source = parse_sample_source(sj.value("source", "none"));
        se.samples = sj.value("samples", int64_t(0));
        for (const auto& f : p.sensitivity.formats)
          se.rel_mse.push_back(sj.contains("rel_mse") && sj["rel_mse"].contains(f) ? num_or_nan(sj["rel_mse"][f])
                                                                                 : std::numeric_limits<double>::quiet_NaN());
        srow.push_back(std::move(se));
      }
    }
    if (has_sens) p.sensitivity.layers.push_back(std::move(srow));
  }
  // Classification: reconstructed from the allocation + rules.
  const json& c = need(j, "classification", label, "");
  p.classification.mode = c.value("mode", "thresholds");
  p.classification.target_bits = c.value("target_bits", 0.0);
  p.classification.target_bytes = c.value("target_bytes", uint64_t(0));
  for (size_t li = 0; li < layers.size(); ++li) {
    std::vector<ExpertDecision> row;
    for (const auto& x : layers[li]["experts"]) {
      ExpertDecision d;
      const auto cls = pack::parse_class(x.value("class", "standard"));
      if (!cls) invalid(label + ": field 'layers[" + std::to_string(li) + "].experts[].class': unknown class");
      d.cls = *cls;
      d.format = x.contains("format") && x["format"].is_string() ? x["format"].get<std::string>() : "";
      d.rule = x.value("rule", "");
      row.push_back(std::move(d));
    }
    p.classification.layers.push_back(std::move(row));
  }
  summarize(p.classification, p.stats, p.sensitivity, p.policy, p.dims());

  if (j.contains("importance_file") && j["importance_file"].is_string() && p.stats.has_outputs) {
    p.importance_file = j["importance_file"];
    const std::string side = (std::filesystem::path(path).parent_path() / p.importance_file).string();
    // Profiles written before the hash was recorded have no importance_xxh64: their pairing is unchecked.
    if (j.contains("importance_xxh64") && !j["importance_xxh64"].is_null()) {
      if (!j["importance_xxh64"].is_string()) invalid(label + ": field 'importance_xxh64': not a string");
      p.importance_xxh64 = j["importance_xxh64"];
      pack::check_importance_pairing(path, side, p.importance_xxh64);
    }
    const auto file = io::SafetensorsFile::open(side);
    for (auto& ls : p.stats.layers)
      for (size_t e = 0; e < ls.experts.size(); ++e) {
        for (auto kind : {pack::ImportanceSide::kIn, pack::ImportanceSide::kMid}) {
          const io::TensorInfo* t = file->find(pack::ImportanceFile::tensor_name(ls.layer, int64_t(e), kind));
          if (!t) continue;  // never routed: no energies
          const int64_t want = kind == pack::ImportanceSide::kIn ? p.stats.hidden : p.stats.intermediate;
          if (t->dtype != DType::kF64 || t->nbytes() != uint64_t(want) * sizeof(double))
            invalid("importance file " + side + ": tensor " + t->name + ": expected F64 [" + std::to_string(want) + "]");
          // Sized from a tensor the sidecar holds (its bytes are in the file).
          std::vector<double>& dst = kind == pack::ImportanceSide::kIn ? ls.experts[e].energy_in : ls.experts[e].energy_mid;
          dst.resize(size_t(want));
          std::memcpy(dst.data(), file->view(*t).data, t->nbytes());
        }
      }
  }
  return p;
} catch (const nlohmann::json::exception& e) {
  // A field of the wrong type (nlohmann type_error/out_of_range) is bad input,
  // reported like every other error: naming the file.
  invalid("profile " + path + ": " + e.what());
}

Profile merge_profiles(const std::vector<Profile>& parts, const std::vector<std::string>& labels) {
  if (parts.empty()) invalid("merge: no profiles given");
  Profile out = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) {
    const Profile& b = parts[i];
    if (const std::string d = fingerprint_difference(out.model, labels[0], b.model, labels[i]); !d.empty())
      invalid(labels[i] + ": field 'model': profiled a different checkpoint than " + labels[0] + ": " + d);
    out.stats.merge(b.stats, labels[i]);
    for (const auto& c : b.calibration) out.calibration.push_back(c);
    out.seconds_pass += b.seconds_pass;
    out.seconds_sensitivity += b.seconds_sensitivity;
    if (out.sensitivity.empty() || b.sensitivity.empty() || out.sensitivity.formats != b.sensitivity.formats) {
      out.sensitivity = SensitivityTable{};
      continue;
    }
    for (size_t li = 0; li < out.sensitivity.layers.size(); ++li)
      for (size_t e = 0; e < out.sensitivity.layers[li].size(); ++e) {
        ExpertSensitivity& a = out.sensitivity.layers[li][e];
        const ExpertSensitivity& o = b.sensitivity.layers[li][e];
        // Routed samples outrank forced ones; equal kinds average by sample count.
        if (o.source == SampleSource::kNone || (a.source == SampleSource::kRouted && o.source == SampleSource::kForced))
          continue;
        if (a.source == SampleSource::kNone || (o.source == SampleSource::kRouted && a.source == SampleSource::kForced)) {
          a = o;
          continue;
        }
        const double wa = double(a.samples), wb = double(o.samples);
        for (size_t f = 0; f < a.rel_mse.size(); ++f) a.rel_mse[f] = (a.rel_mse[f] * wa + o.rel_mse[f] * wb) / (wa + wb);
        a.samples += o.samples;
      }
  }
  return out;
}

void reclassify(Profile& p, double target_bits, uint64_t target_bytes) {
  const model::ModelConfig c = p.dims();
  if (target_bits > 0 || target_bytes > 0)
    p.classification = allocate_bit_budget(p.stats, p.sensitivity, p.policy, c, BitBudget{target_bits, target_bytes});
  else
    p.classification = classify_by_thresholds(p.stats, p.sensitivity, p.policy);
  summarize(p.classification, p.stats, p.sensitivity, p.policy, c);
}

}  // namespace eq::profile
