// The hybrid linear-attention models through every command:
// ../shared/models/qwen3_5_moe-small (and qwen3_next-small, fused
// projections) go profile -> pack (a mixed allocation, linear-attention
// projections quantized by --attn-format) -> verify -> eval -> generate
// --packed. The pack holds more than one expert format and the gated delta
// net's q/k/v/z and output projections in the attention format; the packed
// model stays close to the source (eval's bits per byte and KL); generate
// runs the folder alone, giving the same greedy tokens on one thread and on
// all.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace eq {
namespace {

using nlohmann::json;

json run_json(const std::string& args) {
  std::string out;
  const int rc = test::run_command("(" + test::binary() + " " + args + " 2>/dev/null)", &out);
  EXPECT_EQ(rc, 0) << args << "\n" << out;
  return rc == 0 ? json::parse(out) : json();
}

// The default policy with candidates and classes that quantize in seconds
// (no trellis) and fit qwen3_next-small's 16-wide experts (groups of 16), so
// the measured allocation is mixed without a long run.
std::string quick_policy(const std::filesystem::path& dir) {
  json p = json::parse(std::ifstream(test::source_dir() / "configs" / "default.json"));
  p["name"] = "quick";
  p["formats"]["standard"] = "nvfp4";
  p["formats"]["deprioritized"] = "nvfp4";
  p["candidates"] = {"int8_row", "fp4_g16", "nvfp4"};
  p["sensitivity"]["proxies"] = json::object();
  p["sensitivity"]["max_samples"] = 32;
  const auto path = dir / "quick.json";
  std::ofstream(path) << p.dump(2);
  return path.string();
}

class HybridPipelineCli : public ::testing::TestWithParam<std::string> {};

TEST_P(HybridPipelineCli, ProfilePackEvalGenerateWithAMixedAllocation) {
  EQ_REQUIRE_SHARED();
  const std::string model = (test::shared_dir() / "models" / GetParam()).string();
  const std::string corpus = (test::shared_dir() / "corpus").string();
  const auto dir = test::temp_dir("hybrid_pipeline_" + GetParam());
  const std::string profile = (dir / "profile.json").string(), packed = (dir / "packed").string();

  run_json("profile --model " + model + " --calib " + corpus + "/calib_mixed.txt --max-tokens 2048 --ctx 256" +
           " --policy " + quick_policy(dir) + " --target-bits 6 -o " + profile + " --json");
  const json pack = run_json("pack --model " + model + " --profile " + profile + " --attn-format int8_row -o " +
                             packed + " --json");
  ASSERT_FALSE(pack.is_null());
  ASSERT_EQ(test::run_command(test::binary() + " verify " + packed + " >/dev/null 2>&1"), 0);

  // More than one expert format; every linear-attention q/k/v/z and output
  // projection in int8_row, the decay and beta projections as stored.
  const json manifest = json::parse(std::ifstream(dir / "packed" / "manifest.json"));
  std::set<std::string> expert_formats;
  int linear_quantized = 0, linear_gates_stored = 0;
  for (const json& t : manifest.at("tensors")) {
    const std::string name = t.at("name").get<std::string>();
    const std::string format = t.contains("format") ? t.at("format").get<std::string>() : "";
    if (name.find(".mlp.groups.") != std::string::npos && !format.empty()) expert_formats.insert(format);
    if (name.find(".linear_attn.") == std::string::npos) continue;
    const bool projection = name.find("in_proj_qkv") != std::string::npos || name.find("in_proj_z.") != std::string::npos ||
                            name.find("out_proj") != std::string::npos;
    if (projection && name.find(".qweight") != std::string::npos) {
      EXPECT_EQ(format, "int8_row") << name;
      ++linear_quantized;
    }
    if (name.find("in_proj_a.") != std::string::npos || name.find("in_proj_b.") != std::string::npos ||
        name.find("in_proj_ba.") != std::string::npos) {
      EXPECT_EQ(format, "") << name;
      ++linear_gates_stored;
    }
  }
  EXPECT_GE(expert_formats.size(), 2u) << "the allocation is not mixed";
  EXPECT_GT(linear_quantized, 0);
  EXPECT_GT(linear_gates_stored, 0);

  const json eval = run_json("eval --packed " + packed + " --model " + model + " --text " + corpus +
                             "/eval_python.txt --max-tokens 1024 --ctx 256 --sweep 1,16 --reps 1 --json");
  ASSERT_FALSE(eval.is_null());
  const json& q = eval.at("quality").at("overall");
  std::printf("[%s] %zu expert formats; bpb %.4f -> %.4f (%+.2f%%), KL mean %.4f, top-1 %.1f%%\n", GetParam().c_str(),
              expert_formats.size(), q.at("bits_reference").get<double>(), q.at("bits_packed").get<double>(),
              q.at("bits_delta_percent").get<double>(), q.at("kl_mean").get<double>(),
              100 * q.at("top1_agreement").get<double>());
  EXPECT_GT(q.at("scored_tokens").get<int64_t>(), 1000);
  EXPECT_LT(std::abs(q.at("bits_delta_percent").get<double>()), 10.0);
  EXPECT_LT(q.at("kl_mean").get<double>(), 0.1);
  EXPECT_GT(q.at("top1_agreement").get<double>(), 0.8);

  // The folder alone, greedy: the prefill's state and the decode steps, twice.
  const json g1 = run_json("generate --packed " + packed + " --prompt 'def main():' -n 24 --json");
  const json g2 = run_json("generate --packed " + packed + " --prompt 'def main():' -n 24 --json --threads 1");
  ASSERT_FALSE(g1.is_null());
  ASSERT_FALSE(g2.is_null());
  EXPECT_EQ(g1.at("tokens").size(), 24u);
  EXPECT_EQ(g1.at("tokens"), g2.at("tokens"));
}

INSTANTIATE_TEST_SUITE_P(SharedModels, HybridPipelineCli, ::testing::Values("qwen3_5_moe-small", "qwen3_next-small"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s)
                             if (ch == '-') ch = '_';
                           return s;
                         });

}  // namespace
}  // namespace eq
