// Captures (`profile --hidden`, `--router-logits`) are validated against the
// model: every MoE layer's tensor holds at least one token and the same tokens
// as the first (before any layer is routed), and every value is finite (as
// each layer is read, before it is routed). Each
// capture here is written by the test for the bundled tinymoe (4 MoE layers,
// hidden_size 128, 32 experts).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/safetensors.h"
#include "profile/run.h"
#include "test_support.h"

namespace eq::profile {
namespace {

constexpr int64_t kLayers = 4, kHidden = 128, kExperts = 32;

// prefix.L [rows[L], cols] of small finite values, F32; `poke` edits them.
std::string write_capture(const std::string& tag, const std::string& prefix, const std::vector<int64_t>& rows,
                          int64_t cols, const std::function<void(int64_t, std::vector<float>&)>& poke = {}) {
  std::vector<std::vector<float>> data;
  std::vector<io::TensorToWrite> tensors;
  for (int64_t l = 0; l < kLayers; ++l) {
    std::vector<float>& v = data.emplace_back(size_t(rows[size_t(l)] * cols));
    for (size_t i = 0; i < v.size(); ++i) v[i] = 0.01f * float(int64_t(i % 37) - 18);
    if (poke) poke(l, v);
  }
  for (int64_t l = 0; l < kLayers; ++l) {
    const auto& v = data[size_t(l)];
    tensors.push_back({prefix + "." + std::to_string(l), DType::kF32, {rows[size_t(l)], cols},
                       {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(float)}});
  }
  const std::string path = (test::temp_dir("capture_" + tag) / "capture.safetensors").string();
  io::write_safetensors(path, tensors);
  return path;
}

std::string error_of(SourceKind kind, const std::string& path) {
  ProfileRequest r;
  r.model_path = (test::data_dir() / "tinymoe").string();
  r.source = kind;
  r.input_path = path;
  r.policy = default_policy();
  r.sensitivity = false;
  try {
    const Profile p = run_profile(r);
    EXPECT_EQ(p.calibration.at(0).tokens, 3);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput) << e.what();
    return e.what();
  }
  return "";
}

TEST(CaptureCheck, ValidCapturesProfile) {
  EXPECT_EQ(error_of(SourceKind::kHidden, write_capture("hidden_ok", "moe_input", {3, 3, 3, 3}, kHidden)), "");
  EXPECT_EQ(error_of(SourceKind::kRouterLogits, write_capture("logits_ok", "router_logits", {3, 3, 3, 3}, kExperts)),
            "");
}

// Finding: NaN/Inf router logits gave an exit-0 profile full of nulls, and a
// NaN in --hidden was blamed on the checkpoint. The capture is named, with
// the tensor and the position.
TEST(CaptureCheck, NonFiniteValuesAreTheCapturesNamedWithTheirPosition) {
  const std::string nan_hidden = write_capture("hidden_nan", "moe_input", {3, 3, 3, 3}, kHidden, [](int64_t l, auto& v) {
    if (l == 2) v[1 * kHidden + 5] = std::numeric_limits<float>::quiet_NaN();
  });
  EXPECT_NE(error_of(SourceKind::kHidden, nan_hidden)
                .find("--hidden " + nan_hidden + ": tensor moe_input.2: value at [1, 5] is NaN (a capture must be finite)"),
            std::string::npos)
      << error_of(SourceKind::kHidden, nan_hidden);
  const std::string inf_logits =
      write_capture("logits_inf", "router_logits", {3, 3, 3, 3}, kExperts, [](int64_t l, auto& v) {
        if (l == 3) v[0 * kExperts + 7] = -std::numeric_limits<float>::infinity();
      });
  EXPECT_NE(error_of(SourceKind::kRouterLogits, inf_logits)
                .find("--router-logits " + inf_logits + ": tensor router_logits.3: value at [0, 7] is infinite"),
            std::string::npos)
      << error_of(SourceKind::kRouterLogits, inf_logits);
}

// Finding: zero-token and mismatched-length captures were accepted.
TEST(CaptureCheck, EveryLayerHoldsTheSameTokensAndAtLeastOne) {
  const std::string shorter = write_capture("hidden_short", "moe_input", {3, 3, 2, 3}, kHidden);
  EXPECT_NE(error_of(SourceKind::kHidden, shorter)
                .find("--hidden " + shorter + ": tensor moe_input.2 holds 2 tokens, moe_input.0 3 (expected shape "
                                              "[tokens, 128] (the model's hidden_size) with the same tokens at every "
                                              "MoE layer)"),
            std::string::npos)
      << error_of(SourceKind::kHidden, shorter);
  const std::string empty = write_capture("hidden_empty", "moe_input", {0, 0, 0, 0}, kHidden);
  EXPECT_NE(error_of(SourceKind::kHidden, empty)
                .find("--hidden " + empty + ": tensor moe_input.0 holds 0 tokens (expected shape [tokens, 128] (the "
                                            "model's hidden_size) with tokens >= 1)"),
            std::string::npos)
      << error_of(SourceKind::kHidden, empty);
  const std::string longer = write_capture("logits_long", "router_logits", {3, 4, 3, 3}, kExperts);
  EXPECT_NE(error_of(SourceKind::kRouterLogits, longer)
                .find("--router-logits " + longer + ": tensor router_logits.1 holds 4 tokens, router_logits.0 3 "
                                                    "(expected shape [tokens, 32] (the model's num_experts)"),
            std::string::npos)
      << error_of(SourceKind::kRouterLogits, longer);
}

}  // namespace
}  // namespace eq::profile
