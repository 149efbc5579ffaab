// The profile request the tests on tiny random models share: the bundled small
// calibration text, 256 tokens in windows of 128, under-covered below 8
// tokens. The caller sets the policy (and thresholds) it tests.
#pragma once

#include <filesystem>
#include <string>

#include "profile/policy.h"
#include "profile/run.h"
#include "support/random_moe.h"
#include "test_support.h"

namespace eq::test {

inline profile::ProfileRequest small_profile_request(const std::filesystem::path& model) {
  profile::ProfileRequest r;
  r.model_path = model.string();
  r.input_path = (data_dir() / "corpus" / "calib_small.txt.zst").string();
  r.max_tokens = 256;
  r.ctx = 128;
  r.min_tokens = 8;
  return r;
}

// A random model of `layers` x `experts` experts of 64 x 64 (written under
// temp_dir(name)), profiled with the default policy on the small request. The
// trellis proxies are not calibrated: the allocation is under test, not the fit.
inline profile::Profile default_policy_profile(const std::string& name, int64_t experts, int64_t layers = 2) {
  RandomMoeSpec spec;
  spec.hidden = 64;
  spec.intermediate = 64;
  spec.experts = experts;
  spec.layers = layers;
  const auto model = write_random_moe(temp_dir(name) / "model", spec);
  profile::ProfileRequest r = small_profile_request(model);
  r.policy = profile::default_policy();
  r.policy.proxy_calibration_experts = 0;
  return profile::run_profile(r);
}

}  // namespace eq::test
