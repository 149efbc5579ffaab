#include "profile/classify.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "profile/candidate_fit.h"
#include "quant/format.h"

namespace eq::profile {

using plan::ExpertClass;

namespace {

std::string fmt(double v, int prec = 3) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*g", prec, v);
  return b;
}

}  // namespace

std::vector<std::vector<ExpertMetrics>> expert_metrics(const RoutingStats& stats, const Policy& policy) {
  std::vector<std::vector<ExpertMetrics>> out;
  const int64_t E = stats.num_experts;
  for (const LayerStats& ls : stats.layers) {
    std::vector<ExpertMetrics> row(E);
    std::vector<int64_t> covered;
    for (int64_t e = 0; e < E; ++e) {
      const ExpertStats& es = ls.experts[e];
      ExpertMetrics& m = row[e];
      m.share = ls.share(e, stats.top_k);
      m.usage_ratio = m.share * double(E);
      // Without outputs REAP falls back to the expert's gate mass per layer token.
      m.reap = stats.has_outputs ? es.reap() : (ls.tokens ? es.gate_sum / double(ls.tokens) : 0.0);
      m.under_covered = es.tokens < policy.min_tokens || es.tokens == 0;
      m.error_weight = ls.routed_output_energy > 0 ? es.gated_out_energy / ls.routed_output_energy : 0.0;
      if (!m.under_covered) covered.push_back(e);
    }
    std::stable_sort(covered.begin(), covered.end(), [&](int64_t a, int64_t b) { return row[a].reap < row[b].reap; });
    for (size_t r = 0; r < covered.size(); ++r)
      row[covered[r]].reap_percentile = covered.size() > 1 ? 100.0 * double(r) / double(covered.size() - 1) : 100.0;
    out.push_back(std::move(row));
  }
  return out;
}

uint64_t expert_bytes(const model::ModelConfig& c, const std::string& format) {
  if (format.empty()) return 0;
  const auto& f = quant::format_by_name(format);
  const int64_t H = c.hidden_size, I = c.moe_intermediate_size;
  return 2 * f.packed_bytes(I, H) + f.packed_bytes(H, I);
}

double expert_error(const ExpertMetrics& m, const ExpertSensitivity* s, const SensitivityTable& sens,
                    const std::string& format) {
  if (format.empty()) return m.error_weight;  // pruned: the expert's whole contribution is lost
  if (!s) return std::numeric_limits<double>::quiet_NaN();
  const int i = sens.index_of(format);
  if (i < 0) return std::numeric_limits<double>::quiet_NaN();
  const double r = s->rel_mse[i];
  return std::isnan(r) ? 0.0 : r * m.error_weight;  // no sample at all: no measured error weight either
}

ExpertClass class_of_format(const Policy& p, const std::string& format) {
  if (format.empty()) return ExpertClass::kPruned;
  for (int c = 0; c < 3; ++c)
    if (p.class_format[c] == format) return ExpertClass(c);
  // Otherwise the class whose format's bits are nearest, ties to the wider
  // class: beside int8_row / fp4_g32 / trellis2, trellis4 and nl4_g32 are
  // standard and trellis3 deprioritized.
  const double bits = quant::format_by_name(format).bits_per_weight;
  ExpertClass nearest = ExpertClass::kStandard;
  double best = std::numeric_limits<double>::infinity();
  for (int c = 0; c < 3; ++c) {
    const double d = std::fabs(bits - quant::format_by_name(p.class_format[c]).bits_per_weight);
    if (d < best - 1e-9) best = d, nearest = ExpertClass(c);
  }
  return nearest;
}

Classification classify_by_thresholds(const RoutingStats& stats, const SensitivityTable& sens, const Policy& policy) {
  // Class formats the experts cannot take are replaced (candidate_fit.h); the
  // rule of every expert given a replacement says so.
  const Policy p = fit_policy(policy, stats.hidden, stats.intermediate).policy;
  Classification out;
  out.mode = "thresholds";
  const auto metrics = expert_metrics(stats, p);
  const int64_t E = stats.num_experts;
  const int std_index = sens.index_of(p.class_format[1]);
  const int64_t max_pruned = int64_t(std::floor(p.max_pruned_fraction * double(E) + 1e-9));
  const int64_t max_critical = int64_t(std::floor(p.max_critical_fraction * double(E) + 1e-9));
  const int64_t kept_floor = p.kept_floor(stats.top_k);
  for (size_t li = 0; li < stats.layers.size(); ++li) {
    const auto& m = metrics[li];
    std::vector<ExpertDecision> row(E);
    std::vector<bool> decided(E, false);
    auto set = [&](int64_t e, ExpertClass c, std::string rule) {
      row[e].cls = c;
      row[e].format = c == ExpertClass::kPruned ? "" : p.class_format[int(c)];
      row[e].rule = std::move(rule);
      if (c != ExpertClass::kPruned && p.class_format[int(c)] != policy.class_format[int(c)])
        row[e].rule += "; " + p.class_format[int(c)] + " in place of " + policy.class_format[int(c)] +
                       ", which the expert matrices cannot take";
      decided[e] = true;
    };
    std::vector<std::string> notes(E);
    for (int64_t e = 0; e < E; ++e)
      if (m[e].under_covered)
        set(e, p.under_covered_class,
            "under-covered: " + std::to_string(stats.layers[li].experts[e].tokens) + " tokens < coverage.min_tokens " +
                std::to_string(p.min_tokens) + " (never treated as unimportant)");

    // Pruning: lowest REAP first, while the guard rails hold.
    std::vector<int64_t> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return m[a].reap < m[b].reap; });
    int64_t pruned = 0;
    for (int64_t e : order) {
      if (decided[e]) continue;
      if (!(m[e].usage_ratio <= p.pruned_max_usage_ratio && m[e].reap_percentile <= p.pruned_max_reap_percentile))
        continue;
      if (m[e].share > p.max_pruned_usage_share)
        notes[e] = "; pruning blocked by guard_rails.max_pruned_usage_share";
      else if (pruned + 1 > max_pruned)
        notes[e] = "; pruning blocked by guard_rails.max_pruned_fraction";
      else if (E - pruned - 1 < kept_floor)
        notes[e] = "; pruning blocked by guard_rails.min_kept_experts";
      else {
        ++pruned;
        set(e, ExpertClass::kPruned,
            "usage ratio " + fmt(m[e].usage_ratio) + " <= " + fmt(p.pruned_max_usage_ratio) + " and REAP percentile " +
                fmt(m[e].reap_percentile) + " <= " + fmt(p.pruned_max_reap_percentile));
      }
    }

    // Critical: highest REAP first, capped per layer.
    std::reverse(order.begin(), order.end());
    int64_t critical = 0;
    for (int64_t e : order) {
      if (decided[e]) continue;
      const ExpertSensitivity* s = sens.empty() ? nullptr : &sens.layers[li][e];
      const double std_sens = s && std_index >= 0 ? s->rel_mse[std_index] : std::numeric_limits<double>::quiet_NaN();
      std::string why;
      if (m[e].usage_ratio >= p.critical_min_usage_ratio)
        why = "usage ratio " + fmt(m[e].usage_ratio) + " >= " + fmt(p.critical_min_usage_ratio);
      else if (m[e].reap_percentile >= p.critical_min_reap_percentile && !std::isnan(std_sens) &&
               std_sens >= p.critical_min_sensitivity)
        why = "REAP percentile " + fmt(m[e].reap_percentile) + " >= " + fmt(p.critical_min_reap_percentile) +
              " and " + p.class_format[1] + " rel. MSE " + fmt(std_sens) + " >= " + fmt(p.critical_min_sensitivity);
      if (why.empty()) continue;
      if (critical + 1 > max_critical) {
        notes[e] += "; critical (" + why + ") blocked by guard_rails.max_critical_fraction";
        continue;
      }
      ++critical;
      set(e, ExpertClass::kCritical, why + notes[e]);
    }

    for (int64_t e = 0; e < E; ++e) {
      if (decided[e]) continue;
      if (m[e].usage_ratio <= p.deprioritized_max_usage_ratio &&
          m[e].reap_percentile <= p.deprioritized_max_reap_percentile)
        set(e, ExpertClass::kDeprioritized,
            "usage ratio " + fmt(m[e].usage_ratio) + " <= " + fmt(p.deprioritized_max_usage_ratio) +
                " and REAP percentile " + fmt(m[e].reap_percentile) + " <= " +
                fmt(p.deprioritized_max_reap_percentile) + notes[e]);
      else
        set(e, ExpertClass::kStandard, "no threshold met (usage ratio " + fmt(m[e].usage_ratio) +
                                           ", REAP percentile " + fmt(m[e].reap_percentile) + ")" + notes[e]);
    }
    out.layers.push_back(std::move(row));
  }
  return out;
}

void summarize(Classification& cls, const RoutingStats& stats, const SensitivityTable& sens, const Policy& policy,
               const model::ModelConfig& c) {
  const auto metrics = expert_metrics(stats, policy);
  cls.expert_bytes = 0;
  cls.expert_weights = 0;
  cls.format_mix = {};
  double err = 0;
  bool known = !sens.empty();
  for (size_t li = 0; li < cls.layers.size(); ++li)
    for (size_t e = 0; e < cls.layers[li].size(); ++e) {
      const ExpertDecision& d = cls.layers[li][e];
      cls.expert_bytes += expert_bytes(c, d.format);
      cls.format_mix.add(d.format, expert_bytes(c, d.format));
      cls.expert_weights += uint64_t(3 * c.hidden_size * c.moe_intermediate_size);
      if (known) err += expert_error(metrics[li][e], &sens.layers[li][e], sens, d.format);
    }
  cls.avg_bits = cls.expert_weights ? 8.0 * double(cls.expert_bytes) / double(cls.expert_weights) : 0.0;
  cls.predicted_error = known && !cls.layers.empty() ? err / double(cls.layers.size())
                                                     : std::numeric_limits<double>::quiet_NaN();
}

plan::Allocation to_allocation(const Classification& cls, const RoutingStats& stats) {
  plan::Allocation a;
  for (size_t li = 0; li < cls.layers.size(); ++li) {
    plan::LayerAllocation la;
    la.layer = stats.layers[li].layer;
    for (const auto& d : cls.layers[li]) la.experts.push_back({d.cls, d.format});
    a.layers.push_back(std::move(la));
  }
  return a;
}

}  // namespace eq::profile
