// The profile request the tests on tiny random models share: the bundled small
// calibration text, 256 tokens in windows of 128, under-covered below 8
// tokens. The caller sets the policy (and thresholds) it tests.
#pragma once

#include <filesystem>

#include "profile/run.h"
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

}  // namespace eq::test
