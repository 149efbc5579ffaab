// Allocation schema: errors name the bad field (docs/allocation.md).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "plan/allocation.h"

namespace eq::plan {
namespace {

using nlohmann::json;

std::string error_of(const json& j) {
  try {
    parse_allocation(j, "alloc.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

json two_experts() {
  return {{"schema", "expertquant.allocation"},
          {"version", 1},
          {"layers",
           {{{"layer", 0},
             {"experts", {{{"class", "critical"}, {"format", "int8_row"}}, {{"class", "pruned"}}}}}}}};
}

TEST(Allocation, ParsesAndRoundTrips) {
  Allocation a = parse_allocation(two_experts(), "alloc.json");
  ASSERT_EQ(a.layers.size(), 1u);
  EXPECT_EQ(a.layers[0].experts[0].cls, ExpertClass::kCritical);
  EXPECT_EQ(a.layers[0].experts[0].format, "int8_row");
  EXPECT_EQ(a.layers[0].experts[1].cls, ExpertClass::kPruned);
  Allocation b = parse_allocation(allocation_to_json(a), "round trip");
  EXPECT_EQ(allocation_to_json(b), allocation_to_json(a));
  // Its text is what manifests hash as policy.allocation_xxh64: fixed bytes.
  EXPECT_EQ(allocation_to_json(a).dump(),
            R"({"layers":[{"experts":[{"class":"critical","format":"int8_row"},{"class":"pruned"}],"layer":0}],)"
            R"("schema":"expertquant.allocation","version":1})");
}

TEST(Allocation, ErrorsNameTheField) {
  json j = two_experts();
  j["layers"][0]["experts"][0]["format"] = "fp5_magic";
  EXPECT_NE(error_of(j).find("layers[0].experts[0].format"), std::string::npos) << error_of(j);
  EXPECT_NE(error_of(j).find("fp5_magic"), std::string::npos);

  j = two_experts();
  j["layers"][0]["experts"][1]["class"] = "vip";
  EXPECT_NE(error_of(j).find("layers[0].experts[1].class"), std::string::npos) << error_of(j);

  j = two_experts();
  j["layers"][0]["experts"][1]["format"] = "int8_row";
  EXPECT_NE(error_of(j).find("pruned expert has no format"), std::string::npos) << error_of(j);

  j = two_experts();
  j["version"] = 7;
  EXPECT_NE(error_of(j).find("'version'"), std::string::npos) << error_of(j);

  j = two_experts();
  j["layers"][0]["experts"][0].erase("format");
  EXPECT_NE(error_of(j).find("layers[0].experts[0].format"), std::string::npos) << error_of(j);
}

TEST(Allocation, ClassNames) {
  for (int k = 0; k < kNumClasses; ++k) EXPECT_EQ(parse_class(class_name(ExpertClass(k))), ExpertClass(k));
  EXPECT_FALSE(parse_class("unknown"));
}

}  // namespace
}  // namespace eq::plan
