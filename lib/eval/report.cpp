#include "eval/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

namespace eq::eval {
namespace {

using ojson = nlohmann::ordered_json;

// Token ids as text for the report: bytes printable as themselves, others as
// \xNN (JSON strings must be valid UTF-8).
ojson tokens_json(const std::vector<int32_t>& t, bool byte_level) {
  if (!byte_level) return ojson(t);
  std::string s;
  for (int32_t b : t) {
    if ((b >= 32 && b < 127) || b == '\n' || b == '\t') {
      s += static_cast<char>(b);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(b) & 0xffu);
      s += buf;
    }
  }
  return s;
}

ojson timing_json(const exec::TimingStats& t) {
  if (t.reps == 0) return nullptr;
  return {{"median", t.median * 1e3}, {"p90", t.p90 * 1e3}, {"min", t.min * 1e3}, {"reps", t.reps}};
}

ojson text_json(const TextQuality& q, bool byte_level, bool compared) {
  ojson j;
  j["label"] = q.label;
  j["scored_tokens"] = q.scored_tokens;
  j["unit"] = byte_level ? "bits_per_byte" : "bits_per_token";
  if (!compared) {  // the packed model alone: nothing to compare with
    j["bits_reference"] = nullptr;
    j["bits_packed"] = q.bits_packed;
    for (const char* k : {"bits_delta_percent", "kl_mean", "kl_p99", "kl_max", "top1_agreement"}) j[k] = nullptr;
    return j;
  }
  j["bits_reference"] = q.bits_reference;
  j["bits_packed"] = q.bits_packed;
  j["bits_delta_percent"] = q.bits_reference > 0 ? 100.0 * (q.bits_packed / q.bits_reference - 1.0) : 0.0;
  j["kl_mean"] = q.kl_mean;
  j["kl_p99"] = q.kl_p99;
  j["kl_max"] = q.kl_max;
  j["top1_agreement"] = q.top1_agreement;
  return j;
}

ojson pack_json(const PackSummary& p) {
  ojson j;
  j["folder"] = p.folder;
  j["policy"] = p.policy;
  j["avg_bits_per_expert_weight"] = p.avg_bits_per_expert_weight;
  j["expert_bytes_before"] = p.expert_bytes_before;
  j["expert_bytes_after"] = p.expert_bytes_after;
  ojson cc;
  for (int c = 0; c < plan::kNumClasses; ++c)
    cc[std::string(plan::class_name(static_cast<plan::ExpertClass>(c)))] = p.class_counts[static_cast<size_t>(c)];
  j["class_counts"] = cc;
  j["formats"] = p.formats;
  j["layers"] = p.layers;
  j["groups_per_layer"] = p.groups_per_layer;
  ojson names = ojson::array();
  for (int c = 0; c < plan::kNumClasses; ++c) names.push_back(plan::class_name(static_cast<plan::ExpertClass>(c)));
  j["class_names"] = names;
  j["classes"] = p.classes;
  return j;
}

const StrategyLatency* find_strategy(const LatencyResult& l, const std::string& name) {
  for (const auto& s : l.strategies)
    if (s.dispatch == name) return &s;
  return nullptr;
}

ojson latency_json(const LatencyResult& l) {
  ojson j;
  j["folder"] = l.folder;
  j["layers"] = l.layers;
  j["groups_per_layer"] = l.groups_per_layer;
  j["seconds"] = l.seconds;
  ojson strategies = ojson::array();
  for (const StrategyLatency& s : l.strategies) {
    ojson sj;
    sj["dispatch"] = s.dispatch;
    sj["sort_cutoff"] = s.sort_cutoff >= 0 ? ojson(s.sort_cutoff) : ojson(nullptr);
    sj["decode_tokens_per_second"] = s.decode_tokens_per_second;
    sj["decode_step_ms"] = timing_json(s.decode_step);
    sj["prefill_tokens"] = s.prefill_tokens;
    sj["prefill_tokens_per_second"] = s.prefill_tokens_per_second;
    sj["prefill_ms"] = timing_json(s.prefill);
    ojson pts = ojson::array();
    for (const LatencyPoint& p : s.points) {
      ojson pj;
      pj["m"] = p.m;
      pj["branch"] = s.dispatch == "mask-combine" ? "mask-combine" : (p.sorted_branch ? "sorted" : "per-token");
      pj["moe_step_ms"] = timing_json(p.moe_step);
      ojson layers = ojson::array();
      for (const auto& t : p.per_layer) layers.push_back(timing_json(t));
      pj["per_layer_ms"] = layers;
      pj["model_step_ms"] = timing_json(p.model_step);
      pj["bytes_weights"] = p.bytes.weights;
      pj["bytes_activations"] = p.bytes.activations;
      pts.push_back(pj);
    }
    sj["points"] = pts;
    strategies.push_back(sj);
  }
  j["strategies"] = strategies;
  // mask-combine ÷ sorted and auto ÷ sorted per M (median times).
  const StrategyLatency* sorted = find_strategy(l, "sorted");
  ojson ratios = ojson::object();
  for (const char* name : {"mask-combine", "auto"}) {
    const StrategyLatency* s = find_strategy(l, name);
    if (!s || !sorted) continue;
    ojson arr = ojson::array();
    for (size_t i = 0; i < s->points.size() && i < sorted->points.size(); ++i) {
      const LatencyPoint &a = s->points[i], &b = sorted->points[i];
      ojson r;
      r["m"] = a.m;
      r["moe_step"] = b.moe_step.median > 0 ? a.moe_step.median / b.moe_step.median : 0.0;
      r["model_step"] = b.model_step.median > 0 ? ojson(a.model_step.median / b.model_step.median) : ojson(nullptr);
      arr.push_back(r);
    }
    ratios[std::string(name) == "auto" ? "auto_over_sorted" : "mask_combine_over_sorted"] = arr;
  }
  j["ratios"] = ratios;
  return j;
}

}  // namespace

PackSummary summarize_pack(const pack::Manifest& m, const std::string& folder) {
  PackSummary p;
  p.folder = folder;
  p.policy = m.policy.kind == "uniform" ? "uniform " + m.policy.uniform_format : m.policy.kind;
  p.avg_bits_per_expert_weight = m.totals.avg_bits_per_expert_weight();
  p.expert_bytes_before = m.totals.expert_bytes_before;
  p.expert_bytes_after = m.totals.expert_bytes_after;
  p.class_counts = m.totals.class_counts;
  std::set<std::string> formats;
  for (const pack::ManifestLayer& l : m.layers) {
    if (!l.moe) continue;
    p.layers.push_back(l.layer);
    p.groups_per_layer.push_back(static_cast<int64_t>(l.groups.size()));
    std::vector<int> row;
    for (const pack::ManifestExpert& e : l.experts) {
      row.push_back(static_cast<int>(e.cls));
      if (!e.format.empty()) formats.insert(e.format);
    }
    p.classes.push_back(std::move(row));
  }
  p.formats.assign(formats.begin(), formats.end());
  return p;
}

nlohmann::ordered_json report_to_json(const EvalReport& r) {
  ojson j;
  j["schema"] = kReportSchema;
  j["version"] = kReportVersion;
  j["tool_version"] = r.tool_version;
  j["machine"] = {{"cpu", r.machine.cpu},
                  {"isa", r.machine.isa},
                  {"threads", r.machine.threads},
                  {"peak_rss_bytes", r.machine.peak_rss_bytes},
                  {"experts_device", r.machine.experts_device}};
  if (r.machine.experts_device == "cuda")
    j["machine"]["gpu"] = {{"name", r.machine.gpu},
                           {"layer_uploads", r.machine.gpu_layer_uploads},
                           {"layer_evictions", r.machine.gpu_layer_evictions},
                           {"streamed", r.machine.gpu_layer_evictions > 0},
                           {"dense_bytes", r.machine.gpu_dense_bytes},
                           {"dense_cpu_bytes", r.machine.gpu_dense_cpu_bytes},
                           {"quality_x_split", r.machine.gpu_quality_x_split}};
  ojson phases = ojson::array();
  for (const PhaseUsage& p : r.phases)
    phases.push_back({{"name", p.name},
                      {"seconds", p.seconds},
                      {"cpu_seconds", p.cpu_seconds},
                      {"read_bytes", p.read_bytes},
                      {"peak_rss_bytes", p.peak_rss_bytes},
                      {"peak_is_phase_own", p.peak_is_phase_own},
                      {"rss_anon_bytes", p.rss_anon_bytes},
                      {"rss_file_bytes", p.rss_file_bytes}});
  j["phases"] = phases;
  j["model"] = r.model_path.empty() ? ojson(nullptr) : ojson(r.model_path);
  if (r.comparison_skipped.empty())
    j["comparison"] = {{"status", "done"}, {"reference", r.model_path}};
  else
    j["comparison"] = {{"status", "skipped"},
                       {"reference", nullptr},
                       {"reason", r.comparison_skipped},
                       {"skipped", {"bits_reference", "kl", "top1_agreement", "layers", "collapse"}}};
  j["packed"] = pack_json(r.packed);
  j["baseline"] = r.baseline ? pack_json(*r.baseline) : ojson(nullptr);
  if (r.quality) {
    const QualityResult& q = *r.quality;
    ojson qj;
    qj["ctx"] = r.ctx;
    qj["texts"] = r.texts;
    qj["seconds"] = q.seconds;
    qj["compared"] = q.compared;
    qj["overall"] = text_json(q.overall, r.byte_level, q.compared);
    ojson per = ojson::array();
    for (const auto& t : q.texts) per.push_back(text_json(t, r.byte_level, q.compared));
    qj["per_text"] = per;
    ojson layers = ojson::array();
    for (const LayerError& e : q.layers)
      layers.push_back({{"layer", e.layer},
                        {"tokens", e.tokens},
                        {"rel_l2", e.rel_l2},
                        {"cosine_mean", e.cosine_mean},
                        {"cosine_min", e.cosine_min}});
    qj["layers"] = layers;
    j["quality"] = qj;
  } else {
    j["quality"] = nullptr;
  }
  {
    ojson cj;
    cj["thresholds"] = {{"loop_coverage", r.collapse_thresholds.loop_coverage},
                        {"loop_margin", r.collapse_thresholds.loop_margin},
                        {"drift_jsd", r.collapse_thresholds.drift_jsd}};
    int64_t passed = 0;
    ojson checks = ojson::array();
    for (const CollapseCheck& c : r.collapse) {
      passed += c.passed();
      checks.push_back({{"domain", c.domain},
                        {"offset", c.offset},
                        {"verdict", c.verdict()},
                        {"loop_reference", c.loop_reference},
                        {"loop_packed", c.loop_packed},
                        {"drift_jsd", c.drift_jsd},
                        {"prompt", tokens_json(c.prompt, r.byte_level)},
                        {"reference", tokens_json(c.reference, r.byte_level)},
                        {"packed", tokens_json(c.packed, r.byte_level)}});
    }
    cj["passed"] = passed;
    cj["total"] = r.collapse.size();
    cj["checks"] = checks;
    j["collapse"] = cj;
  }
  j["latency"] = r.latency ? latency_json(*r.latency) : ojson(nullptr);
  j["baseline_latency"] = r.baseline_latency ? latency_json(*r.baseline_latency) : ojson(nullptr);
  // Mixed ÷ uniform baseline, per strategy and M (both measured in this run).
  if (r.latency && r.baseline_latency) {
    ojson arr = ojson::array();
    for (const StrategyLatency& s : r.latency->strategies) {
      const StrategyLatency* b = find_strategy(*r.baseline_latency, s.dispatch);
      if (!b) continue;
      for (size_t i = 0; i < s.points.size() && i < b->points.size(); ++i) {
        const LatencyPoint &p = s.points[i], &q = b->points[i];
        arr.push_back({{"dispatch", s.dispatch},
                       {"m", p.m},
                       {"moe_step", q.moe_step.median > 0 ? p.moe_step.median / q.moe_step.median : 0.0},
                       {"model_step", q.model_step.median > 0 ? ojson(p.model_step.median / q.model_step.median)
                                                              : ojson(nullptr)}});
      }
    }
    j["packed_over_baseline"] = arr;
  } else {
    j["packed_over_baseline"] = nullptr;
  }
  j["seconds"] = r.seconds;
  return j;
}

std::string quality_line(const EvalReport& r) {
  std::string s;
  char buf[512];
  const char* unit = r.byte_level ? "bpb" : "bits/token";
  if (r.quality && !r.quality->compared) {
    std::snprintf(buf, sizeof buf, "%s %.4f (packed model alone; no --model: no reference, KL, top-1)", unit,
                  r.quality->overall.bits_packed);
    s += buf;
  } else if (r.quality) {
    const TextQuality& q = r.quality->overall;
    std::snprintf(buf, sizeof buf, "%s %.4f -> %.4f (%+.2f%%), KL mean %.4f p99 %.4f, top-1 %.1f%%", unit,
                  q.bits_reference, q.bits_packed,
                  q.bits_reference > 0 ? 100.0 * (q.bits_packed / q.bits_reference - 1.0) : 0.0, q.kl_mean, q.kl_p99,
                  100.0 * q.top1_agreement);
    s += buf;
  }
  if (!r.collapse.empty()) {
    int64_t passed = 0;
    for (const auto& c : r.collapse) passed += c.passed();
    std::snprintf(buf, sizeof buf, "%scollapse %lld/%zu pass", s.empty() ? "" : ", ", static_cast<long long>(passed),
                  r.collapse.size());
    s += buf;
  }
  return s;
}

}  // namespace eq::eval
