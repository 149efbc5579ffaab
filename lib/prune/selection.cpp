#include "prune/selection.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.h"
#include "profile/classify.h"
#include "profile/profile.h"

namespace eq::prune {

std::string_view rank_by_name(RankBy r) {
  switch (r) {
    case RankBy::kReap:
      return "reap";
    case RankBy::kUsage:
      return "usage";
    case RankBy::kRandom:
      return "random";
  }
  return "?";
}

RankBy parse_rank_by(std::string_view text, const std::string& option) {
  if (text == "reap") return RankBy::kReap;
  if (text == "usage") return RankBy::kUsage;
  if (text == "random") return RankBy::kRandom;
  invalid(option + ": '" + std::string(text) + "' is not a ranking (reap, usage, random)");
}

namespace {

// The experts of one router group, [first, first + size).
struct Group {
  int64_t first = 0, size = 0;
};

std::vector<Group> router_groups(const model::ModelConfig& c) {
  const int64_t n = std::max<int64_t>(1, c.router_groups);
  std::vector<Group> g;
  for (int64_t i = 0; i < n; ++i) g.push_back({i * (c.num_experts / n), c.num_experts / n});
  return g;
}

// The number of experts to remove from each layer, from the count options.
int64_t removed_per_layer(const model::ModelConfig& c, const SelectionOptions& o) {
  const int64_t E = c.num_experts;
  if (o.prune_fraction && o.keep_experts) invalid("export: give --prune-fraction or --keep-experts, not both");
  if (o.prune_fraction) {
    const double f = *o.prune_fraction;
    if (!(f >= 0 && f < 1)) invalid("--prune-fraction: " + std::to_string(f) + " is outside [0, 1)");
    // floor(F × experts) removed: a fraction never removes more than asked.
    return static_cast<int64_t>(std::floor(f * static_cast<double>(E) + 1e-9));
  }
  const int64_t keep = *o.keep_experts;
  if (keep < 1 || keep > E)
    invalid("--keep-experts: " + std::to_string(keep) + " is outside [1, " + std::to_string(E) +
            "] (the layers have " + std::to_string(E) + " experts)");
  return E - keep;
}

void check_count(const model::ModelConfig& c, int64_t removed, const std::string& source) {
  const int64_t keep = c.num_experts - removed;
  if (keep < c.top_k)
    invalid(source + ": each layer would keep " + std::to_string(keep) + " of " + std::to_string(c.num_experts) +
            " experts, fewer than num_experts_per_tok (" + std::to_string(c.top_k) + ")");
  const int64_t groups = std::max<int64_t>(1, c.router_groups);
  if (groups == 1) return;
  if (removed % groups != 0)
    invalid(source + ": " + std::to_string(removed) + " experts removed per layer is not a multiple of the " +
            std::to_string(groups) + " router groups (n_group); every group must lose the same number");
  if (c.num_experts / groups - removed / groups < 2)
    invalid(source + ": each router group would keep " + std::to_string(c.num_experts / groups - removed / groups) +
            " expert(s); a group needs 2 (its score sums its two best experts)");
}

// Removes the `count` lowest-ranked experts of [g.first, g.first + g.size):
// by `primary`, then `secondary`, then the higher id first.
void drop_lowest(const Group& g, int64_t count, const std::vector<double>& primary, const std::vector<double>& secondary,
                 std::vector<char>& drop) {
  std::vector<int64_t> ids;
  for (int64_t e = g.first; e < g.first + g.size; ++e) ids.push_back(e);
  std::sort(ids.begin(), ids.end(), [&](int64_t a, int64_t b) {
    if (primary[a] != primary[b]) return primary[a] < primary[b];
    if (secondary[a] != secondary[b]) return secondary[a] < secondary[b];
    return a > b;
  });
  for (int64_t i = 0; i < count; ++i) drop[ids[i]] = 1;
}

// A uniform value in [0, 1) per (seed, layer, expert): splitmix64.
double random_rank(uint64_t seed, int64_t layer, int64_t expert) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (static_cast<uint64_t>(layer) * 65537u + static_cast<uint64_t>(expert) + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

}  // namespace

Selection select_experts(const model::ModelConfig& c, const profile::Profile& p, const SelectionOptions& o,
                         const std::string& profile_label) {
  const profile::RoutingStats& stats = p.stats;
  const int64_t E = c.num_experts;
  if (stats.num_experts != E)
    invalid(profile_label + ": has " + std::to_string(stats.num_experts) + " experts per layer, the checkpoint " +
            std::to_string(E));
  const auto metrics = profile::expert_metrics(stats, p.policy);
  const std::vector<Group> groups = router_groups(c);
  Selection s;
  s.experts_before = E;
  s.top_k = c.top_k;
  const bool by_count = o.prune_fraction || o.keep_experts;
  int64_t removed = -1;
  if (by_count) {
    removed = removed_per_layer(c, o);
    check_count(c, removed, o.prune_fraction ? "--prune-fraction" : "--keep-experts");
    s.rule = std::string(rank_by_name(o.rank_by));
  } else {
    s.rule = "profile";
  }
  for (int64_t l = 0; l < c.num_layers; ++l) {
    if (!c.layer_is_moe[static_cast<size_t>(l)]) continue;
    const auto it = std::find_if(stats.layers.begin(), stats.layers.end(),
                                 [&](const profile::LayerStats& ls) { return ls.layer == l; });
    if (it == stats.layers.end()) invalid(profile_label + ": has no statistics for MoE layer " + std::to_string(l));
    const size_t li = static_cast<size_t>(it - stats.layers.begin());
    const auto& m = metrics[li];
    std::vector<double> reap(E), usage(E);
    double reap_total = 0;
    for (int64_t e = 0; e < E; ++e) {
      reap[e] = m[e].reap;
      usage[e] = m[e].share;
      reap_total += m[e].reap;
    }
    std::vector<char> drop(E, 0);
    if (by_count) {
      const int64_t per_group = removed / static_cast<int64_t>(groups.size());
      std::vector<double> random(E);
      for (int64_t e = 0; e < E; ++e) random[e] = random_rank(o.seed, l, e);
      for (const Group& g : groups)
        if (o.rank_by == RankBy::kReap)
          drop_lowest(g, per_group, reap, usage, drop);
        else if (o.rank_by == RankBy::kUsage)
          drop_lowest(g, per_group, usage, reap, drop);
        else
          drop_lowest(g, per_group, random, random, drop);
    } else {
      if (li >= p.classification.layers.size())
        invalid(profile_label + ": has no classification for MoE layer " + std::to_string(l));
      const auto& decisions = p.classification.layers[li];
      for (int64_t e = 0; e < E; ++e) drop[e] = decisions[static_cast<size_t>(e)].cls == plan::ExpertClass::kPruned;
      std::map<int64_t, int64_t> per_group;  // removed count per group, for the check below
      int64_t n = 0;
      for (const Group& g : groups) {
        int64_t k = 0;
        for (int64_t e = g.first; e < g.first + g.size; ++e) k += drop[e];
        per_group[k] += 1;
        n += k;
      }
      if (removed < 0) removed = n;
      if (n != removed)
        invalid(profile_label + ": its pruned class removes " + std::to_string(n) + " experts in layer " +
                std::to_string(l) + " and " + std::to_string(removed) +
                " in an earlier one; a checkpoint needs one expert count (give --prune-fraction or --keep-experts)");
      if (per_group.size() > 1)
        invalid(profile_label + ": its pruned class removes different numbers from the router groups of layer " +
                std::to_string(l) + " (n_group " + std::to_string(groups.size()) +
                "); give --prune-fraction or --keep-experts");
    }
    LayerChoice lc;
    lc.layer = l;
    double usage_dropped = 0, reap_dropped = 0;
    for (int64_t e = 0; e < E; ++e) {
      (drop[e] ? lc.dropped : lc.kept).push_back(e);
      if (drop[e]) {
        usage_dropped += usage[e];
        reap_dropped += reap[e];
      }
    }
    lc.dropped_usage_share = usage_dropped;
    lc.dropped_reap_share = reap_total > 0 ? reap_dropped / reap_total : 0.0;
    s.layers.push_back(std::move(lc));
  }
  if (!by_count) {
    if (removed <= 0)
      invalid(profile_label + ": its classification prunes no expert; give --prune-fraction or --keep-experts");
    check_count(c, removed, profile_label + " (its pruned class)");
  }
  s.experts_after = E - std::max<int64_t>(removed, 0);
  return s;
}

}  // namespace eq::prune
