#include "profile/bit_budget.h"

#include <algorithm>
#include <cmath>
#include <queue>
#include <vector>

#include "core/error.h"
#include "profile/candidate_fit.h"
#include "quant/format.h"

namespace eq::profile {

using plan::ExpertClass;

namespace {

struct Option {
  std::string format;  // "" = pruned
  uint64_t bytes = 0;
  double error = 0;
  double seconds = 0;  // predicted pack time (0 without a time limit)
  double cost = 0;     // what the allocation minimizes: error + mu × seconds
};

struct ExpertState {
  size_t li = 0;
  int64_t e = 0;
  std::vector<Option> formats;  // every option but pruning
  std::vector<Option> hull;  // lower convex hull, bytes descending, cost ascending
  size_t at = 0;             // current position on the hull
  bool fixed = false;  // under-covered
};

// Lower convex hull of the options, from the lowest-cost one down to the
// cheapest in bytes, keeping only points where saving bytes costs the least.
std::vector<Option> lower_hull(std::vector<Option> opts) {
  std::sort(opts.begin(), opts.end(), [](const Option& a, const Option& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.cost < b.cost;
  });
  // Start from the minimum-cost option (fewest bytes among equals).
  size_t start = 0;
  for (size_t i = 1; i < opts.size(); ++i)
    if (opts[i].cost <= opts[start].cost) start = i;
  std::vector<Option> hull{opts[start]};
  size_t cur = start;
  while (true) {
    size_t best = opts.size();
    double best_slope = 0;
    for (size_t i = cur + 1; i < opts.size(); ++i) {
      if (opts[i].bytes >= opts[cur].bytes) continue;
      const double slope = (opts[i].cost - opts[cur].cost) / double(opts[cur].bytes - opts[i].bytes);
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
  double slope;  // cost added per byte saved
  size_t expert;
  size_t from;
  bool operator>(const Move& o) const { return slope != o.slope ? slope > o.slope : expert > o.expert; }
};

// What the budget and the guard rails allow, for the whole model.
struct Limits {
  int64_t num_experts = 0, max_pruned = 0, kept_floor = 0;
  uint64_t all_weights = 0, target = 0;  // expert weights; the byte budget
  bool at_least_minimum = false;          // BitBudget::at_least_minimum
  const PackRates* rates = nullptr;       // BitBudget::rates, when a pack-time limit is set
  double mu = 0;                          // the price of one second of pack time, in error
};

// The search: every expert's hull and position, the running byte total and
// the per-layer counts the guard rails bound.
struct Search {
  std::vector<ExpertState> experts;
  uint64_t total = 0;
  std::vector<int64_t> pruned;  // per layer index
};

Limits budget_limits(const RoutingStats& stats, const Policy& p, const model::ModelConfig& c, const BitBudget& budget) {
  Limits l;
  l.num_experts = stats.num_experts;
  const uint64_t weights_per_expert = uint64_t(3 * c.hidden_size * c.moe_intermediate_size);
  l.all_weights = weights_per_expert * uint64_t(l.num_experts) * stats.layers.size();
  l.target = budget.target_bits > 0 ? uint64_t(std::llround(budget.target_bits * double(l.all_weights) / 8.0))
                                    : budget.target_bytes;
  if (l.target == 0) invalid("bit budget: --target-bits or --target-size must be positive");
  l.at_least_minimum = budget.at_least_minimum;
  if (budget.max_pack_seconds > 0) {
    if (budget.rates == nullptr || budget.rates->empty())
      fail(ErrorKind::kInternal, "bit budget: a pack-time limit without quantize rates");
    l.rates = budget.rates;
  }
  l.max_pruned = int64_t(std::floor(p.max_pruned_fraction * double(l.num_experts) + 1e-9));
  l.kept_floor = p.kept_floor(stats.top_k);
  return l;
}

// The error weight under-covered experts are budgeted with: the layer's median
// over covered experts (1/E when none is covered).
std::vector<double> median_error_weights(const std::vector<std::vector<ExpertMetrics>>& metrics, int64_t E) {
  std::vector<double> prior(metrics.size(), 0.0);
  for (size_t li = 0; li < metrics.size(); ++li) {
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
  return prior;
}

// The measured formats that are the policy's candidates and that the expert
// matrices can take (candidate_fit.h): the only ones the allocator chooses
// among (a profile re-classified with another policy keeps its measurements
// of formats that policy does not name).
std::vector<std::string> usable_formats(const SensitivityTable& sens, const Policy& p, const model::ModelConfig& c) {
  std::vector<std::string> usable;
  std::string all;
  for (const auto& f : sens.formats) {
    all += (all.empty() ? "" : ", ") + f;
    if (std::find(p.candidates.begin(), p.candidates.end(), f) == p.candidates.end()) continue;
    if (fits_experts(f, c.hidden_size, c.moe_intermediate_size)) usable.push_back(f);
  }
  if (usable.empty())
    invalid("bit budget: none of the measured formats (" + all + ") is a candidate of the policy that fits the expert matrices");
  return usable;
}

// Every expert's options (each usable format, and pruning where the guard
// rails can allow it) reduced to their lower convex hull; each starts at its
// lowest-error point.
Search expert_hulls(const RoutingStats& stats, const SensitivityTable& sens, const Policy& p,
                    const model::ModelConfig& c, const Limits& l) {
  const auto metrics = expert_metrics(stats, p);
  const std::vector<double> prior = median_error_weights(metrics, l.num_experts);
  const std::vector<std::string> formats = usable_formats(sens, p, c);
  Search s;
  for (size_t li = 0; li < stats.layers.size(); ++li)
    for (int64_t e = 0; e < l.num_experts; ++e) {
      ExpertState x;
      x.li = li;
      x.e = e;
      const ExpertMetrics& m = metrics[li][e];
      const ExpertSensitivity& es = sens.layers[li][e];
      std::vector<Option> opts;
      // Under-covered experts are budgeted like the others but never pruned,
      // and their error weight is the layer's median (a prior), not their own
      // near-zero measurement: too few tokens to call them unimportant.
      ExpertMetrics mm = m;
      if (m.under_covered) {
        mm.error_weight = prior[li];
        x.fixed = true;
      }
      for (const auto& f : formats) {
        const double err = expert_error(mm, &es, sens, f), sec = l.rates ? l.rates->expert_seconds(c, f) : 0.0;
        opts.push_back({f, expert_bytes(c, f), err, sec, err + l.mu * sec});
      }
      x.formats = opts;
      if (!m.under_covered && m.share <= p.max_pruned_usage_share && l.max_pruned > 0 &&
          l.num_experts - 1 >= l.kept_floor) {
        const double err = expert_error(m, &es, sens, "");
        opts.push_back({"", 0, err, 0.0, err});
      }
      x.hull = lower_hull(std::move(opts));
      s.experts.push_back(std::move(x));
    }
  s.pruned.assign(stats.layers.size(), 0);
  for (const auto& x : s.experts) s.total += x.hull[x.at].bytes;
  return s;
}

// Phase 1: downgrade (least error added per byte saved first) until the budget holds.
void downgrade_to_budget(Search& s, const Limits& l) {
  auto slope_of = [&](const ExpertState& x) {
    const Option &a = x.hull[x.at], &b = x.hull[x.at + 1];
    return (b.cost - a.cost) / double(a.bytes - b.bytes);
  };
  std::priority_queue<Move, std::vector<Move>, std::greater<Move>> heap;
  for (size_t i = 0; i < s.experts.size(); ++i)
    if (s.experts[i].hull.size() > 1) heap.push({slope_of(s.experts[i]), i, 0});
  while (s.total > l.target && !heap.empty()) {
    const Move mv = heap.top();
    heap.pop();
    ExpertState& x = s.experts[mv.expert];
    if (x.at != mv.from) continue;  // stale
    const Option& next = x.hull[x.at + 1];
    const bool prune_blocked = s.pruned[x.li] + 1 > l.max_pruned || l.num_experts - s.pruned[x.li] - 1 < l.kept_floor;
    if (next.format.empty() && prune_blocked) {
      // A guard rail blocks pruning: the expert goes on along the hull of its
      // formats alone, whose cheaper points the pruning point had hidden (a
      // 2-bit format above the chord from 2.5 bits to pruning).
      const std::string here = x.hull[x.at].format;
      x.hull = lower_hull(x.formats);
      x.at = 0;
      while (x.at + 1 < x.hull.size() && x.hull[x.at].format != here) ++x.at;
      if (x.hull[x.at].format != here) fail(ErrorKind::kInternal, "bit budget: the hull without pruning lost " + here);
      if (x.at + 1 < x.hull.size()) heap.push({slope_of(x), mv.expert, x.at});
      continue;
    }
    s.total -= x.hull[x.at].bytes - next.bytes;
    s.pruned[x.li] += next.format.empty();
    ++x.at;
    if (x.at + 1 < x.hull.size()) heap.push({slope_of(x), mv.expert, x.at});
  }
  if (s.total > l.target && !l.at_least_minimum) {
    invalid("bit budget: target " + std::to_string(8.0 * double(l.target) / double(l.all_weights)) +
            " bits per expert weight is below the minimum the policy's guard rails allow (" +
            std::to_string(8.0 * double(s.total) / double(l.all_weights)) + ")");
  }
}

// Phase 2: spend the slack on upgrades (largest error reduction per byte that fits).
void spend_slack(Search& s, const Limits& l) {
  for (;;) {
    size_t best = s.experts.size(), best_pos = 0;
    double best_gain = 0;
    for (size_t i = 0; i < s.experts.size(); ++i) {
      const ExpertState& x = s.experts[i];
      for (size_t k = 0; k < x.at; ++k) {
        const Option &cur = x.hull[x.at], &up = x.hull[k];
        const uint64_t extra = up.bytes - cur.bytes;
        if (s.total + extra > l.target) continue;
        const double gain = (cur.cost - up.cost) / double(std::max<uint64_t>(1, extra));
        if (gain > best_gain) best = i, best_pos = k, best_gain = gain;
      }
    }
    if (best == s.experts.size()) break;
    ExpertState& x = s.experts[best];
    s.total += x.hull[best_pos].bytes - x.hull[x.at].bytes;
    s.pruned[x.li] -= x.hull[x.at].format.empty();
    x.at = best_pos;
  }
}

Classification decisions(const Search& s, const Policy& p, const Limits& l, size_t layers) {
  Classification out;
  out.mode = "budget";
  out.target_bits = 8.0 * double(l.target) / double(l.all_weights);
  out.target_bytes = l.target;
  out.layers.assign(layers, std::vector<ExpertDecision>(l.num_experts));
  for (const auto& x : s.experts) {
    const Option& o = x.hull[x.at];
    ExpertDecision& d = out.layers[x.li][x.e];
    d.format = o.format;
    d.cls = class_of_format(p, o.format);
    char b[200];
    std::snprintf(b, sizeof b, "budget: %s chosen by marginal error per byte%s (predicted error %.3g)%s",
                  o.format.empty() ? "pruning" : o.format.c_str(), l.mu > 0 ? " within the pack-time limit" : "",
                  o.error, x.fixed ? "; under-covered: never pruned, error weighted by the layer median" : "");
    d.rule = b;
  }
  return out;
}

// The allocation under limits `l`: downgrade until the budget holds, then
// spend the slack.
Search allocate(const RoutingStats& stats, const SensitivityTable& sens, const Policy& p, const model::ModelConfig& c,
                const Limits& l) {
  Search s = expert_hulls(stats, sens, p, c, l);
  downgrade_to_budget(s, l);
  spend_slack(s, l);
  return s;
}

double predicted_sum(const Search& s) {
  double sum = 0;
  for (const auto& x : s.experts) sum += x.hull[x.at].error;
  return sum;
}

// The allocation's predicted pack time, as pack schedules it (groups per
// layer and format; profile/pack_time.h). The per-expert seconds of the
// options are only the price of time in the allocation's cost.
double pack_seconds(const Search& s, const model::ModelConfig& c, const Limits& l) {
  std::vector<std::pair<size_t, std::string>> layer_formats;
  layer_formats.reserve(s.experts.size());
  for (const auto& x : s.experts) layer_formats.emplace_back(x.li, x.hull[x.at].format);
  return predicted_pack_seconds(layer_formats, c, *l.rates);
}

// The allocation within a pack-time limit: the smallest price of time `mu`
// whose allocation fits (l.mu is set to it). Its pack time falls as mu grows
// (every step of the bisection keeps a fitting upper end), and the search
// starts from a price on the scale of the unpriced allocation's error per
// second.
Search allocate_within_time(const RoutingStats& stats, const SensitivityTable& sens, const Policy& p,
                            const model::ModelConfig& c, Limits& l, double max_seconds) {
  l.mu = 0;
  Search s = allocate(stats, sens, p, c, l);
  const double unpriced = pack_seconds(s, c, l);
  if (unpriced <= max_seconds) return s;
  const double scale = predicted_sum(s) > 0 ? predicted_sum(s) / unpriced : 1.0 / unpriced;
  double lo = 0, hi = scale * 1e-6;
  for (;;) {
    l.mu = hi;
    if (pack_seconds(allocate(stats, sens, p, c, l), c, l) <= max_seconds) break;
    lo = hi;
    hi *= 8;
    if (hi > scale * 1e12) {
      char b[300];
      std::snprintf(b, sizeof b,
                    "bit budget: the pack-time limit of %.3g s is below the fastest allocation the byte budget "
                    "allows (predicted %.3g s on %d thread(s))",
                    max_seconds, pack_seconds(allocate(stats, sens, p, c, l), c, l), l.rates->threads);
      invalid(b);
    }
  }
  for (int step = 0; step < 60 && hi > lo * (1 + 1e-9); ++step) {
    const double mid = lo > 0 ? std::sqrt(lo * hi) : hi / 8;
    l.mu = mid;
    if (pack_seconds(allocate(stats, sens, p, c, l), c, l) <= max_seconds) hi = mid;
    else lo = mid;
  }
  l.mu = hi;
  return allocate(stats, sens, p, c, l);
}

// Whether the pruning guard rails changed the allocation, and by how much: the
// same budget is allocated without them (under-covered experts stay unpruned
// and every layer keeps top_k, without which it cannot route) and compared.
// A rail never changes an explicit budget silently: the summary prints this.
std::vector<std::string> rails_that_bound(const RoutingStats& stats, const SensitivityTable& sens, const Policy& p,
                                          const model::ModelConfig& c, const Limits& l, const Search& railed) {
  Policy open = p;
  open.max_pruned_fraction = 1.0;
  open.max_pruned_usage_share = 1.0;
  open.min_kept_experts = 0;
  // The same bytes as the railed allocation (above the target only when a
  // default budget was below the railed minimum).
  Limits ol = budget_limits(stats, open, c, BitBudget{0, std::max(l.target, railed.total), true});
  ol.rates = l.rates;  // the same price of pack time
  ol.mu = l.mu;
  const Search free = allocate(stats, sens, open, c, ol);
  // A ratio of the allocator's own objective (under-covered experts weighted
  // by their layer's median), so no second absolute figure beside the summary's.
  const double with = predicted_sum(railed), without = predicted_sum(free);
  if (!(without < with * (1.0 - 1e-9))) return {};
  const auto metrics = expert_metrics(stats, p);
  int64_t over_fraction = 0, over_share = 0, under_kept = 0, pruned_free = 0, pruned_railed = 0;
  for (size_t li = 0; li < free.pruned.size(); ++li) {
    over_fraction += std::max<int64_t>(0, free.pruned[li] - l.max_pruned);
    under_kept += l.num_experts - free.pruned[li] < l.kept_floor;
    pruned_free += free.pruned[li];
    pruned_railed += railed.pruned[li];
  }
  for (const auto& x : free.experts)
    over_share += x.hull[x.at].format.empty() && metrics[x.li][size_t(x.e)].share > p.max_pruned_usage_share;
  std::string rails;
  auto name = [&](bool bound, const char* rail) {
    if (bound) rails += (rails.empty() ? "" : ", ") + std::string(rail);
  };
  name(over_fraction > 0, "max_pruned_fraction");
  name(over_share > 0, "max_pruned_usage_share");
  name(under_kept > 0, "min_kept_experts");
  char b[400];
  std::snprintf(b, sizeof b,
                "guard rails bound the budget (%s): %lld experts pruned where %lld would be without them; predicted "
                "error %.1f%% above the same budget without them",
                rails.empty() ? "pruning" : rails.c_str(), (long long)pruned_railed, (long long)pruned_free,
                100.0 * (with / without - 1.0));
  return {b};
}

}  // namespace

Classification allocate_bit_budget(const RoutingStats& stats, const SensitivityTable& sens, const Policy& policy,
                                   const model::ModelConfig& c, const BitBudget& budget) {
  if (sens.empty()) invalid("bit budget: the profile has no sensitivity table (a --router-logits source cannot be budgeted)");
  // The classes of the chosen formats are those of the policy as the experts
  // can take it.
  const Policy p = fit_policy(policy, c.hidden_size, c.moe_intermediate_size).policy;
  Limits l = budget_limits(stats, p, c, budget);
  const Search s = budget.max_pack_seconds > 0 ? allocate_within_time(stats, sens, p, c, l, budget.max_pack_seconds)
                                               : allocate(stats, sens, p, c, l);
  Classification out = decisions(s, p, l, stats.layers.size());
  out.budget_notes = rails_that_bound(stats, sens, p, c, l, s);
  if (s.total > l.target)  // only with at_least_minimum
    out.budget_notes.insert(out.budget_notes.begin(),
                            "budget: " + std::to_string(8.0 * double(l.target) / double(l.all_weights)) +
                                " bits per expert weight is below the minimum the guard rails allow; allocated at that minimum, " +
                                std::to_string(8.0 * double(s.total) / double(l.all_weights)));
  return out;
}

}  // namespace eq::profile
