// profile.json as pack reads it: the header, the model fingerprint, the
// allocation, the policy's two formats and the sidecar's record.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "plan/profile_inputs.h"
#include "test_support.h"

namespace eq::plan {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

json minimal_profile() {
  return {{"schema", "expertquant.profile"},
          {"version", kProfileVersion},
          {"model",
           {{"path", "m"},
            {"model_type", "qwen3_moe"},
            {"config_xxh64", "0123456789abcdef"},
            {"tensor_index_xxh64", "fedcba9876543210"},
            {"num_layers", 1},
            {"tensors", json::array()}}},
          {"allocation",
           {{"version", 1},
            {"layers", {{{"layer", 0}, {"experts", {{{"class", "standard"}, {"format", "int8_row"}}}}}}}}},
          // Only the two formats are read: the rest of the policy is profile's.
          {"policy", {{"shared_expert_format", "fp4_g32"}, {"dense_mlp_format", nullptr}, {"formats", "not read"}}},
          {"importance_file", nullptr}};
}

// Sealed (profiles are): what is tested is the rule behind the checksum.
std::string write(json j) {
  seal_profile(j);
  const fs::path p = test::temp_dir("profile_inputs") / "profile.json";
  std::ofstream(p) << j.dump();
  return p.string();
}

std::string error_of(const json& j) {
  try {
    read_profile_inputs(write(j));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ProfileInputs, ReadsWhatPackTakesAndNothingElse) {
  const ProfileInputs in = read_profile_inputs(write(minimal_profile()));
  EXPECT_EQ(in.shared_expert_format, "fp4_g32");
  EXPECT_EQ(in.dense_mlp_format, "");
  EXPECT_EQ(in.importance_file, "");
  EXPECT_EQ(in.model.model_type, "qwen3_moe");
  EXPECT_EQ(in.model.config_xxh64, "0123456789abcdef");
  EXPECT_EQ(in.model.num_layers, 1);
  ASSERT_EQ(in.allocation.layers.size(), 1u);
  EXPECT_EQ(in.allocation.layers[0].experts[0].format, "int8_row");
}

TEST(ProfileInputs, ErrorsNameTheField) {
  json j = minimal_profile();
  j["policy"]["dense_mlp_format"] = "no_such_format";
  EXPECT_NE(error_of(j).find("field 'policy.dense_mlp_format': unknown format \"no_such_format\""), std::string::npos)
      << error_of(j);
  j = minimal_profile();
  j["policy"]["shared_expert_format"] = 3;
  EXPECT_NE(error_of(j).find("field 'policy.shared_expert_format': must be a format name"), std::string::npos);
  j = minimal_profile();
  j["importance_file"] = 3;
  EXPECT_NE(error_of(j).find("field 'importance_file': not a string"), std::string::npos);
  j = minimal_profile();
  j["version"] = 1;
  EXPECT_NE(error_of(j).find("field 'version': 1 predates"), std::string::npos);
  j = minimal_profile();
  j["version"] = 2;
  EXPECT_NE(error_of(j).find("field 'version': 2 predates the content checksum"), std::string::npos);
  j = minimal_profile();
  j.erase("allocation");
  EXPECT_NE(error_of(j).find("field 'allocation': missing"), std::string::npos);
  j = minimal_profile();
  j["model"].erase("tensor_index_xxh64");
  EXPECT_NE(error_of(j).find("field 'model.tensor_index_xxh64': missing"), std::string::npos);
}

}  // namespace
}  // namespace eq::plan
