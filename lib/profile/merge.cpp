#include "profile/merge.h"

#include "profile/lossless_source.h"
#include "profile/policy.h"

namespace eq::profile {

Profile merge_and_classify(const MergeRequest& r) {
  std::vector<Profile> parts;
  for (const auto& f : r.profiles) parts.push_back(read_profile(f));
  Profile p = merge_profiles(parts, r.profiles);
  if (!r.policy_path.empty()) {
    p.policy = load_policy(r.policy_path);
    if (p.policy.lossless_source_formats) adopt_lossless_formats(p.policy, p.lossless_formats);
  }
  if (r.min_tokens >= 0) p.policy.min_tokens = r.min_tokens;
  // Classified by the (possibly new) policy: its default budget or thresholds,
  // unless a budget or thresholds are asked for.
  reclassify(p, r.target_bits, r.target_bytes, r.thresholds, r.max_pack_seconds);
  return p;
}

}  // namespace eq::profile
