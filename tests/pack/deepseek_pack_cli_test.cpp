// Packing deepseek_v3 (../shared/models/deepseek_v3-small): --attn-format
// quantizes only the attention matrices the executor runs as LinearOps (latent
// attention's kv_b_proj, split per head, stays as stored), and the packed
// folder runs alone and against the source.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace eq {
namespace {

using nlohmann::json;
using test::binary;
using test::run_command;

std::filesystem::path deepseek_small() { return test::shared_dir() / "models" / "deepseek_v3-small"; }

json manifest(const std::filesystem::path& pack) { return json::parse(std::ifstream(pack / "manifest.json")); }

json eval_report(const std::filesystem::path& pack, const std::filesystem::path& model, const std::filesystem::path& out) {
  const std::string text = (test::data_dir() / "corpus" / "eval_prose.txt.zst").string();
  const std::string cmd = binary() + " eval --packed " + pack.string() + " --model " + model.string() + " --text " +
                          text + " --max-tokens 512 --ctx 128 --sweep 1 --reps 1 --warmup 0" +
                          " --decode-tokens 2 --prefill-tokens 8 --prompts-per-domain 0 --json-out " + out.string() +
                          " 2>&1";
  std::string log;
  EXPECT_EQ(run_command(cmd, &log), 0) << cmd << "\n" << log;
  return json::parse(std::ifstream(out));
}

std::vector<int64_t> generate_ids(const std::filesystem::path& pack) {
  std::string out;
  EXPECT_EQ(run_command(binary() + " generate --packed " + pack.string() + " --prompt 'def f(x):' -n 8 --json 2>&1", &out),
            0)
      << out;
  const size_t brace = out.find('{');
  if (brace == std::string::npos) return {};
  return json::parse(out.substr(brace)).at("tokens").get<std::vector<int64_t>>();
}

TEST(DeepseekPackCli, AttnFormatLeavesLatentKvBAsStoredAndThePackRuns) {
  EQ_REQUIRE_SHARED();
  const auto dir = test::temp_dir("deepseek_attn");
  for (const char* fmt : {"int8_row", "fp4_g32"}) {
    const auto pack = dir / (std::string("pack_") + fmt);
    std::string out;
    ASSERT_EQ(run_command(binary() + " pack --model " + deepseek_small().string() + " --uniform int8_row --attn-format " +
                              fmt + " -o " + pack.string() + " 2>&1",
                          &out),
              0)
        << out;
    int kv_b_copies = 0;
    std::set<std::string> quantized;
    const json m = manifest(pack);
    for (const auto& t : m.at("tensors")) {
      const std::string name = t.at("name"), kind = t.at("kind");
      if (name.find(".kv_b_proj.") != std::string::npos) {
        EXPECT_EQ(kind, "copy") << t.dump();
        ++kv_b_copies;
      }
      if (kind == "quantized") {
        EXPECT_EQ(t.at("format"), fmt);
        quantized.insert(t.at("source").get<std::string>());
      }
    }
    EXPECT_EQ(kv_b_copies, 3);  // one per layer
    std::set<std::string> expected = {"lm_head.weight"};
    for (int l = 0; l < 3; ++l)
      for (const char* proj : {"q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "o_proj"})
        expected.insert("model.layers." + std::to_string(l) + ".self_attn." + proj + ".weight");
    EXPECT_EQ(quantized, expected);
    EXPECT_EQ(generate_ids(pack).size(), 8u);
    const json r = eval_report(pack, deepseek_small(), dir / (std::string("eval_") + fmt + ".json"));
    const auto& q = r.at("quality").at("overall");
    EXPECT_GT(q.at("kl_mean").get<double>(), 0.0);
    EXPECT_LT(q.at("kl_mean").get<double>(), 0.05) << fmt;
  }
}

}  // namespace
}  // namespace eq
