// End-to-end: the expertquant binary as a user runs it.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_support.h"

namespace eq {
namespace {

TEST(InspectCli, JsonOnBundledModel) {
  std::string out;
  const std::string cmd = test::binary() + " inspect " + (test::data_dir() / "tinymoe").string() + " --json 2>/dev/null";
  ASSERT_EQ(test::run_command(cmd, &out), 0) << out;
  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["architecture"]["experts"], 32);
  EXPECT_EQ(j["parameters"]["routed_experts"]["parameters"], 3145728u);
}

TEST(InspectCli, TensorListing) {
  std::string out;
  ASSERT_EQ(test::run_command(test::binary() + " inspect " + (test::data_dir() / "tinymoe").string() + " --tensors", &out), 0);
  EXPECT_NE(out.find("model.layers.3.mlp.experts.31.down_proj.weight"), std::string::npos);
}

TEST(InspectCli, BadFileGivesOneLineErrorAndNonZeroExit) {
  auto dir = test::temp_dir("cli");
  const auto path = (dir / "broken.safetensors").string();
  {
    std::string bytes(8, '\0');
    const std::string header = R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
    bytes[0] = static_cast<char>(header.size());
    std::ofstream(path, std::ios::binary) << bytes << header << "short";
  }
  std::string out;
  int rc = test::run_command(test::binary() + " inspect " + path, &out);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find(path), std::string::npos) << out;
  EXPECT_NE(out.find("truncated"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  rc = test::run_command(test::binary() + " inspect " + (dir / "missing").string(), &out);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("no such file"), std::string::npos) << out;
}

}  // namespace
}  // namespace eq
