#include "profile/profile.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "core/error.h"
#include "core/hash.h"
#include "core/thread_pool.h"
#include "io/atomic_file.h"
#include "model/config.h"
#include "plan/importance.h"
#include "plan/profile_inputs.h"
#include "profile/bit_budget.h"
#include "profile/candidate_fit.h"

namespace eq::profile {

using nlohmann::json;
using nlohmann::ordered_json;

model::ModelConfig Profile::dims() const {
  model::ModelConfig c;
  c.hidden_size = stats.hidden;
  c.moe_intermediate_size = stats.intermediate;
  c.num_experts = stats.num_experts;
  c.top_k = stats.top_k;
  c.num_layers = model.num_layers;
  return c;
}

ordered_json profile_to_json(const Profile& p) {
  const RoutingStats& s = p.stats;
  const auto metrics = expert_metrics(s, p.policy);
  ordered_json j;
  j["schema"] = plan::kProfileSchema;
  j["version"] = plan::kProfileVersion;
  j["checksum"] = "";  // set last (seal_profile), kept here near the top
  j["tool"] = std::string("expertquant ") + EQ_VERSION;
  j["model"] = plan::fingerprint_to_json(p.model);
  j["model"]["hidden_size"] = s.hidden;
  j["model"]["moe_intermediate_size"] = s.intermediate;
  j["model"]["num_experts"] = s.num_experts;
  j["model"]["top_k"] = s.top_k;
  ordered_json cal = ordered_json::array();
  int64_t total_tokens = 0;
  for (const auto& c : p.calibration) {
    cal.push_back({{"kind", c.kind}, {"path", c.path}, {"xxh64", c.xxh64}, {"file_xxh64", c.file_xxh64},
                   {"doc_separator", c.doc_separator}, {"first_token", c.first_token}, {"tokens", c.tokens},
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
  j["lossless_source_formats"] = p.lossless_formats;
  j["policy"] = p.policy.to_json();
  j["sensitivity_formats"] = p.sensitivity.formats;
  ordered_json proxies = ordered_json::object();
  for (size_t f = 0; f < p.sensitivity.proxy_of.size(); ++f)
    if (!p.sensitivity.proxy_of[f].empty()) proxies[p.sensitivity.formats[f]] = p.sensitivity.proxy_of[f];
  j["sensitivity_proxies"] = proxies;
  j["sensitivity_proxy_fits"] = proxy_fits_to_json(p.sensitivity.proxy_fits);

  const Classification& cls = p.classification;
  ordered_json layers = ordered_json::array();
  std::vector<int64_t> total_counts(plan::kNumClasses, 0);
  for (size_t li = 0; li < s.layers.size(); ++li) {
    const LayerStats& ls = s.layers[li];
    ordered_json experts = ordered_json::array();
    std::vector<int64_t> under, never;
    std::vector<int64_t> counts(plan::kNumClasses, 0);
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
        x["class"] = plan::class_name(d.cls);
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
    if (cls.max_pack_seconds > 0) c["max_pack_seconds"] = cls.max_pack_seconds;
  }
  c["achieved_bits"] = cls.avg_bits;
  c["expert_bytes"] = cls.expert_bytes;
  c["expert_weights"] = cls.expert_weights;
  c["predicted_error"] = std::isnan(cls.predicted_error) ? json(nullptr) : json(cls.predicted_error);
  c["class_counts"] = {{"critical", total_counts[0]}, {"standard", total_counts[1]},
                       {"deprioritized", total_counts[2]}, {"pruned", total_counts[3]}};
  j["classification"] = c;
  j["allocation"] = plan::allocation_to_json(to_allocation(cls, s));
  plan::write_importance_record(j, p.importance_file, p.importance_xxh64);
  plan::seal_profile(j);
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
    std::vector<plan::ExpertImportance> experts;
    for (const auto& ls : p.stats.layers)
      for (size_t e = 0; e < ls.experts.size(); ++e) {
        const ExpertStats& es = ls.experts[e];
        // Never routed (or read from a profile without its energies): absent, pack quantizes it unweighted.
        if (es.tokens == 0 || es.energy_in.empty() || es.energy_mid.empty()) continue;
        experts.push_back({ls.layer, int64_t(e), &es.energy_in, &es.energy_mid});
      }
    // Staged under a temporary name and renamed only together with
    // profile.json: a failed write never pairs a previous profile.json with a
    // new sidecar (or leaves either half-written). The hash is recorded in
    // profile.json: a kill between the final renames can leave this sidecar
    // beside a previous profile.json (or the reverse); readers compare the
    // hash and refuse the pair.
    p.importance_xxh64 = hash_hex(plan::write_importance_file(side + ".partial", experts));
    staged.push_back({side + ".partial", side});
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

std::string overlapping_slices(const std::vector<CalibrationSlice>& slices, const std::vector<std::string>& labels) {
  for (size_t i = 0; i < slices.size(); ++i)
    for (size_t k = i + 1; k < slices.size(); ++k) {
      const CalibrationSlice &a = slices[i], &b = slices[k];
      // The same source: the whole file's hash when both have it; else (profiles
      // written before slices, which always started at token 0) the same path
      // or the same bytes read.
      const bool same_file = !a.file_xxh64.empty() && !b.file_xxh64.empty()
                                 ? a.file_xxh64 == b.file_xxh64
                                 : a.path == b.path || (!a.xxh64.empty() && a.xxh64 == b.xxh64);
      if (!same_file || a.kind != b.kind) continue;
      const std::string what = labels[i] + " and " + labels[k];
      // Other document boundaries give another token stream: no telling which tokens are shared.
      if (a.doc_separator != b.doc_separator)
        return what + " both read " + a.path + ", split into documents differently (--doc-separator)";
      const int64_t lo = std::max(a.first_token, b.first_token);
      const int64_t hi = std::min(a.first_token + a.tokens, b.first_token + b.tokens);
      if (lo < hi)
        return what + " both hold tokens [" + std::to_string(lo) + ", " + std::to_string(hi) + ") of " + a.path;
    }
  return "";
}

Profile merge_profiles(const std::vector<Profile>& parts, const std::vector<std::string>& labels) {
  if (parts.empty()) invalid("merge: no profiles given");
  for (size_t i = 1; i < parts.size(); ++i)
    if (const std::string d = plan::fingerprint_difference(parts[0].model, labels[0], parts[i].model, labels[i]); !d.empty())
      invalid(labels[i] + ": field 'model': profiled a different checkpoint than " + labels[0] + ": " + d);
  std::vector<CalibrationSlice> slices;
  std::vector<std::string> slice_labels;
  for (size_t i = 0; i < parts.size(); ++i)
    for (const CalibrationSlice& c : parts[i].calibration) {
      slices.push_back(c);
      slice_labels.push_back(labels[i]);
    }
  if (const std::string o = overlapping_slices(slices, slice_labels); !o.empty())
    invalid("merge: " + o + ": a merge adds statistics, so the same tokens would count twice (cut disjoint "
            "slices with profile --slice I/N or --skip-tokens)");
  // The sensitivity table is averaged over the parts: one without it (or with
  // other formats) would silently leave the merge without one.
  for (size_t i = 1; i < parts.size(); ++i) {
    const SensitivityTable &a = parts[0].sensitivity, &b = parts[i].sensitivity;
    if (a.empty() != b.empty())
      invalid("merge: " + labels[a.empty() ? i : 0] + " has a sensitivity table, " + labels[a.empty() ? 0 : i] +
              " has none: profile every part with sensitivity (or every part with --no-sensitivity)");
    if (!a.empty() && a.formats != b.formats)
      invalid("merge: " + labels[0] + " and " + labels[i] +
              " measured sensitivity for different formats (field 'sensitivity_formats'): profile every part with "
              "the same policy");
  }
  Profile out = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) {
    const Profile& b = parts[i];
    out.stats.merge(b.stats, labels[i]);
    for (const auto& c : b.calibration) out.calibration.push_back(c);
    out.seconds_pass += b.seconds_pass;
    out.seconds_sensitivity += b.seconds_sensitivity;
    if (out.sensitivity.empty()) continue;  // none in any part (checked above)
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
    out.sensitivity.proxy_fits = merge_proxy_fits(out.sensitivity.proxy_fits, b.sensitivity.proxy_fits);
  }
  return out;
}

void reclassify(Profile& p, double target_bits, uint64_t target_bytes, bool thresholds, double max_pack_seconds,
                quant::Device device) {
  const model::ModelConfig c = p.dims();
  const double default_bits = p.policy.default_target_bits;
  if (p.pack_rates.empty())
    p.pack_rates = measure_pack_rates(fit_policy(p.policy, c.hidden_size, c.moe_intermediate_size).policy.candidates,
                                      c, device, int(default_pool().size()));
  if (target_bits > 0 || target_bytes > 0) {
    p.classification = allocate_bit_budget(p.stats, p.sensitivity, p.policy, c,
                                           BitBudget{target_bits, target_bytes, false, max_pack_seconds, &p.pack_rates});
  } else if (!thresholds && default_bits > 0 && !p.sensitivity.empty()) {
    p.classification = allocate_bit_budget(p.stats, p.sensitivity, p.policy, c,
                                           BitBudget{default_bits, 0, true, max_pack_seconds, &p.pack_rates});
    char note[200];
    std::snprintf(note, sizeof note,
                  "budget: the policy's default of %.3g bits per expert weight (--target-bits or --target-size set "
                  "another, --thresholds classifies by thresholds)",
                  default_bits);
    p.classification.budget_notes.insert(p.classification.budget_notes.begin(), note);
  } else {
    if (max_pack_seconds > 0) invalid("--max-pack-hours needs a bit budget (a profile with sensitivity, without --thresholds)");
    p.classification = classify_by_thresholds(p.stats, p.sensitivity, p.policy);
    if (!thresholds && default_bits > 0)
      p.classification.budget_notes.push_back(
          "thresholds: the policy's default budget needs a sensitivity table, which this profile has not");
  }
  summarize(p.classification, p.stats, p.sensitivity, p.policy, c);
  p.classification.max_pack_seconds = max_pack_seconds;
  p.classification.predicted_pack_seconds = predicted_pack_seconds(p.classification, c, p.pack_rates);
}

}  // namespace eq::profile
