// The MXFP4 release of gpt_oss-small (shared): the profile finds mxfp4 lossless
// for every routed expert, makes it the standard class and first candidate,
// measures it at exactly 0 where the other formats cost something, and the
// default budget then keeps every expert in it (4.25 bits, no error); the bf16
// twin has no lossless format and keeps the policy's own.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "plan/allocation.h"
#include "profile/run.h"
#include "test_support.h"

namespace eq::profile {
namespace {

ProfileRequest request(const std::string& model) {
  ProfileRequest r;
  r.model_path = (test::shared_dir() / "models" / model).string();
  r.input_path = (test::shared_dir() / "corpus" / "calib_mixed.txt").string();
  r.max_tokens = 1024;
  r.ctx = 256;
  r.policy = default_policy();
  // The adoption is under test, not trellis: measure two cheap formats besides
  // (fp4_g32 measures 0 too on these experts: its fp16 scales hold every
  // MXFP4 power-of-two block scale, so it also round-trips them exactly).
  r.policy.candidates = {"int8_row", "fp4_g32"};
  r.policy.class_format[2] = "fp4_g32";
  r.policy.proxies.clear();
  return r;
}

TEST(LosslessSource, Mxfp4ReleaseIsStandardAtZeroErrorAndTheDefaultBudgetKeepsIt) {
  EQ_REQUIRE_SHARED();
  const Profile p = run_profile(request("gpt_oss-small-mxfp4"));
  ASSERT_EQ(p.lossless_formats, std::vector<std::string>{"mxfp4"});
  EXPECT_EQ(p.policy.class_format[static_cast<int>(plan::ExpertClass::kStandard)], "mxfp4");
  ASSERT_FALSE(p.policy.candidates.empty());
  EXPECT_EQ(p.policy.candidates.front(), "mxfp4");
  const int mx = p.sensitivity.index_of("mxfp4"), i8 = p.sensitivity.index_of("int8_row");
  ASSERT_GE(mx, 0);
  ASSERT_GE(i8, 0);
  int64_t measured = 0;
  for (const auto& row : p.sensitivity.layers)
    for (const auto& s : row) {
      if (s.source == SampleSource::kNone) continue;
      ++measured;
      EXPECT_EQ(s.rel_mse[mx], 0.0);
      // int8 of the dequantized values only adds rounding (docs/policy.md, "Quantized sources").
      EXPECT_GT(s.rel_mse[i8], 0.0);
    }
  EXPECT_GT(measured, 0);
  // The default budget (4.5 bits) starts every expert at its least error: mxfp4, 4.25 bits.
  EXPECT_EQ(p.classification.mode, "budget");
  EXPECT_NEAR(p.classification.avg_bits, 4.25, 1e-9);
  for (const auto& row : p.classification.layers)
    for (const auto& d : row) EXPECT_EQ(d.format, "mxfp4");

  const Profile bf16 = run_profile(request("gpt_oss-small"));
  EXPECT_TRUE(bf16.lossless_formats.empty());
  EXPECT_EQ(bf16.policy.class_format[static_cast<int>(plan::ExpertClass::kStandard)], "fp4_g32");
  EXPECT_LT(bf16.sensitivity.index_of("mxfp4"), 0);
}

}  // namespace
}  // namespace eq::profile
