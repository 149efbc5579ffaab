// Which routed experts an export removes from each MoE layer (docs/prune.md).
// Every layer keeps the same number of experts: the stock runtimes read one
// expert count for the whole model. The experts ranked lowest by the
// profile's saliency go (REAP: the mean over routed tokens of gate × ‖expert
// output‖₂; or usage: the share of the layer's routed slots), or the experts
// the profile itself classed `pruned` when it prunes the same number in every
// layer. Survivors keep their order and are renumbered 0..kept-1.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/config.h"

namespace eq::profile {
struct Profile;
}

namespace eq::prune {

// kRandom: a seeded shuffle per layer, the baseline a saliency must beat.
enum class RankBy : uint8_t { kReap, kUsage, kRandom };
std::string_view rank_by_name(RankBy r);
// "reap", "usage" or "random"; anything else is invalid, naming `option`.
RankBy parse_rank_by(std::string_view text, const std::string& option);

struct SelectionOptions {
  std::optional<double> prune_fraction;  // remove floor(F × experts) per layer, 0 <= F < 1
  std::optional<int64_t> keep_experts;   // keep this many per layer
  RankBy rank_by = RankBy::kReap;
  uint64_t seed = 0;  // kRandom
};

// What one MoE layer keeps.
struct LayerChoice {
  int64_t layer = 0;
  std::vector<int64_t> kept;     // source expert ids, ascending: kept[i] becomes expert i
  std::vector<int64_t> dropped;  // source expert ids, ascending
  // Of the layer's calibration: the share of routed slots and of the summed
  // REAP score that went to the dropped experts.
  double dropped_usage_share = 0, dropped_reap_share = 0;
};

struct Selection {
  // "reap", "usage", "random" or "profile" (the profile's pruned class).
  std::string rule;
  int64_t experts_before = 0, experts_after = 0, top_k = 0;
  std::vector<LayerChoice> layers;  // the MoE layers, ascending
};

// The experts to keep in every MoE layer of `c` (the checkpoint `p` was
// profiled from). With neither count option, the profile's pruned class.
// Invalid (exit 2, naming the option or the profile) when: both options are
// given; the fraction is outside [0, 1) or the count outside [top_k, experts];
// a layer would keep fewer than top_k (num_experts_per_tok) experts; with
// grouped routing (n_group > 1) the removed count is not a multiple of
// n_group or a group would keep fewer than 2 experts (the group score sums a
// group's two best); the profile's pruned class removes different numbers in
// different layers (or per group), or none.
Selection select_experts(const model::ModelConfig& c, const profile::Profile& p, const SelectionOptions& o,
                         const std::string& profile_label);

}  // namespace eq::prune
