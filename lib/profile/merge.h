// Profiles of disjoint calibration slices (profile --slice) merged into the
// profile of the whole, then classified again: by a policy file given now
// (else the parts' policy) and a bit budget or thresholds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profile/profile.h"

namespace eq::profile {

struct MergeRequest {
  std::vector<std::string> profiles;  // the parts' profile.json files
  std::string policy_path;            // "" = the parts' policy
  int64_t min_tokens = -1;            // overrides the policy's min_tokens when >= 0
  // As reclassify(): a budget when either is set, else the policy's default
  // budget or (with thresholds) its thresholds.
  double target_bits = 0;
  uint64_t target_bytes = 0;
  bool thresholds = false;
  double max_pack_seconds = 0;  // > 0: the bit budget's predicted pack time stays under it (reclassify)
};

Profile merge_and_classify(const MergeRequest& request);

}  // namespace eq::profile
