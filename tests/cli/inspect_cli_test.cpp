// End-to-end: the expertquant binary as a user runs it.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "quant/format.h"
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

// A pack of tinymoe with every class and three formats: per layer, expert e
// is critical int8_row (e % 8 == 0), standard fp4_g32 (1-4), deprioritized
// int2_g32 (5, 6) or pruned (7).
const std::filesystem::path& mixed_pack() {
  static const std::filesystem::path out = [] {
    const auto dir = test::temp_dir("inspect-pack");
    nlohmann::json layers = nlohmann::json::array();
    for (int l = 0; l < 4; ++l) {
      nlohmann::json experts = nlohmann::json::array();
      for (int e = 0; e < 32; ++e) {
        const int k = e % 8;
        if (k == 0) experts.push_back({{"class", "critical"}, {"format", "int8_row"}});
        else if (k <= 4) experts.push_back({{"class", "standard"}, {"format", "fp4_g32"}});
        else if (k <= 6) experts.push_back({{"class", "deprioritized"}, {"format", "int2_g32"}});
        else experts.push_back({{"class", "pruned"}});
      }
      layers.push_back({{"layer", l}, {"experts", experts}});
    }
    std::ofstream(dir / "alloc.json") << nlohmann::json{{"version", 1}, {"layers", layers}}.dump();
    std::string log;
    EXPECT_EQ(test::run_command(test::binary() + " pack --model " + (test::data_dir() / "tinymoe").string() +
                                    " --allocation " + (dir / "alloc.json").string() + " --threads 1 -o " +
                                    (dir / "packed").string(),
                                &log),
              0)
        << log;
    return dir / "packed";
  }();
  return out;
}

TEST(InspectCli, PackedFolderJsonMatchesItsManifest) {
  const auto pack = mixed_pack();
  std::string out;
  ASSERT_EQ(test::run_command("(" + test::binary() + " inspect " + pack.string() + " --json 2>/dev/null)", &out), 0)
      << out;
  const auto j = nlohmann::json::parse(out);
  const auto m = nlohmann::json::parse(std::ifstream(pack / "manifest.json"));
  EXPECT_EQ(j["kind"], "packed");
  EXPECT_EQ(j["model_type"], "qwen3_moe");
  EXPECT_EQ(j["dims"]["layers"], 4);
  EXPECT_EQ(j["dims"]["experts"], 32);
  EXPECT_EQ(j["dims"]["hidden_size"], 128);
  EXPECT_EQ(j["dims"]["moe_intermediate_size"], 64);
  EXPECT_EQ(j["policy"]["kind"], "allocation");
  EXPECT_EQ(j["class_counts"], m["totals"]["class_counts"]);
  EXPECT_EQ(j["class_counts"]["critical"], 16);
  EXPECT_EQ(j["class_counts"]["standard"], 64);
  EXPECT_EQ(j["class_counts"]["deprioritized"], 32);
  EXPECT_EQ(j["class_counts"]["pruned"], 16);
  size_t groups = 0;
  for (const auto& l : m["layers"]) groups += l["groups"].size();
  EXPECT_EQ(j["groups"], groups);
  EXPECT_EQ(groups, 12u);  // one bit group per format per layer

  // Per format: experts and bytes summed from the manifest's experts; bits
  // per weight = stored bits / weights, payload = the format's code bits.
  const uint64_t weights_per_expert = 3 * 128 * 64;
  std::map<std::string, std::pair<int64_t, uint64_t>> want;  // format -> experts, bytes
  for (const auto& l : m["layers"])
    for (const auto& e : l["experts"])
      if (!e["format"].is_null()) {
        auto& [experts, bytes] = want[e["format"].get<std::string>()];
        ++experts;
        bytes += e["bytes_after"].get<uint64_t>();
      }
  ASSERT_EQ(j["formats"].size(), 3u);
  for (const auto& f : j["formats"]) {
    const std::string name = f["format"];
    SCOPED_TRACE(name);
    ASSERT_TRUE(want.count(name));
    EXPECT_EQ(f["experts"], want[name].first);
    EXPECT_EQ(f["bytes"], want[name].second);
    EXPECT_EQ(f["groups"], 4);
    const double total = 8.0 * double(want[name].second) / double(want[name].first * weights_per_expert);
    EXPECT_NEAR(f["bits_per_weight"]["total"].get<double>(), total, 1e-9);
    EXPECT_EQ(f["bits_per_weight"]["payload"].get<double>(), quant::format_by_name(name).weight_bits);
    EXPECT_NEAR(f["bits_per_weight"]["overhead"].get<double>(), total - quant::format_by_name(name).weight_bits, 1e-9);
  }
  EXPECT_EQ(want["int8_row"].first, 16);
  EXPECT_EQ(want["fp4_g32"].first, 64);
  EXPECT_EQ(want["int2_g32"].first, 32);
  EXPECT_EQ(j["formats"][0]["format"], "fp4_g32");
  EXPECT_GT(j["formats"][0]["bits_per_weight"]["overhead"].get<double>(), 0.0);  // its scales
  EXPECT_NEAR(j["bits_per_weight"]["payload"].get<double>(), (16 * 8 + 64 * 4 + 32 * 2) / 112.0, 1e-9);
  EXPECT_DOUBLE_EQ(j["avg_bits_per_expert_weight"].get<double>(), m["totals"]["avg_bits_per_expert_weight"].get<double>());

  uint64_t side = 0;
  for (const auto& f : m["files"]) side += f["bytes"].get<uint64_t>();
  const auto& z = j["sizes"];
  EXPECT_EQ(z["shard_bytes"], m["totals"]["file_bytes"]);
  EXPECT_EQ(z["side_file_bytes"], side);
  EXPECT_EQ(z["manifest_bytes"], std::filesystem::file_size(pack / "manifest.json"));
  EXPECT_EQ(z["on_disk_bytes"], z["shard_bytes"].get<uint64_t>() + side + z["manifest_bytes"].get<uint64_t>());
  EXPECT_EQ(z["tensor_bytes"], m["totals"]["bytes_after"]);
  EXPECT_EQ(z["source_tensor_bytes"], m["totals"]["bytes_before"]);
  EXPECT_EQ(z["expert_bytes"], m["totals"]["expert_bytes_after"]);
  EXPECT_EQ(z["source_expert_bytes"], m["totals"]["expert_bytes_before"]);
  ASSERT_EQ(j["layers"].size(), 4u);
  EXPECT_EQ(j["layers"][2]["formats"]["fp4_g32"], 16);
  EXPECT_EQ(j["layers"][2]["class_counts"], m["layers"][2]["totals"]["class_counts"]);
}

TEST(InspectCli, PackedFolderTableNamesFormatsAndClasses) {
  std::string out;
  ASSERT_EQ(test::run_command(test::binary() + " inspect " + mixed_pack().string(), &out), 0) << out;
  EXPECT_NE(out.find("model_type  qwen3_moe"), std::string::npos) << out;
  EXPECT_NE(out.find("4 layers x 32 experts, hidden 128, expert intermediate 64"), std::string::npos) << out;
  EXPECT_NE(out.find("crit   std  depr  prun"), std::string::npos) << out;
  EXPECT_NE(out.find("fp4_g32 x16, int2_g32 x8, int8_row x4"), std::string::npos) << out;
  EXPECT_NE(out.find("total     16    64    32    16     12"), std::string::npos) << out;
  EXPECT_NE(out.find("on disk"), std::string::npos) << out;
}

TEST(InspectCli, DamagedManifestIsOneLine) {
  const auto dir = test::temp_dir("inspect-damaged");
  std::filesystem::copy(mixed_pack(), dir / "packed", std::filesystem::copy_options::recursive);
  const auto manifest = dir / "packed" / "manifest.json";
  test::flip_byte(manifest, std::filesystem::file_size(manifest) / 2, 0x01);
  std::string out;
  EXPECT_EQ(test::run_command(test::binary() + " inspect " + (dir / "packed").string(), &out), 2) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_NE(out.find("expertquant: error: manifest " + manifest.string()), std::string::npos) << out;
  EXPECT_EQ(test::run_command(test::binary() + " inspect " + mixed_pack().string() + " --tensors", &out), 2) << out;
  EXPECT_NE(out.find("--tensors: "), std::string::npos) << out;
}

}  // namespace
}  // namespace eq

namespace eq {
namespace {

// gpt-oss's attention in the table: the sliding-window layers by window and
// the sinks; a model without either has no such line.
TEST(InspectCli, TableShowsSlidingWindowsAndSinks) {
  EQ_REQUIRE_SHARED();
  std::string out;
  ASSERT_EQ(test::run_command(test::binary() + " inspect " +
                                  (test::shared_dir() / "models" / "gpt_oss-small").string() + " 2>&1",
                              &out),
            0)
      << out;
  EXPECT_NE(out.find("attention   sliding window 32 on layers 0, 2; a learned sink logit per head\n"),
            std::string::npos)
      << out;
  ASSERT_EQ(test::run_command(test::binary() + " inspect " + (test::data_dir() / "tinymoe").string() + " 2>&1", &out),
            0)
      << out;
  EXPECT_EQ(out.find("attention   sliding"), std::string::npos) << out;
  EXPECT_EQ(out.find("attention   full"), std::string::npos) << out;
}

// A hybrid model's table names its gated-delta-net layers and their shape,
// and the JSON lists the layers.
TEST(InspectCli, TableShowsLinearAttentionLayers) {
  EQ_REQUIRE_SHARED();
  std::string out;
  const std::string model = (test::shared_dir() / "models" / "qwen3_5_moe-small").string();
  ASSERT_EQ(test::run_command(test::binary() + " inspect " + model + " 2>&1", &out), 0) << out;
  EXPECT_NE(out.find("attention   gated delta net on layers 0, 1, 2 (2 key heads x 32, 4 value heads x 32, conv 4, "
                     "separate projections); full attention on layers 3\n"),
            std::string::npos)
      << out;
  ASSERT_EQ(test::run_command(test::binary() + " inspect --json " + model + " 2>/dev/null", &out), 0) << out;
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j.at("architecture").at("linear_attention").at("layers"), nlohmann::json::array({0, 1, 2}));
  ASSERT_EQ(test::run_command(test::binary() + " inspect " + (test::data_dir() / "tinymoe").string() + " 2>&1", &out),
            0)
      << out;
  EXPECT_EQ(out.find("gated delta net"), std::string::npos) << out;
}

}  // namespace
}  // namespace eq
