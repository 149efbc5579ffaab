// The layer-major calibration pass (every window through layer l before
// layer l+1) gives the profile of the window-major pass bit for bit, on the
// shared models: every statistic, sample and sensitivity figure, compared as
// the bytes of profile.json with the timings zeroed. The spilled hidden
// states (a bound of one byte) give the same bytes again.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "core/build_info.h"
#include "profile/profile.h"
#include "profile/run.h"
#include "test_support.h"

namespace eq::profile {
namespace {

// A few windows of two lengths (full windows in batches of 2 and 1, and a
// shorter tail), with sensitivity measured.
ProfileRequest small_request(const std::string& model_name, model::PassOrder order, uint64_t hidden_memory,
                             bool sensitivity) {
  ProfileRequest r;
  r.model_path = (test::shared_dir() / "models" / model_name).string();
  r.source = SourceKind::kCalib;
  r.input_path = (test::shared_dir() / "corpus/calib_mixed.txt").string();
  r.ctx = 48;
  r.max_tokens = 3 * 48 + 17;
  r.batch_windows = 2;
  r.policy = default_policy();
  // Fast formats only (the sensitivity code is the same for any), one of them
  // proxied so the proxy fit is compared too.
  r.policy.class_format[0] = "int8_row";
  r.policy.class_format[1] = "int4_g64";
  r.policy.class_format[2] = "int2_g64";
  r.policy.candidates = {"int8_row", "int4_g64", "int2_g64", "int3_g64"};
  r.policy.proxies = {{"int3_g64", "int2_g64"}};
  r.policy.proxy_calibration_experts = 4;
  r.policy.max_samples = 24;
  r.policy.min_samples = 4;
  r.sensitivity = sensitivity;
  r.pass_order = order;
  r.hidden_memory = hidden_memory;
  r.spill_dir = test::temp_dir("pass_order").string();
  return r;
}

std::string profile_bytes(Profile p) {
  p.seconds_pass = p.seconds_sensitivity = 0;
  for (auto& c : p.calibration) c.seconds = 0;
  p.sensitivity.seconds = 0;
  for (double& s : p.sensitivity.format_seconds) s = 0;
  return profile_to_json(p).dump();
}

// Sensitivity (measured inside the layer-major pass) in both orders; the
// spilled pass, the same forward, without it.
void check_orders(const std::string& model_name) {
  const auto run = [&](model::PassOrder order, uint64_t hidden_memory, bool sensitivity) {
    return profile_bytes(run_profile(small_request(model_name, order, hidden_memory, sensitivity)));
  };
  const std::string window = run(model::PassOrder::kWindow, 0, true);
  const std::string layer = run(model::PassOrder::kLayer, 0, true);
  const auto j = nlohmann::json::parse(window);
  ASSERT_EQ(j["calibration"]["tokens"].get<int64_t>(), 3 * 48 + 17);
  ASSERT_FALSE(j["sensitivity_formats"].empty());
  EXPECT_TRUE(window == layer) << model_name << ": the layer-major profile differs from the window-major one";
  const std::string window_usage = run(model::PassOrder::kWindow, 0, false);
  const std::string spilled = run(model::PassOrder::kLayer, 1, false);
  EXPECT_TRUE(window_usage == spilled) << model_name << ": the spilled layer-major profile differs";
  std::printf("%s: profile.json identical in both orders (%zu bytes, %zu proxy fits) and spilled (%zu bytes)\n",
              model_name.c_str(), window.size(), j["sensitivity_proxy_fits"].size(), spilled.size());
}

TEST(PassOrder, TinyMoeProfileIdentical) {
  EQ_REQUIRE_SHARED();
  check_orders("tinymoe");
}

TEST(PassOrder, Qwen3MoeSmallProfileIdentical) {
  EQ_REQUIRE_SHARED();
  if (eq::built_with_sanitizers()) GTEST_SKIP() << "two minutes under ASan; tinymoe and qwen3_next-small cover the pass code there, the plain build runs it";
  check_orders("qwen3moe-small");
}

// Linear-attention layers: a recurrent state per window within the layer.
TEST(PassOrder, Qwen3NextSmallProfileIdentical) {
  EQ_REQUIRE_SHARED();
  check_orders("qwen3_next-small");
}

// Multi-head latent attention behind the grouped sigmoid router.
TEST(PassOrder, DeepseekV3SmallProfileIdentical) {
  EQ_REQUIRE_SHARED();
  if (eq::built_with_sanitizers()) GTEST_SKIP() << "two minutes under ASan; tinymoe and qwen3_next-small cover the pass code there, the plain build runs it";
  check_orders("deepseek_v3-small");
}

}  // namespace
}  // namespace eq::profile
