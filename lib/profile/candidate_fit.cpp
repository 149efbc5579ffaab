#include "profile/candidate_fit.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "core/error.h"

namespace eq::profile {

namespace {

// "rows % 16 == 0 and cols % 16 == 0" for what [rows, cols] lacks; "" when it fits.
std::string unmet_multiples(const quant::FormatTraits& f, int64_t rows, int64_t cols) {
  std::string need;
  if (f.row_multiple > 0 && rows % f.row_multiple) need = "rows % " + std::to_string(f.row_multiple) + " == 0";
  if (f.col_multiple > 0 && cols % f.col_multiple)
    need += (need.empty() ? "" : " and ") + std::string("cols % ") + std::to_string(f.col_multiple) + " == 0";
  return need;
}

std::string shape(int64_t rows, int64_t cols) { return "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]"; }

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string layers_phrase(size_t moe_layers) {
  if (moe_layers == 1) return "the 1 MoE layer, every expert";
  return "all " + std::to_string(moe_layers) + " MoE layers, every expert";
}

void add_misfit(nlohmann::ordered_json& e, const ShapeMisfit& m) {
  e["matrices"] = m.matrices;
  e["reason"] = m.reason;
}

}  // namespace

ShapeMisfit expert_misfit(const quant::FormatTraits& f, int64_t hidden, int64_t intermediate) {
  ShapeMisfit m;
  const std::string gate_up = unmet_multiples(f, intermediate, hidden), down = unmet_multiples(f, hidden, intermediate);
  if (!gate_up.empty()) {
    m.matrices = {"gate", "up"};
    m.reason = "gate/up " + shape(intermediate, hidden) + " need " + gate_up;
  }
  if (!down.empty()) {
    m.matrices.push_back("down");
    m.reason += (m.reason.empty() ? "" : "; ") + std::string("down ") + shape(hidden, intermediate) + " needs " + down;
  }
  return m;
}

bool fits_experts(const std::string& format, int64_t hidden, int64_t intermediate) {
  return expert_misfit(quant::format_by_name(format), hidden, intermediate).fits();
}

std::string nearest_wider_fit(const std::string& wanted, const std::vector<std::string>& candidates, int64_t hidden,
                              int64_t intermediate) {
  const quant::FormatTraits& w = quant::format_by_name(wanted);
  // Registry order breaks the remaining ties: the first row of equal rank is kept.
  const auto rank = [&](const quant::FormatTraits& f) {
    return std::make_tuple(f.bits_per_weight, !contains(candidates, std::string(f.name)), f.family != w.family);
  };
  const quant::FormatTraits* best = nullptr;
  for (const quant::FormatTraits& f : quant::all_formats()) {
    if (!(f.bits_per_weight > w.bits_per_weight) || !expert_misfit(f, hidden, intermediate).fits()) continue;
    if (!best || rank(f) < rank(*best)) best = &f;
  }
  if (!best)
    invalid("policy: format " + wanted + " cannot take the expert matrices (" +
            expert_misfit(w, hidden, intermediate).reason + ") and no wider registry format can");
  return std::string(best->name);
}

CandidateFit fit_policy(const Policy& p, int64_t hidden, int64_t intermediate) {
  CandidateFit out;
  out.policy = p;
  Policy& q = out.policy;
  for (int c = 0; c < 3; ++c) {
    ShapeMisfit m = expert_misfit(quant::format_by_name(p.class_format[c]), hidden, intermediate);
    if (m.fits()) continue;
    q.class_format[c] = nearest_wider_fit(p.class_format[c], p.candidates, hidden, intermediate);
    out.substitutes.push_back({plan::ExpertClass(c), p.class_format[c], q.class_format[c], std::move(m)});
  }
  // As parse_policy orders them: the class formats first, then the other candidates.
  q.candidates.clear();
  std::set<std::string> seen;
  for (const auto& f : q.class_format)
    if (seen.insert(f).second) q.candidates.push_back(f);
  for (const auto& f : p.candidates) {
    ShapeMisfit m = expert_misfit(quant::format_by_name(f), hidden, intermediate);
    if (!m.fits())
      out.skipped.push_back({f, std::move(m)});
    else if (seen.insert(f).second)
      q.candidates.push_back(f);
  }
  q.proxies.clear();
  for (const auto& [from, to] : p.proxies) {
    if (!contains(q.candidates, from)) continue;  // skipped itself
    ShapeMisfit m = expert_misfit(quant::format_by_name(to), hidden, intermediate);
    if (m.fits())
      q.proxies.emplace_back(from, to);
    else
      out.dropped_proxies.push_back({from, to, std::move(m)});
  }
  return out;
}

std::vector<std::string> describe_fit(const CandidateFit& fit, size_t moe_layers) {
  std::vector<std::string> lines;
  for (const auto& s : fit.skipped)
    lines.push_back("candidate " + s.format + " skipped: " + s.misfit.reason + " (" + layers_phrase(moe_layers) + ")");
  for (const auto& s : fit.substitutes)
    lines.push_back(std::string(plan::class_name(s.cls)) + " format " + s.wanted + " replaced by " + s.used +
                    ", the nearest wider format that fits: " + s.misfit.reason);
  for (const auto& d : fit.dropped_proxies)
    lines.push_back("proxy " + d.proxy + " of " + d.format + " skipped: " + d.misfit.reason + "; " + d.format +
                    " is measured itself");
  return lines;
}

nlohmann::ordered_json fit_to_json(const CandidateFit& fit, const std::vector<int64_t>& moe_layer_ids) {
  nlohmann::ordered_json skipped = nlohmann::ordered_json::array(), subs = nlohmann::ordered_json::array(),
                         proxies = nlohmann::ordered_json::array();
  for (const auto& s : fit.skipped) {
    nlohmann::ordered_json e = {{"format", s.format}};
    add_misfit(e, s.misfit);
    e["layers"] = moe_layer_ids;
    skipped.push_back(std::move(e));
  }
  for (const auto& s : fit.substitutes) {
    nlohmann::ordered_json e = {
        {"class", std::string(plan::class_name(s.cls))}, {"policy_format", s.wanted}, {"format", s.used}};
    add_misfit(e, s.misfit);
    subs.push_back(std::move(e));
  }
  for (const auto& d : fit.dropped_proxies) {
    nlohmann::ordered_json e = {{"format", d.format}, {"proxy", d.proxy}};
    add_misfit(e, d.misfit);
    proxies.push_back(std::move(e));
  }
  return {{"skipped_candidates", skipped}, {"class_substitutes", subs}, {"dropped_proxies", proxies}};
}

}  // namespace eq::profile
