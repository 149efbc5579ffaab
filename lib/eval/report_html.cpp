// The HTML rendering of an EvalReport: one self-contained file (inline CSS
// and SVG; no scripts, fonts or network), readable offline and in CI logs.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/utf8.h"
#include "core/xml_escape.h"
#include "core/printf_string.h"
#include "eval/report.h"

namespace eq::eval {
namespace {

// A byte-level model's tokens are bytes: shown as the UTF-8 text they spell
// (invalid sequences as U+FFFD; control bytes other than newline and tab as
// their Unicode control pictures, U+2400 + byte). Other models' tokens are
// ids: there is no tokenizer here to spell them, so the ids are shown.
std::string tokens_text(const std::vector<int32_t>& t, bool byte_level) {
  std::string s;
  if (!byte_level) {
    for (int32_t id : t) s += std::to_string(id) + " ";
    return xml_escape(s);
  }
  std::string bytes;
  for (int32_t b : t) bytes += static_cast<char>(b & 0xff);
  for (char ch : valid_utf8(bytes)) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n' || c == '\t' || (c >= 0x20 && c != 0x7f)) {
      s += ch;
    } else {  // U+2400..U+241F, U+2421 (DEL): three bytes E2 90 xx
      s += "\xE2\x90";
      s += static_cast<char>(c == 0x7f ? 0xA1 : 0x80 + c);
    }
  }
  return xml_escape(s);
}

constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};
// Indexed by plan::ExpertClass: critical, standard, deprioritized, pruned.
constexpr const char* kClassColors[plan::kNumClasses] = {"#d62728", "#1f77b4", "#ffbf00", "#bbbbbb"};

// Median MoE-step time against M, log-log, one line per strategy (baseline dashed).
void latency_chart(std::string& out, const LatencyResult& l, const LatencyResult* base) {
  const double W = 720, Hh = 360, left = 60, right = 190, top = 20, bottom = 40;
  double tmin = 1e30, tmax = 0;
  int64_t mmin = INT64_MAX, mmax = 0;
  auto scan = [&](const LatencyResult& r) {
    for (const auto& s : r.strategies)
      for (const auto& p : s.points) {
        if (p.moe_step.median <= 0) continue;
        tmin = std::min(tmin, p.moe_step.median * 1e3);
        tmax = std::max(tmax, p.moe_step.median * 1e3);
        mmin = std::min(mmin, p.m);
        mmax = std::max(mmax, p.m);
      }
  };
  scan(l);
  if (base) scan(*base);
  if (tmax <= 0 || mmax <= 0) return;
  const double lx0 = std::log2(static_cast<double>(mmin)), lx1 = std::max(lx0 + 1, std::log2(static_cast<double>(mmax)));
  const double ly0 = std::floor(std::log10(tmin)), ly1 = std::max(ly0 + 1, std::ceil(std::log10(tmax)));
  auto X = [&](int64_t m) { return left + (std::log2(static_cast<double>(m)) - lx0) / (lx1 - lx0) * (W - left - right); };
  auto Y = [&](double ms) { return top + (ly1 - std::log10(ms)) / (ly1 - ly0) * (Hh - top - bottom); };
  appendf(out, "<svg xmlns='http://www.w3.org/2000/svg' width='%.0f' height='%.0f' class='chart' role='img' aria-label='latency vs M'>\n", W, Hh);
  appendf(out, "<rect x='%.0f' y='%.0f' width='%.0f' height='%.0f' fill='none' stroke='#999'/>\n", left, top, W - left - right, Hh - top - bottom);
  for (double d = ly0; d <= ly1 + 1e-9; d += 1) {
    appendf(out, "<line x1='%.1f' x2='%.1f' y1='%.1f' y2='%.1f' stroke='#eee'/>", left, W - right, Y(std::pow(10, d)), Y(std::pow(10, d)));
    appendf(out, "<text x='%.1f' y='%.1f' font-size='11' text-anchor='end'>%g ms</text>\n", left - 4, Y(std::pow(10, d)) + 4, std::pow(10, d));
  }
  for (const auto& p : l.strategies.empty() ? std::vector<LatencyPoint>{} : l.strategies[0].points)
    appendf(out, "<text x='%.1f' y='%.0f' font-size='11' text-anchor='middle'>%lld</text>\n", X(p.m), Hh - bottom + 14, static_cast<long long>(p.m));
  appendf(out, "<text x='%.0f' y='%.0f' font-size='12' text-anchor='middle'>M (tokens per MoE call)</text>\n", (left + W - right) / 2, Hh - 6);
  auto lines = [&](const LatencyResult& r, bool dashed, const char* suffix) {
    for (size_t i = 0; i < r.strategies.size(); ++i) {
      const auto& s = r.strategies[i];
      std::string pts;
      for (const auto& p : s.points)
        if (p.moe_step.median > 0) {
          char b[64];
          std::snprintf(b, sizeof b, "%.1f,%.1f ", X(p.m), Y(p.moe_step.median * 1e3));
          pts += b;
        }
      const char* color = kColors[i % 6];
      appendf(out, "<polyline fill='none' stroke='%s' stroke-width='2' %s points='%s'/>\n", color,
          dashed ? "stroke-dasharray='5,4'" : "", pts.c_str());
      const double ly = top + 16 * static_cast<double>(i + (dashed ? r.strategies.size() : 0));
      appendf(out, "<line x1='%.0f' x2='%.0f' y1='%.1f' y2='%.1f' stroke='%s' stroke-width='2' %s/>", W - right + 8,
          W - right + 28, ly, ly, color, dashed ? "stroke-dasharray='5,4'" : "");
      appendf(out, "<text x='%.0f' y='%.1f' font-size='11'>%s%s</text>\n", W - right + 32, ly + 4, xml_escape(s.dispatch).c_str(), suffix);
    }
  };
  lines(l, false, "");
  if (base) lines(*base, true, " (baseline)");
  out += "</svg>\n";
}

void layer_error_chart(std::string& out, const std::vector<LayerError>& layers) {
  if (layers.empty()) return;
  double mx = 0;
  for (const auto& e : layers) mx = std::max(mx, e.rel_l2);
  if (mx <= 0) mx = 1;
  const double W = 640, bar = 18, left = 70, right = 90;
  const double Hh = 10 + bar * 1.4 * static_cast<double>(layers.size());
  appendf(out, "<svg xmlns='http://www.w3.org/2000/svg' width='%.0f' height='%.0f' class='chart' role='img' aria-label='per-layer error'>\n", W, Hh);
  for (size_t i = 0; i < layers.size(); ++i) {
    const double y = 5 + bar * 1.4 * static_cast<double>(i);
    const double w = layers[i].rel_l2 / mx * (W - left - right);
    appendf(out, "<text x='%.0f' y='%.1f' font-size='11' text-anchor='end'>layer %lld</text>", left - 6, y + bar * 0.7,
        static_cast<long long>(layers[i].layer));
    appendf(out, "<rect x='%.0f' y='%.1f' width='%.1f' height='%.0f' fill='#1f77b4'><title>rel L2 %.5f, cosine %.6f</title></rect>",
        left, y, w, bar, layers[i].rel_l2, layers[i].cosine_mean);
    appendf(out, "<text x='%.1f' y='%.1f' font-size='11'>%.4f</text>\n", left + w + 4, y + bar * 0.7, layers[i].rel_l2);
  }
  out += "</svg>\n";
}

// Every step-th expert gets a tick: the smallest 1-2-5 step whose labels sit
// at least `min_px` apart.
size_t tick_step(double cell, double min_px) {
  for (size_t step = 1;; step *= 10)
    for (size_t m : {1, 2, 5})
      if (static_cast<double>(step * m) * cell >= min_px) return step * m;
}

void class_heatmap(std::string& out, const PackSummary& p) {
  if (p.classes.empty()) return;
  size_t experts = 0;
  for (const auto& row : p.classes) experts = std::max(experts, row.size());
  const double cell = std::clamp(600.0 / static_cast<double>(std::max<size_t>(1, experts)), 2.0, 14.0);
  const double left = 60, top = 24, W = left + cell * static_cast<double>(experts) + 10;
  const double rows_end = top + cell * static_cast<double>(p.classes.size());
  const double Hh = rows_end + 40;  // the expert axis: ticks, numbers, its name
  appendf(out, "<svg xmlns='http://www.w3.org/2000/svg' width='%.0f' height='%.0f' class='chart' role='img' aria-label='class heatmap'>\n", std::max(W, 420.0), Hh);
  for (int c = 0; c < plan::kNumClasses; ++c) {
    appendf(out, "<rect x='%d' y='4' width='10' height='10' fill='%s'/><text x='%d' y='13' font-size='11'>%s</text>",
        static_cast<int>(left) + c * 100, kClassColors[c], static_cast<int>(left) + c * 100 + 14,
        std::string(plan::class_name(static_cast<plan::ExpertClass>(c))).c_str());
  }
  out += "\n";
  for (size_t l = 0; l < p.classes.size(); ++l) {
    const double y = top + cell * static_cast<double>(l);
    appendf(out, "<text x='%.0f' y='%.1f' font-size='%.0f' text-anchor='end'>L%lld</text>", left - 4, y + cell * 0.8,
        std::max(7.0, std::min(11.0, cell)), static_cast<long long>(p.layers[l]));
    for (size_t e = 0; e < p.classes[l].size(); ++e) {
      const int c = std::clamp(p.classes[l][e], 0, plan::kNumClasses - 1);
      appendf(out, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='%s'><title>layer %lld expert %zu: %s</title></rect>",
          left + cell * static_cast<double>(e), y, cell * 0.92, cell * 0.92, kClassColors[c],
          static_cast<long long>(p.layers[l]), e, std::string(plan::class_name(static_cast<plan::ExpertClass>(c))).c_str());
    }
    out += "\n";
  }
  out += "<g class='expert-axis' font-size='10' text-anchor='middle'>";
  for (size_t e = 0; e < experts; e += tick_step(cell, 28)) {
    const double x = left + cell * (static_cast<double>(e) + 0.46);
    appendf(out, "<line x1='%.1f' x2='%.1f' y1='%.1f' y2='%.1f' stroke='#999'/><text x='%.1f' y='%.1f'>%zu</text>", x, x,
        rows_end, rows_end + 4, x, rows_end + 15, e);
  }
  appendf(out, "<text x='%.1f' y='%.1f' font-size='11'>expert</text></g>\n",
      left + cell * static_cast<double>(experts) / 2, rows_end + 32);
  out += "</svg>\n";
}

}  // namespace

std::string report_html(const EvalReport& r) {
  std::string out;
  out += "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>expertquant eval report</title>\n";
  out += "<style>body{font-family:sans-serif;margin:24px;max-width:1100px;color:#222}"
         "table{border-collapse:collapse;margin:8px 0 16px}td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px;text-align:right}"
         "th{background:#f4f4f4}td.l,th.l{text-align:left}pre{white-space:pre-wrap;font-size:12px;background:#f8f8f8;padding:4px;margin:0}"
         ".pass{color:#2a2}.fail{color:#c22;font-weight:bold}.chart{display:block;margin:8px 0}</style></head><body>\n";
  out += "<h1>expertquant eval report</h1>\n";
  appendf(out, "<p id='summary'>Packed <code>%s</code> (%s, %.3f bits per expert weight) against <code>%s</code>; %s, %s, %d thread(s).</p>\n",
      xml_escape(r.packed.folder).c_str(), xml_escape(r.packed.policy).c_str(), r.packed.avg_bits_per_expert_weight,
      xml_escape(r.model_path.empty() ? std::string("no unquantized model") : r.model_path).c_str(), xml_escape(r.machine.cpu).c_str(),
      xml_escape(r.machine.isa).c_str(), r.machine.threads);
  if (!r.comparison_skipped.empty())
    out += "<p id='comparison'>Comparison skipped: " + xml_escape(r.comparison_skipped) + "</p>\n";
  if (r.baseline)
    appendf(out, "<p>Baseline <code>%s</code> (%s, %.3f bits per expert weight).</p>\n", xml_escape(r.baseline->folder).c_str(),
        xml_escape(r.baseline->policy).c_str(), r.baseline->avg_bits_per_expert_weight);
  const char* unit = r.byte_level ? "bpb" : "bits/token";
  if (r.quality && !r.quality->compared) {
    out += "<h2>Quality</h2>\n<p>" + xml_escape(quality_line(r)) + "</p>\n";
    appendf(out, "<table id='quality'><tr><th class='l'>text</th><th>tokens</th><th>%s packed</th></tr>\n", unit);
    std::vector<TextQuality> rows = r.quality->texts;
    if (rows.size() > 1) rows.push_back(r.quality->overall);
    for (const auto& t : rows)
      appendf(out, "<tr><td class='l'>%s</td><td>%lld</td><td>%.4f</td></tr>\n", xml_escape(t.label).c_str(),
          static_cast<long long>(t.scored_tokens), t.bits_packed);
    out += "</table>\n";
  } else if (r.quality) {
    const QualityResult& q = *r.quality;
    out += "<h2>Quality</h2>\n<p>" + xml_escape(quality_line(r)) + "</p>\n";
    appendf(out, "<table id='quality'><tr><th class='l'>text</th><th>tokens</th><th>%s reference</th><th>%s packed</th><th>delta</th><th>KL mean</th><th>KL p99</th><th>KL max</th><th>top-1</th></tr>\n", unit, unit);
    std::vector<TextQuality> rows = q.texts;
    if (q.texts.size() > 1) rows.push_back(q.overall);
    for (const auto& t : rows)
      appendf(out, "<tr><td class='l'>%s</td><td>%lld</td><td>%.4f</td><td>%.4f</td><td>%+.2f%%</td><td>%.5f</td><td>%.5f</td><td>%.4f</td><td>%.1f%%</td></tr>\n",
          xml_escape(t.label).c_str(), static_cast<long long>(t.scored_tokens), t.bits_reference, t.bits_packed,
          t.bits_reference > 0 ? 100.0 * (t.bits_packed / t.bits_reference - 1.0) : 0.0, t.kl_mean, t.kl_p99,
          t.kl_max, 100.0 * t.top1_agreement);
    out += "</table>\n<h3>Per-layer output error (relative L2, packed vs unquantized block on the same inputs)</h3>\n";
    layer_error_chart(out, q.layers);
  }
  if (!r.collapse.empty()) {
    int64_t passed = 0;
    for (const auto& c : r.collapse) passed += c.passed();
    appendf(out, "<h2>Collapse checks: %lld/%zu pass</h2>\n<p>loop: repeated n-gram coverage &ge; %.2f and &ge; reference + %.2f; drift: class-histogram JSD &gt; %.2f.</p>\n",
        static_cast<long long>(passed), r.collapse.size(), r.collapse_thresholds.loop_coverage,
        r.collapse_thresholds.loop_margin, r.collapse_thresholds.drift_jsd);
    out += "<table id='collapse'><tr><th class='l'>domain</th><th>offset</th><th>loop ref</th><th>loop packed</th><th>JSD</th><th class='l'>verdict</th><th class='l'>prompt</th><th class='l'>unquantized</th><th class='l'>packed</th></tr>\n";
    for (const auto& c : r.collapse)
      appendf(out, "<tr><td class='l'>%s</td><td>%lld</td><td>%.2f</td><td>%.2f</td><td>%.3f</td><td class='l %s'>%s</td>",
          xml_escape(c.domain).c_str(), static_cast<long long>(c.offset), c.loop_reference, c.loop_packed, c.drift_jsd,
          c.passed() ? "pass" : "fail", c.verdict().c_str()),
          out += "<td class='l'><pre>" + tokens_text(c.prompt, r.byte_level) + "</pre></td><td class='l'><pre>" +
                 tokens_text(c.reference, r.byte_level) + "</pre></td><td class='l'><pre>" +
                 tokens_text(c.packed, r.byte_level) + "</pre></td></tr>\n";
    out += "</table>\n";
  }
  if (r.latency) {
    out += "<h2>Latency</h2>\n<p>Median time of one MoE step (every MoE layer once) against the tokens per call M, per dispatch strategy";
    out += r.baseline_latency ? "; dashed: the uniform baseline pack.</p>\n" : ".</p>\n";
    latency_chart(out, *r.latency, r.baseline_latency ? &*r.baseline_latency : nullptr);
    const auto& st = r.latency->strategies;
    out += "<table id='latency'><tr><th>M</th>";
    for (const auto& s : st) out += "<th>" + xml_escape(s.dispatch) + " MoE ms</th>";
    for (const auto& s : st) out += "<th>" + xml_escape(s.dispatch) + " model ms</th>";
    out += "<th>mask-combine / sorted</th></tr>\n";
    const StrategyLatency *mc = nullptr, *so = nullptr;
    for (const auto& s : st) {
      if (s.dispatch == "mask-combine") mc = &s;
      if (s.dispatch == "sorted") so = &s;
    }
    for (size_t i = 0; !st.empty() && i < st[0].points.size(); ++i) {
      appendf(out, "<tr><td>%lld</td>", static_cast<long long>(st[0].points[i].m));
      for (const auto& s : st) appendf(out, "<td>%.3f</td>", s.points[i].moe_step.median * 1e3);
      for (const auto& s : st)
        s.points[i].model_step.reps ? appendf(out, "<td>%.3f</td>", s.points[i].model_step.median * 1e3) : appendf(out, "<td>-</td>");
      if (mc && so && so->points[i].moe_step.median > 0)
        appendf(out, "<td>%.2f&times;</td>", mc->points[i].moe_step.median / so->points[i].moe_step.median);
      else
        out += "<td>-</td>";
      out += "</tr>\n";
    }
    out += "</table>\n<table id='speed'><tr><th class='l'>dispatch</th><th>decode tok/s</th><th>prefill tok/s</th></tr>\n";
    for (const auto& s : st)
      appendf(out, "<tr><td class='l'>%s</td><td>%.1f</td><td>%.1f</td></tr>\n", xml_escape(s.dispatch).c_str(),
          s.decode_tokens_per_second, s.prefill_tokens_per_second);
    out += "</table>\n";
  }
  out += "<h2>Expert classes</h2>\n";
  class_heatmap(out, r.packed);
  appendf(out, "<p>Generated by expertquant %s in %.1f s.</p>\n</body></html>\n", xml_escape(r.tool_version).c_str(), r.seconds);
  return out;
}

}  // namespace eq::eval
