// The terminal rendering of an EvalReport (fixed-width tables).
#include <algorithm>
#include <cstdio>

#include "core/printf_string.h"
#include "eval/report.h"

namespace eq::eval {
namespace {

std::string ms(const exec::TimingStats& t) {
  if (t.reps == 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", t.median * 1e3);
  return buf;
}

void pack_line(std::string& out, const char* what, const PackSummary& p) {
  std::string groups;
  for (int64_t g : p.groups_per_layer) groups += (groups.empty() ? "" : ",") + std::to_string(g);
  std::string formats;
  for (const auto& f : p.formats) formats += (formats.empty() ? "" : " ") + f;
  appendf(out, "%-9s %s  (%s; %.3f bits/expert weight; formats %s; groups/layer %s)\n", what, p.folder.c_str(),
      p.policy.c_str(), p.avg_bits_per_expert_weight, formats.c_str(), groups.c_str());
}

void latency_table(std::string& out, const LatencyResult& l, const char* title) {
  appendf(out, "\n%s  (ms, median; MoE step = all %zu MoE layers, one call each; model = forward of M tokens)\n", title,
      l.layers.size());
  appendf(out, "%6s", "M");
  for (const auto& s : l.strategies) appendf(out, " %13s", s.dispatch.c_str());
  const StrategyLatency* mc = nullptr;
  const StrategyLatency* so = nullptr;
  for (const auto& s : l.strategies) {
    if (s.dispatch == "mask-combine") mc = &s;
    if (s.dispatch == "sorted") so = &s;
  }
  if (mc && so) appendf(out, " %9s", "mc/sort");
  for (const auto& s : l.strategies) appendf(out, " %13s", ("model " + s.dispatch.substr(0, 6)).c_str());
  if (mc && so) appendf(out, " %9s", "mc/sort");
  out += "\n";
  const size_t n = l.strategies.empty() ? 0 : l.strategies[0].points.size();
  for (size_t i = 0; i < n; ++i) {
    appendf(out, "%6lld", static_cast<long long>(l.strategies[0].points[i].m));
    for (const auto& s : l.strategies) {
      std::string cell = ms(s.points[i].moe_step);
      if (s.dispatch == "auto") cell += s.points[i].sorted_branch ? " s" : " t";
      appendf(out, " %13s", cell.c_str());
    }
    if (mc && so) appendf(out, " %8.2fx", so->points[i].moe_step.median > 0 ? mc->points[i].moe_step.median / so->points[i].moe_step.median : 0.0);
    for (const auto& s : l.strategies) appendf(out, " %13s", ms(s.points[i].model_step).c_str());
    if (mc && so) {
      if (so->points[i].model_step.median > 0)
        appendf(out, " %8.2fx", mc->points[i].model_step.median / so->points[i].model_step.median);
      else
        appendf(out, " %9s", "-");
    }
    out += "\n";
  }
  out += "  (auto: s = sorted branch, t = per-token branch)\n";
  for (const auto& s : l.strategies)
    appendf(out, "  %-13s decode %8.1f tok/s (step %s ms)   prefill %8.1f tok/s (%lld tokens)\n", s.dispatch.c_str(),
        s.decode_tokens_per_second, ms(s.decode_step).c_str(), s.prefill_tokens_per_second,
        static_cast<long long>(s.prefill_tokens));
}

}  // namespace

std::string report_table(const EvalReport& r) {
  std::string out;
  pack_line(out, "packed", r.packed);
  if (r.baseline) pack_line(out, "baseline", *r.baseline);
  appendf(out, "machine   %s, %s, %d thread(s)\n", r.machine.cpu.c_str(), r.machine.isa.c_str(), r.machine.threads);
  if (r.machine.experts_device == "cuda")
    appendf(out, "experts   on the GPU (%s): %lld layer copies, %s\n", r.machine.gpu.c_str(),
            static_cast<long long>(r.machine.gpu_layer_uploads),
            r.machine.gpu_layer_evictions > 0
                ? ("streamed layer by layer (" + std::to_string(r.machine.gpu_layer_evictions) + " freed to make room)").c_str()
                : "all resident");
  if (r.machine.experts_device == "cuda") {
    appendf(out, "dense     on the GPU: %.1f MiB of float32 matrices (attention, dense MLPs, shared experts, logits)",
            static_cast<double>(r.machine.gpu_dense_bytes) / (1 << 20));
    if (r.machine.gpu_dense_cpu_bytes > 0)
      appendf(out, "; %.1f MiB on the CPU (no room left on the GPU)",
              static_cast<double>(r.machine.gpu_dense_cpu_bytes) / (1 << 20));
    out += "\n";
    appendf(out, "quality   the experts' prefill x on the GPU as %s\n",
            r.machine.gpu_quality_x_split ? "two bf16 parts (16 significant bits)" : "bf16 (8 significant bits)");
  }
  const char* unit = r.byte_level ? "bpb" : "bits/tok";
  if (!r.comparison_skipped.empty()) appendf(out, "compare   skipped: %s\n", r.comparison_skipped.c_str());
  if (r.quality && !r.quality->compared) {
    appendf(out, "\nquality   %s\n", quality_line(r).c_str());
    appendf(out, "%-12s %8s %9s\n", "text", "tokens", (std::string(unit) + " pk").c_str());
    for (const auto& t : r.quality->texts)
      appendf(out, "%-12s %8lld %9.4f\n", t.label.c_str(), static_cast<long long>(t.scored_tokens), t.bits_packed);
    if (r.quality->texts.size() > 1)
      appendf(out, "%-12s %8lld %9.4f\n", "all", static_cast<long long>(r.quality->overall.scored_tokens),
          r.quality->overall.bits_packed);
  } else if (r.quality) {
    const QualityResult& q = *r.quality;
    appendf(out, "\nquality   %s\n", quality_line(r).c_str());
    appendf(out, "%-12s %8s %9s %9s %8s %9s %9s %7s\n", "text", "tokens", (std::string(unit) + " ref").c_str(),
        (std::string(unit) + " pk").c_str(), "delta", "KL mean", "KL p99", "top-1");
    auto row = [&](const TextQuality& t) {
      appendf(out, "%-12s %8lld %9.4f %9.4f %+7.2f%% %9.5f %9.5f %6.1f%%\n", t.label.c_str(),
          static_cast<long long>(t.scored_tokens), t.bits_reference, t.bits_packed,
          t.bits_reference > 0 ? 100.0 * (t.bits_packed / t.bits_reference - 1.0) : 0.0, t.kl_mean, t.kl_p99,
          100.0 * t.top1_agreement);
    };
    for (const auto& t : q.texts) row(t);
    if (q.texts.size() > 1) row(q.overall);
    appendf(out, "\n%-6s %10s %12s %12s\n", "layer", "rel L2", "cosine mean", "cosine min");
    for (const LayerError& e : q.layers)
      appendf(out, "%-6lld %10.5f %12.6f %12.6f\n", static_cast<long long>(e.layer), e.rel_l2, e.cosine_mean,
          e.cosine_min);
  }
  if (!r.collapse.empty()) {
    appendf(out, "\ncollapse checks (loop: repeated n-gram coverage >= %.2f and >= ref + %.2f; drift: class JSD > %.2f)\n",
        r.collapse_thresholds.loop_coverage, r.collapse_thresholds.loop_margin, r.collapse_thresholds.drift_jsd);
    appendf(out, "%-12s %8s %10s %10s %8s %-10s\n", "domain", "offset", "loop ref", "loop pk", "JSD", "verdict");
    for (const CollapseCheck& c : r.collapse)
      appendf(out, "%-12s %8lld %10.2f %10.2f %8.3f %-10s\n", c.domain.c_str(), static_cast<long long>(c.offset),
          c.loop_reference, c.loop_packed, c.drift_jsd, c.verdict().c_str());
  }
  if (r.latency) latency_table(out, *r.latency, "latency, packed");
  if (r.baseline_latency) {
    latency_table(out, *r.baseline_latency, "latency, baseline");
    appendf(out, "\npacked / baseline (MoE step, median)\n%6s", "M");
    for (const auto& s : r.latency->strategies) appendf(out, " %13s", s.dispatch.c_str());
    out += "\n";
    const auto& a = r.latency->strategies;
    const auto& b = r.baseline_latency->strategies;
    for (size_t i = 0; !a.empty() && i < a[0].points.size(); ++i) {
      appendf(out, "%6lld", static_cast<long long>(a[0].points[i].m));
      for (size_t d = 0; d < a.size() && d < b.size(); ++d) {
        const double den = b[d].points[i].moe_step.median;
        appendf(out, " %12.2fx", den > 0 ? a[d].points[i].moe_step.median / den : 0.0);
      }
      out += "\n";
    }
  }
  if (!r.phases.empty()) {
    appendf(out, "\n%-18s %9s %9s %10s %10s %10s %10s\n", "phase", "wall s", "CPU s", "read MiB", "peak MiB",
        "anon MiB", "file MiB");
    const double mib = 1024.0 * 1024.0;
    for (const PhaseUsage& p : r.phases)
      appendf(out, "%-18s %9.1f %9.1f %10.0f %9.0f%s %10.0f %10.0f\n", p.name.c_str(), p.seconds, p.cpu_seconds,
          double(p.read_bytes) / mib, double(p.peak_rss_bytes) / mib, p.peak_is_phase_own ? " " : "*",
          double(p.rss_anon_bytes) / mib, double(p.rss_file_bytes) / mib);
    if (std::any_of(r.phases.begin(), r.phases.end(), [](const PhaseUsage& p) { return !p.peak_is_phase_own; }))
      out += "* peak since the process started (the kernel did not allow resetting the mark)\n";
  }
  return out;
}

}  // namespace eq::eval
