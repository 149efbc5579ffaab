// Policy parsing: the shipped default equals the built-in one, and every bad
// field is reported by name.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "profile/policy.h"
#include "test_support.h"

namespace eq::profile {
namespace {

TEST(Policy, ShippedDefaultEqualsBuiltIn) {
  const Policy file = load_policy((test::source_dir() / "configs/default.json").string());
  EXPECT_EQ(file.to_json().dump(), default_policy().to_json().dump());
  EXPECT_EQ(file.class_format[0], "int8_row");
  EXPECT_GE(file.candidates.size(), 3u);
}

TEST(Policy, RoundTripsThroughJson) {
  const Policy p = default_policy();
  const Policy q = parse_policy(nlohmann::json::parse(p.to_json().dump()), "round trip");
  EXPECT_EQ(p.to_json().dump(), q.to_json().dump());
}

void expect_error_naming(const std::string& text, const std::string& field) {
  try {
    parse_policy(nlohmann::json::parse(text), "policy t.json");
    FAIL() << "no error for " << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
  }
}

TEST(Policy, ErrorsNameTheField) {
  const std::string base = R"("version": 1, "formats": {"critical": "int8_row", "standard": "fp4_g32", "deprioritized": "int2_g64"})";
  expect_error_naming("{" + base + R"(, "thresholds": {"pruned": {"max_usage_ratio": -1}}})",
                      "thresholds.pruned.max_usage_ratio");
  expect_error_naming("{" + base + R"(, "guard_rails": {"max_pruned_fraction": 2}})", "guard_rails.max_pruned_fraction");
  expect_error_naming("{" + base + R"(, "candidates": ["int9"]})", "candidates[0]");
  expect_error_naming("{" + base + R"(, "colour": 1})", "colour");
  expect_error_naming(R"({"version": 1, "formats": {"critical": "int8_row", "standard": "fp4_g32"}})",
                      "formats.deprioritized");
  expect_error_naming("{" + base + R"(, "coverage": {"under_covered_class": "pruned"}})",
                      "coverage.under_covered_class");
  expect_error_naming(R"({"formats": {}})", "version");
  expect_error_naming("{" + base + R"(, "default_target_bits": "4.5"})", "default_target_bits");
  expect_error_naming("{" + base + R"(, "default_target_bits": 0})", "default_target_bits");
  expect_error_naming("{" + base + R"(, "default_target_bits": 17})", "default_target_bits");
  expect_error_naming("{" + base + R"(, "sensitivity": {"proxy_calibration_experts": -1}})",
                      "sensitivity.proxy_calibration_experts");
  expect_error_naming("{" + base + R"(, "sensitivity": {"proxy_calibration_experts": 2.5}})",
                      "sensitivity.proxy_calibration_experts");
  expect_error_naming("{" + base + R"(, "sensitivity": {"sample_rows": -1}})", "sensitivity.sample_rows");
}

TEST(Policy, DefaultTargetBitsIsNullOrABudget) {
  const std::string base = R"("version": 1, "formats": {"critical": "int8_row", "standard": "fp4_g32", "deprioritized": "int2_g64"})";
  EXPECT_EQ(parse_policy(nlohmann::json::parse("{" + base + "}"), "p").default_target_bits, 0.0);
  EXPECT_EQ(parse_policy(nlohmann::json::parse("{" + base + R"(, "default_target_bits": null})"), "p").default_target_bits,
            0.0);
  const Policy p = parse_policy(nlohmann::json::parse("{" + base + R"(, "default_target_bits": 3.25})"), "p");
  EXPECT_EQ(p.default_target_bits, 3.25);
  EXPECT_EQ(p.to_json()["default_target_bits"], 3.25);
  EXPECT_EQ(default_policy().default_target_bits, 4.5);
}

TEST(Policy, SharedExpertAndDenseMlpFormatsAreNullOrAFormat) {
  const std::string base = R"("version": 1, "formats": {"critical": "int8_row", "standard": "fp4_g32", "deprioritized": "int2_g64"})";
  // Absent or null: copied as stored (empty), written back as null.
  for (const std::string& extra : {std::string(), std::string(R"(, "shared_expert_format": null, "dense_mlp_format": null)")}) {
    const Policy p = parse_policy(nlohmann::json::parse("{" + base + extra + "}"), "p");
    EXPECT_EQ(p.shared_expert_format, "");
    EXPECT_EQ(p.dense_mlp_format, "");
    EXPECT_TRUE(p.to_json().at("shared_expert_format").is_null());
    EXPECT_TRUE(p.to_json().at("dense_mlp_format").is_null());
  }
  const Policy p = parse_policy(
      nlohmann::json::parse("{" + base + R"(, "shared_expert_format": "int8_row", "dense_mlp_format": "fp4_g32"})"), "p");
  EXPECT_EQ(p.shared_expert_format, "int8_row");
  EXPECT_EQ(p.dense_mlp_format, "fp4_g32");
  const Policy q = parse_policy(nlohmann::json::parse(p.to_json().dump()), "round trip");
  EXPECT_EQ(q.shared_expert_format, "int8_row");
  EXPECT_EQ(q.dense_mlp_format, "fp4_g32");
  EXPECT_TRUE(default_policy().shared_expert_format.empty());
  EXPECT_TRUE(default_policy().dense_mlp_format.empty());
  expect_error_naming("{" + base + R"(, "dense_mlp_format": "int9"})", "dense_mlp_format");
  expect_error_naming("{" + base + R"(, "shared_expert_format": 8})", "shared_expert_format");
}

}  // namespace
}  // namespace eq::profile
