// Packing deepseek_v3 (../shared/models/deepseek_v3-small): --attn-format
// quantizes only the attention matrices the executor runs as LinearOps (latent
// attention's kv_b_proj, split per head, stays as stored), and the packed
// folder runs alone and against the source; multi-token-prediction tensors of
// the source are dropped (never copied or quantized) and counted; the dense
// MLP of the first layer takes a format of its own (--dense-format, or the
// profile policy's dense_mlp_format).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "core/numeric.h"
#include "io/safetensors.h"
#include "test_support.h"

namespace eq {
namespace {

using nlohmann::json;
using test::binary;
using test::run_command;

std::filesystem::path deepseek_small() { return test::shared_dir() / "models" / "deepseek_v3-small"; }

json manifest(const std::filesystem::path& pack) { return json::parse(std::ifstream(pack / "manifest.json")); }

// Every non-copied tensor of a pack by name -> checksum, and the copied ones' sources.
std::map<std::string, std::string> tensor_hashes(const json& m) {
  std::map<std::string, std::string> h;
  for (const auto& t : m.at("tensors")) h[t.at("name").get<std::string>()] = t.at("xxh64").get<std::string>();
  return h;
}

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

// deepseek_v3-small plus a multi-token-prediction layer (model.layers.3, the
// config declares num_nextn_predict_layers 1): random tensors of each part.
std::filesystem::path write_with_mtp_layer(const std::filesystem::path& dir, int* mtp_tensors) {
  const auto src = io::Checkpoint::open(deepseek_small().string());
  const json cfg = json::parse(std::ifstream(deepseek_small() / "config.json"));
  EXPECT_EQ(cfg.at("num_nextn_predict_layers"), 1);
  const int64_t H = cfg.at("hidden_size"), I = cfg.at("moe_intermediate_size"), q_lora = cfg.at("q_lora_rank");
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<std::vector<uint16_t>> keep;
  std::vector<io::TensorToWrite> tensors;
  for (const auto& name : src->tensor_names()) {
    const auto& info = src->info(name);
    tensors.push_back({name, info.dtype, info.shape, src->view(name).bytes()});
  }
  const std::string m = "model.layers.3.";
  const std::vector<std::pair<std::string, std::vector<int64_t>>> mtp = {
      {m + "enorm.weight", {H}},
      {m + "hnorm.weight", {H}},
      {m + "eh_proj.weight", {H, 2 * H}},
      {m + "self_attn.q_a_proj.weight", {q_lora, H}},
      {m + "mlp.experts.0.gate_proj.weight", {I, H}},
      {m + "mlp.shared_experts.gate_proj.weight", {I, H}},
      {m + "shared_head.norm.weight", {H}}};
  keep.reserve(mtp.size());
  for (const auto& [name, shape] : mtp) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<uint16_t> v(static_cast<size_t>(n));
    for (auto& x : v) x = f32_to_bf16(normal(rng));
    keep.push_back(std::move(v));
    tensors.push_back({name, DType::kBF16, shape,
                       {reinterpret_cast<const uint8_t*>(keep.back().data()), keep.back().size() * 2}});
  }
  *mtp_tensors = static_cast<int>(mtp.size());
  const auto model = dir / "deepseek_mtp";
  std::filesystem::create_directories(model);
  io::write_safetensors((model / "model.safetensors").string(), tensors);
  std::ofstream(model / "config.json") << cfg.dump(2);
  return model;
}

TEST(DeepseekPackCli, MultiTokenPredictionTensorsAreDroppedAndCounted) {
  EQ_REQUIRE_SHARED();
  const auto dir = test::temp_dir("deepseek_mtp");
  int mtp_tensors = 0;
  const auto model = write_with_mtp_layer(dir, &mtp_tensors);
  // Every quantizing option on: none of them may reach the MTP layer.
  const std::string options = " --uniform int8_row --attn-format int8_row --shared-format int8_row -o ";
  std::string out;
  ASSERT_EQ(run_command(binary() + " pack --model " + model.string() + options + (dir / "with").string() + " 2>&1", &out),
            0)
      << out;
  ASSERT_EQ(run_command(binary() + " pack --model " + deepseek_small().string() + options + (dir / "without").string() +
                            " 2>&1",
                        &out),
            0)
      << out;
  const json with = manifest(dir / "with"), without = manifest(dir / "without");
  EXPECT_EQ(with.at("source").at("mtp_tensors_dropped"), mtp_tensors);
  EXPECT_FALSE(without.at("source").contains("mtp_tensors_dropped"));
  for (const auto& t : with.at("tensors")) {
    EXPECT_EQ(t.at("name").get<std::string>().find("model.layers.3."), std::string::npos) << t.dump();
    EXPECT_NE(t.value("layer", json()), 3) << t.dump();
  }
  // The same packed tensors, byte for byte, as the checkpoint without them.
  EXPECT_EQ(tensor_hashes(with), tensor_hashes(without));
  ASSERT_EQ(run_command(binary() + " inspect " + (dir / "with").string() + " --json 2>&1", &out), 0) << out;
  EXPECT_EQ(json::parse(out.substr(out.find('{'))).at("mtp_tensors_dropped"), mtp_tensors) << out;
  EXPECT_EQ(generate_ids(dir / "with"), generate_ids(dir / "without"));
}

// The dense MLP of layer 0 (first_k_dense_replace 1) as a class of its own:
// quantized by --dense-format, run by the executor through its LinearOps.
// With lossless routed experts (bf16 of bf16 weights) the pack's difference
// from the source is the dense MLP's alone.
TEST(DeepseekPackCli, DenseFormatQuantizesTheDenseMlpAndTheExecutorRunsIt) {
  EQ_REQUIRE_SHARED();
  const auto dir = test::temp_dir("deepseek_dense");
  std::map<std::string, double> kl;
  for (const std::string dense : {"", "int8_row"}) {
    const auto pack = dir / ("pack_" + (dense.empty() ? std::string("stored") : dense));
    std::string out;
    ASSERT_EQ(run_command(binary() + " pack --model " + deepseek_small().string() + " --uniform bf16" +
                              (dense.empty() ? "" : " --dense-format " + dense) + " -o " + pack.string() + " 2>&1",
                          &out),
              0)
        << out;
    const json m = manifest(pack);
    EXPECT_EQ(m.at("policy").value("dense_format", json()), dense.empty() ? json() : json(dense));
    std::set<std::string> quantized;
    for (const auto& t : m.at("tensors"))
      if (t.at("kind") == "quantized") quantized.insert(t.at("source").get<std::string>());
    const std::set<std::string> expected =
        dense.empty() ? std::set<std::string>{}
                      : std::set<std::string>{"model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.up_proj.weight",
                                              "model.layers.0.mlp.down_proj.weight"};
    EXPECT_EQ(quantized, expected);
    EXPECT_EQ(generate_ids(pack).size(), 8u);
    const json r = eval_report(pack, deepseek_small(), dir / ("eval_" + dense + ".json"));
    kl[dense] = r.at("quality").at("overall").at("kl_mean").get<double>();
  }
  // As stored: the source up to the bf16 kernels' summation order; int8
  // dense MLP: measurably different, and close.
  EXPECT_LT(kl[""], 1e-9);
  EXPECT_GT(kl["int8_row"], kl[""]);
  EXPECT_LT(kl["int8_row"], 1e-3);
}

// profile.json records the policy's shared_expert_format and dense_mlp_format;
// pack --profile uses them, and --dense-format / --shared-format override them.
TEST(DeepseekPackCli, ProfilePolicyFormatsReachThePackUnlessOverridden) {
  EQ_REQUIRE_SHARED();
  const auto dir = test::temp_dir("deepseek_policy_formats");
  json policy = json::parse(std::ifstream(test::source_dir() / "configs" / "default.json"));
  policy["shared_expert_format"] = "int8_row";
  policy["dense_mlp_format"] = "int8_row";
  std::ofstream(dir / "policy.json") << policy.dump(2);
  std::string out;
  ASSERT_EQ(run_command(binary() + " profile --model " + deepseek_small().string() + " --calib " +
                            (test::data_dir() / "corpus" / "calib_small.txt.zst").string() +
                            " --max-tokens 256 --no-sensitivity --policy " + (dir / "policy.json").string() + " -o " +
                            (dir / "profile.json").string() + " 2>&1",
                        &out),
            0)
      << out;
  const json profile = json::parse(std::ifstream(dir / "profile.json"));
  EXPECT_EQ(profile.at("policy").at("shared_expert_format"), "int8_row");
  EXPECT_EQ(profile.at("policy").at("dense_mlp_format"), "int8_row");
  for (const auto& [extra, dense] : {std::pair<std::string, std::string>{"", "int8_row"},
                                     std::pair<std::string, std::string>{" --dense-format fp4_g32", "fp4_g32"}}) {
    const auto pack = dir / ("pack_" + dense);
    ASSERT_EQ(run_command(binary() + " pack --model " + deepseek_small().string() + " --profile " +
                              (dir / "profile.json").string() + extra + " -o " + pack.string() + " 2>&1",
                          &out),
              0)
        << out;
    const json m = manifest(pack);
    EXPECT_EQ(m.at("policy").at("shared_format"), "int8_row");
    EXPECT_EQ(m.at("policy").at("dense_format"), dense);
    std::map<std::string, std::string> format_of;
    for (const auto& t : m.at("tensors"))
      if (t.at("kind") == "quantized") format_of[t.at("source").get<std::string>()] = t.at("format");
    EXPECT_EQ(format_of["model.layers.0.mlp.down_proj.weight"], dense);
    EXPECT_EQ(format_of["model.layers.1.mlp.shared_experts.down_proj.weight"], "int8_row");
    EXPECT_EQ(format_of.size(), 3u + 3u * 2u);  // the dense MLP, the shared experts of layers 1 and 2
    EXPECT_EQ(generate_ids(pack).size(), 8u);
  }
}

}  // namespace
}  // namespace eq
