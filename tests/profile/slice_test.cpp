// Calibration slices (profile --slice I/N, --skip-tokens) on the bundled
// tinymoe: disjoint slices of one text merge into the statistics of the whole
// run, each records which tokens of which file it saw, and a merge refuses
// slices that share tokens (the same profile twice, overlapping skips) naming
// both profiles and the token range.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/text_file.h"
#include "profile/run.h"
#include "test_support.h"

namespace eq::profile {
namespace {

ProfileRequest request(int64_t ctx) {
  ProfileRequest r;
  r.model_path = (test::data_dir() / "tinymoe").string();
  r.source = SourceKind::kCalib;
  r.input_path = (test::data_dir() / "corpus" / "calib_small.txt.zst").string();
  r.ctx = ctx;
  r.policy = default_policy();
  r.sensitivity = false;
  return r;
}

// Returns the relative difference it checked.
double expect_near_rel(double a, double b, const char* what, double tolerance) {
  const double rel = std::abs(a - b) / std::max({1.0, std::abs(a), std::abs(b)});
  EXPECT_LE(rel, tolerance) << what << ": " << a << " vs " << b;
  return rel;
}

std::string merge_error(const std::vector<Profile>& parts, const std::vector<std::string>& labels) {
  try {
    merge_profiles(parts, labels);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    return e.what();
  }
  return "";
}

TEST(CalibrationSlices, ThreeSlicesMergeIntoTheWholeRun) {
  // 9,000 bytes of the text, so the last window (of 35 of 256) is short.
  const std::string text = io::read_file_bytes((test::data_dir() / "corpus" / "calib_small.txt.zst").string());
  const auto path = test::temp_dir("slices") / "calib.txt";
  std::ofstream(path, std::ios::binary).write(text.data(), 9000);
  auto request_of_file = [&] {
    ProfileRequest r = request(256);
    r.input_path = path.string();
    return r;
  };
  const Profile whole = run_profile(request_of_file());
  ASSERT_EQ(whole.calibration.size(), 1u);
  const CalibrationSlice& w = whole.calibration[0];
  EXPECT_EQ(w.first_token, 0);
  EXPECT_EQ(w.file_xxh64, w.xxh64);  // the whole file was read
  std::vector<Profile> parts;
  std::vector<std::string> labels;
  int64_t next_token = 0, windows = 0;
  for (int64_t i = 0; i < 3; ++i) {
    ProfileRequest r = request_of_file();
    r.slice_index = i;
    r.slice_count = 3;
    parts.push_back(run_profile(r));
    labels.push_back("slice" + std::to_string(i) + ".json");
    const CalibrationSlice& c = parts.back().calibration[0];
    EXPECT_EQ(c.file_xxh64, w.file_xxh64) << i;
    EXPECT_EQ(c.first_token, next_token) << i;  // contiguous, in file order
    EXPECT_GT(c.tokens, 0) << i;
    next_token += c.tokens;
    windows += c.windows;
  }
  EXPECT_EQ(next_token, w.tokens);
  EXPECT_EQ(w.tokens, 9000);
  EXPECT_EQ(windows, w.windows);
  const Profile merged = merge_profiles(parts, labels);
  ASSERT_EQ(merged.stats.layers.size(), whole.stats.layers.size());
  double worst = 0;
  for (size_t li = 0; li < whole.stats.layers.size(); ++li) {
    const LayerStats &m = merged.stats.layers[li], &x = whole.stats.layers[li];
    EXPECT_EQ(m.tokens, x.tokens);
    for (size_t e = 0; e < x.experts.size(); ++e) {
      EXPECT_EQ(m.experts[e].tokens, x.experts[e].tokens) << "layer " << li << " expert " << e;
      // The forward runs windows in batches of 8: other slices batch other
      // windows together, so the float32 products round differently and the
      // sums differ in the last digits (the printed maximum); the routing
      // itself (the counts) is the same.
      worst = std::max(worst, expect_near_rel(m.experts[e].gate_sum, x.experts[e].gate_sum, "gate_sum", 1e-7));
      worst = std::max(worst,
                       expect_near_rel(m.experts[e].saliency_sum, x.experts[e].saliency_sum, "saliency_sum", 1e-7));
    }
  }
  std::printf("3 slices merged vs one run: counts equal, gate and saliency sums within %.2g relative\n", worst);
}

TEST(CalibrationSlices, MergeRefusesTheSameTokensTwice) {
  ProfileRequest r = request(128);
  r.max_tokens = 512;
  const Profile first = run_profile(r);  // tokens [0, 512)
  // The same profile twice: the example of a silent double count.
  std::string e = merge_error({first, first}, {"a.json", "b.json"});
  EXPECT_NE(e.find("a.json and b.json both hold tokens [0, 512) of "), std::string::npos) << e;
  EXPECT_NE(e.find("calib_small.txt.zst"), std::string::npos) << e;

  // 4,096 more tokens of the same file from token 256: they overlap in [256, 512).
  r.skip_tokens = 256;
  r.max_tokens = 4096;
  const Profile overlapping = run_profile(r);
  EXPECT_EQ(overlapping.calibration[0].first_token, 256);
  EXPECT_EQ(overlapping.calibration[0].file_xxh64, first.calibration[0].file_xxh64);
  e = merge_error({first, overlapping}, {"a.json", "c.json"});
  EXPECT_NE(e.find("a.json and c.json both hold tokens [256, 512) of "), std::string::npos) << e;

  // From token 512 on they are disjoint: the merge holds both.
  r.skip_tokens = 512;
  const Profile after = run_profile(r);
  const Profile merged = merge_profiles({first, after}, {"a.json", "d.json"});
  EXPECT_EQ(merged.stats.layers[0].tokens, 512 + 4096);
  ASSERT_EQ(merged.calibration.size(), 2u);
}

TEST(CalibrationSlices, SkipMustEndOnAWindowBoundaryAndSlicesMustExist) {
  ProfileRequest r = request(128);
  r.skip_tokens = 200;
  try {
    run_profile(r);
    ADD_FAILURE() << "a skip inside a window was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--skip-tokens 200: falls inside a window of 128 tokens (the windows "
                                         "around it start at token 128 and 256)"),
              std::string::npos)
        << e.what();
  }
  r.skip_tokens = 0;
  r.slice_index = 3;
  r.slice_count = 3;
  EXPECT_THROW(run_profile(r), Error);
  r.slice_index = 0;
  r.slice_count = 2;
  r.source = SourceKind::kRouterLogits;
  EXPECT_THROW(run_profile(r), Error);
}

// Profiles written before slices lack file_xxh64 and first_token: two of them
// from the same path both started at token 0, so they overlap.
TEST(CalibrationSlices, OldProfilesOfTheSamePathOverlap) {
  CalibrationSlice a;
  a.kind = "text";
  a.path = "calib.txt";
  a.xxh64 = "1111111111111111";
  a.tokens = 4096;
  CalibrationSlice b = a;
  b.xxh64 = "2222222222222222";  // --max-tokens 8192: other bytes read
  b.tokens = 8192;
  EXPECT_NE(overlapping_slices({a, b}, {"old1.json", "old2.json"}).find("both hold tokens [0, 4096) of calib.txt"),
            std::string::npos);
  b.path = "other.txt";
  EXPECT_EQ(overlapping_slices({a, b}, {"old1.json", "old2.json"}), "");
}

}  // namespace
}  // namespace eq::profile
