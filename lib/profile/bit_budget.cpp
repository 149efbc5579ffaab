#include "profile/bit_budget.h"

#include <algorithm>
#include <cmath>
#include <queue>
#include <vector>

#include "core/error.h"
#include "quant/format.h"

namespace eq::profile {

using pack::ExpertClass;

namespace {

struct Option {
  std::string format;  // "" = pruned
  uint64_t bytes = 0;
  double error = 0;
  bool above_standard = false;  // counts against max_critical_fraction
};

struct ExpertState {
  size_t li = 0;
  int64_t e = 0;
  std::vector<Option> hull;  // lower convex hull, bytes descending, error ascending
  size_t at = 0;             // current position on the hull
  bool fixed = false;  // under-covered
};

// Lower convex hull of the options, from the lowest-error one down to the
// cheapest, keeping only points where saving bytes costs the least error.
std::vector<Option> lower_hull(std::vector<Option> opts) {
  std::sort(opts.begin(), opts.end(), [](const Option& a, const Option& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.error < b.error;
  });
  // Start from the minimum-error option (fewest bytes among equals).
  size_t start = 0;
  for (size_t i = 1; i < opts.size(); ++i)
    if (opts[i].error <= opts[start].error) start = i;
  std::vector<Option> hull{opts[start]};
  size_t cur = start;
  while (true) {
    size_t best = opts.size();
    double best_slope = 0;
    for (size_t i = cur + 1; i < opts.size(); ++i) {
      if (opts[i].bytes >= opts[cur].bytes) continue;
      const double slope = (opts[i].error - opts[cur].error) / double(opts[cur].bytes - opts[i].bytes);
      if (best == opts.size() || slope < best_slope || (slope == best_slope && opts[i].bytes < opts[best].bytes)) {
        best = i;
        best_slope = slope;
      }
    }
    if (best == opts.size()) break;
    hull.push_back(opts[best]);
    cur = best;
  }
  return hull;
}

struct Move {
  double slope;  // error added per byte saved
  size_t expert;
  size_t from;
  bool operator>(const Move& o) const { return slope != o.slope ? slope > o.slope : expert > o.expert; }
};

}  // namespace

Classification allocate_bit_budget(const RoutingStats& stats, const SensitivityTable& sens, const Policy& p,
                                   const model::ModelConfig& c, const BitBudget& budget) {
  if (sens.empty()) invalid("bit budget: the profile has no sensitivity table (a --router-logits source cannot be budgeted)");
  const auto metrics = expert_metrics(stats, p);
  const int64_t E = stats.num_experts;
  const uint64_t weights_per_expert = uint64_t(3 * c.hidden_size * c.moe_intermediate_size);
  const uint64_t all_weights = weights_per_expert * uint64_t(E) * stats.layers.size();
  const uint64_t target = budget.target_bits > 0
                              ? uint64_t(std::llround(budget.target_bits * double(all_weights) / 8.0))
                              : budget.target_bytes;
  if (target == 0) invalid("bit budget: --target-bits or --target-size must be positive");
  const double standard_bits = quant::format_by_name(p.class_format[1]).bits_per_weight;
  const int64_t max_pruned = int64_t(std::floor(p.max_pruned_fraction * double(E) + 1e-9));
  const int64_t max_critical = int64_t(std::floor(p.max_critical_fraction * double(E) + 1e-9));
  const int64_t kept_floor = p.kept_floor(stats.top_k);

  std::vector<double> prior(stats.layers.size(), 0.0);
  for (size_t li = 0; li < stats.layers.size(); ++li) {
    std::vector<double> w;
    for (const auto& m : metrics[li])
      if (!m.under_covered) w.push_back(m.error_weight);
    if (!w.empty()) {
      std::nth_element(w.begin(), w.begin() + w.size() / 2, w.end());
      prior[li] = w[w.size() / 2];
    } else {
      prior[li] = 1.0 / double(E);
    }
  }

  std::vector<ExpertState> experts;
  for (size_t li = 0; li < stats.layers.size(); ++li)
    for (int64_t e = 0; e < E; ++e) {
      ExpertState s;
      s.li = li;
      s.e = e;
      const ExpertMetrics& m = metrics[li][e];
      const ExpertSensitivity& es = sens.layers[li][e];
      std::vector<Option> opts;
      // Under-covered experts are budgeted like the others but never pruned,
      // and their error weight is the layer's median (a prior), not their own
      // near-zero measurement: too few tokens to call them unimportant.
      ExpertMetrics mm = m;
      if (m.under_covered) {
        mm.error_weight = prior[li];
        s.fixed = true;
      }
      for (const auto& f : sens.formats)
        opts.push_back({f, expert_bytes(c, f), expert_error(mm, &es, sens, f),
                        quant::format_by_name(f).bits_per_weight > standard_bits + 1e-9});
      if (!m.under_covered && m.share <= p.max_pruned_usage_share && max_pruned > 0 && E - 1 >= kept_floor)
        opts.push_back({"", 0, expert_error(m, &es, sens, ""), false});
      s.hull = lower_hull(std::move(opts));
      experts.push_back(std::move(s));
    }

  uint64_t total = 0;
  for (const auto& s : experts) total += s.hull[s.at].bytes;
  std::vector<int64_t> pruned(stats.layers.size(), 0), critical(stats.layers.size(), 0);
  for (const auto& s : experts) critical[s.li] += s.hull[s.at].above_standard;

  auto slope_of = [&](const ExpertState& s) {
    const Option &a = s.hull[s.at], &b = s.hull[s.at + 1];
    return (b.error - a.error) / double(a.bytes - b.bytes);
  };
  std::priority_queue<Move, std::vector<Move>, std::greater<Move>> heap;
  for (size_t i = 0; i < experts.size(); ++i)
    if (experts[i].hull.size() > 1) heap.push({slope_of(experts[i]), i, 0});

  // Phase 1: downgrade until the budget holds.
  while (total > target && !heap.empty()) {
    const Move mv = heap.top();
    heap.pop();
    ExpertState& s = experts[mv.expert];
    if (s.at != mv.from) continue;  // stale
    const Option& next = s.hull[s.at + 1];
    if (next.format.empty() && (pruned[s.li] + 1 > max_pruned || E - pruned[s.li] - 1 < kept_floor)) {
      s.hull.resize(s.at + 1);  // pruning blocked by a guard rail; pruned is always the hull's last point
      continue;
    }
    total -= s.hull[s.at].bytes - next.bytes;
    critical[s.li] += int64_t(next.above_standard) - int64_t(s.hull[s.at].above_standard);
    pruned[s.li] += next.format.empty();
    ++s.at;
    if (s.at + 1 < s.hull.size()) heap.push({slope_of(s), mv.expert, s.at});
  }
  if (total > target) {
    invalid("bit budget: target " + std::to_string(8.0 * double(target) / double(all_weights)) +
            " bits per expert weight is below the minimum the policy's guard rails allow (" +
            std::to_string(8.0 * double(total) / double(all_weights)) + ")");
  }

  // Phase 2: the critical cap. Experts above standard beyond the cap move to
  // their best option at or below standard, cheapest error increase first.
  for (size_t li = 0; li < stats.layers.size(); ++li) {
    while (critical[li] > max_critical) {
      size_t best = experts.size(), best_pos = 0;
      double best_cost = 0;
      for (size_t i = 0; i < experts.size(); ++i) {
        const ExpertState& s = experts[i];
        if (s.li != li || !s.hull[s.at].above_standard) continue;
        for (size_t k = s.at + 1; k < s.hull.size(); ++k)
          if (!s.hull[k].above_standard && !s.hull[k].format.empty()) {
            const double cost = s.hull[k].error - s.hull[s.at].error;
            if (best == experts.size() || cost < best_cost) best = i, best_pos = k, best_cost = cost;
            break;
          }
      }
      if (best == experts.size()) break;
      ExpertState& s = experts[best];
      total -= s.hull[s.at].bytes - s.hull[best_pos].bytes;
      s.at = best_pos;
      --critical[li];
    }
  }

  // Phase 3: spend the slack on upgrades (largest error reduction per byte that fits).
  for (;;) {
    size_t best = experts.size(), best_pos = 0;
    double best_gain = 0;
    for (size_t i = 0; i < experts.size(); ++i) {
      const ExpertState& s = experts[i];
      for (size_t k = 0; k < s.at; ++k) {
        const Option &cur = s.hull[s.at], &up = s.hull[k];
        const uint64_t extra = up.bytes - cur.bytes;
        if (total + extra > target) continue;
        if (up.above_standard && !cur.above_standard && critical[s.li] + 1 > max_critical) continue;
        const double gain = (cur.error - up.error) / double(std::max<uint64_t>(1, extra));
        if (gain > best_gain) best = i, best_pos = k, best_gain = gain;
      }
    }
    if (best == experts.size()) break;
    ExpertState& s = experts[best];
    total += s.hull[best_pos].bytes - s.hull[s.at].bytes;
    critical[s.li] += int64_t(s.hull[best_pos].above_standard) - int64_t(s.hull[s.at].above_standard);
    pruned[s.li] -= s.hull[s.at].format.empty();
    s.at = best_pos;
  }

  Classification out;
  out.mode = "budget";
  out.target_bits = 8.0 * double(target) / double(all_weights);
  out.target_bytes = target;
  out.layers.assign(stats.layers.size(), std::vector<ExpertDecision>(E));
  for (const auto& s : experts) {
    const Option& o = s.hull[s.at];
    ExpertDecision& d = out.layers[s.li][s.e];
    d.format = o.format;
    d.cls = class_of_format(p, o.format);
    char b[200];
    std::snprintf(b, sizeof b, "budget: %s chosen by marginal error per byte (predicted error %.3g)%s",
                  o.format.empty() ? "pruning" : o.format.c_str(), o.error,
                  s.fixed ? "; under-covered: never pruned, error weighted by the layer median" : "");
    d.rule = b;
  }
  return out;
}

}  // namespace eq::profile
