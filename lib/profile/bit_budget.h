// Bit-budget allocation: choose a format (or pruning) for every expert so the
// total predicted error Σ rel_mse(format) × error weight is minimal under a
// byte budget (--target-bits B over all expert weights, or --target-size).
//
// Greedy on marginal error per byte: every expert starts at its lowest-error
// candidate, then the move with the smallest error increase per byte saved
// (along each expert's lower convex hull of (bytes, error)) is applied until
// the budget holds; a final pass spends any slack on the best upgrades that
// still fit. With E·L experts each moving by at most a few bytes-per-weight
// steps, the achieved average lands within one expert's step of the target.
// Guard rails are honoured: under-covered experts are never pruned and their
// error is weighted by the layer's median expert (a prior, since their own
// measurement rests on too few tokens); pruning respects max_pruned_fraction / max_pruned_usage_share /
// min_kept_experts, and when they change the allocation the classification's
// budget_notes say which and by how much predicted error. max_critical_fraction
// bounds threshold classification only: a budget spends its bytes where they
// lower the predicted error most, critical formats included.
//
// A pack-time limit (max_pack_seconds, with the rates of pack_time.h) is a
// second constraint, priced by a Lagrange multiplier: every option's cost is
// its error + mu × its predicted pack seconds, the byte budget is allocated on
// that cost, and mu is the smallest (bisected, 60 steps) whose allocation's
// predicted pack time fits. mu = 0 when the unpriced allocation already fits,
// so the limit changes nothing then; the result depends only on the
// measurements and the rates.
#pragma once

#include <cstdint>

#include "model/config.h"
#include "profile/classify.h"
#include "profile/pack_time.h"

namespace eq::profile {

struct BitBudget {
  double target_bits = 0;     // average bits per expert weight (scales included, pruned = 0)
  uint64_t target_bytes = 0;  // alternatively: total expert bytes (used when target_bits == 0)
  // A default the user did not ask for (Policy::default_target_bits): below
  // the minimum the guard rails allow, that minimum is allocated (and said in
  // budget_notes) instead of an error.
  bool at_least_minimum = false;
  // At most this predicted pack time (0 = no limit), predicted with `rates`
  // (required then). Throws eq::Error when even the fastest allocation the
  // byte budget allows is predicted slower.
  double max_pack_seconds = 0;
  const PackRates* rates = nullptr;
};

// Throws eq::Error when the budget is below what the guard rails allow or the
// table has no sensitivity measurements.
Classification allocate_bit_budget(const RoutingStats& stats, const SensitivityTable& sens, const Policy& policy,
                                   const model::ModelConfig& c, const BitBudget& budget);

}  // namespace eq::profile
