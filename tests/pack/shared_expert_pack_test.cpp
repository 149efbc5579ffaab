// Shared experts as their own class: a qwen2_moe checkpoint (tinymoe's weights
// plus q/k/v biases, a sigmoid-gated shared expert per layer) packed with
// --shared-format. The shared expert is never routed or pruned: its matrices
// become quantized tensors of their own format, the packed folder runs them
// through the executor, and with a lossless format (bf16 of bf16 weights) the
// packed model scores as the source (to the kernels' summation order).
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "core/numeric.h"
#include "io/safetensors.h"
#include "test_support.h"

namespace eq {
namespace {

using nlohmann::json;

constexpr int64_t kShared = 64;  // shared expert intermediate size

std::filesystem::path write_shared_expert_model(const std::filesystem::path& dir) {
  const auto src = io::Checkpoint::open((test::data_dir() / "tinymoe").string());
  json cfg = json::parse(std::ifstream(test::data_dir() / "tinymoe" / "config.json"));
  const int64_t H = cfg.at("hidden_size"), L = cfg.at("num_hidden_layers"), nh = cfg.at("num_attention_heads");
  const int64_t nkv = cfg.at("num_key_value_heads");
  const int64_t hd = cfg.value("head_dim", H / nh);
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<std::vector<uint16_t>> keep;
  std::vector<io::TensorToWrite> tensors;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<uint16_t> v(static_cast<size_t>(n));
    for (auto& x : v) x = f32_to_bf16(normal(rng));
    keep.push_back(std::move(v));
    tensors.push_back({name, DType::kBF16, shape,
                       {reinterpret_cast<const uint8_t*>(keep.back().data()), keep.back().size() * 2}});
  };
  keep.reserve(size_t(L) * 8);
  for (const auto& name : src->tensor_names()) {
    if (name.find("q_norm") != std::string::npos || name.find("k_norm") != std::string::npos) continue;  // qwen2_moe has none
    const auto& info = src->info(name);
    tensors.push_back({name, info.dtype, info.shape, src->view(name).bytes()});
  }
  for (int64_t l = 0; l < L; ++l) {
    const std::string a = "model.layers." + std::to_string(l) + ".self_attn.";
    add(a + "q_proj.bias", {nh * hd});
    add(a + "k_proj.bias", {nkv * hd});
    add(a + "v_proj.bias", {nkv * hd});
    const std::string s = "model.layers." + std::to_string(l) + ".mlp.shared_expert.";
    add(s + "gate_proj.weight", {kShared, H});
    add(s + "up_proj.weight", {kShared, H});
    add(s + "down_proj.weight", {H, kShared});
    add("model.layers." + std::to_string(l) + ".mlp.shared_expert_gate.weight", {1, H});
  }
  const auto model = dir / "qwen2moe";
  std::filesystem::create_directories(model);
  io::write_safetensors((model / "model.safetensors").string(), tensors);
  cfg["model_type"] = "qwen2_moe";
  cfg["shared_expert_intermediate_size"] = kShared;
  std::ofstream(model / "config.json") << cfg.dump(2);
  return model;
}

json eval_report(const std::filesystem::path& pack, const std::filesystem::path& model, const std::filesystem::path& out) {
  const std::string text = (test::data_dir() / "corpus" / "eval_prose.txt.zst").string();
  const std::string cmd = test::binary() + " eval --packed " + pack.string() + " --model " + model.string() +
                          " --text " + text + " --max-tokens 1024 --ctx 256 --sweep 1 --reps 1 --warmup 0" +
                          " --decode-tokens 2 --prefill-tokens 8 --prompts-per-domain 0 --json-out " + out.string() +
                          " 2>&1";
  std::string log;
  EXPECT_EQ(test::run_command(cmd, &log), 0) << cmd << "\n" << log;
  return json::parse(std::ifstream(out));
}

TEST(SharedExpertPack, QuantizedToItsOwnFormatAndRunByTheExecutor) {
  const auto dir = test::temp_dir("shared_expert");
  const auto model = write_shared_expert_model(dir);
  std::string out;
  // profile names the class and leaves it out of the routed classification.
  ASSERT_EQ(test::run_command(test::binary() + " profile --model " + model.string() + " --calib " +
                                  (test::data_dir() / "corpus" / "calib_small.txt.zst").string() +
                                  " --max-tokens 1024 --no-sensitivity --summary -o " + (dir / "profile.json").string() +
                                  " 2>&1",
                              &out),
            0)
      << out;
  EXPECT_NE(out.find("shared experts: 1 per MoE layer x 4 layers, intermediate 64, sigmoid-gated"), std::string::npos)
      << out;
  for (const char* shared : {"bf16", "int8_row"}) {
    const auto pack = dir / (std::string("pack_") + shared);
    ASSERT_EQ(test::run_command(test::binary() + " pack --model " + model.string() + " --uniform bf16 --shared-format " +
                                    shared + " -o " + pack.string() + " 2>&1",
                                &out),
              0)
        << out;
    const json m = json::parse(std::ifstream(pack / "manifest.json"));
    EXPECT_EQ(m.at("policy").at("shared_format"), shared);
    int quantized = 0;
    for (const auto& t : m.at("tensors"))
      if (t.at("kind") == "quantized") {
        EXPECT_NE(t.at("source").get<std::string>().find(".mlp.shared_expert."), std::string::npos) << t.dump();
        EXPECT_EQ(t.at("format"), shared);
        ++quantized;
      } else {
        // The gate stays a plain tensor; no shared-expert matrix is copied.
        EXPECT_EQ(t.at("name").get<std::string>().find(".mlp.shared_expert."), std::string::npos) << t.dump();
      }
    EXPECT_GE(quantized, 3 * 4);  // gate, up, down of every layer (at least one part each)
    const json r = eval_report(pack, model, dir / (std::string("eval_") + shared + ".json"));
    const auto& q = r.at("quality").at("overall");
    if (std::string(shared) == "bf16") {
      // Routed and shared experts lossless: the pack is the source, up to the
      // summation order of the bf16 kernels.
      EXPECT_NEAR(q.at("bits_packed").get<double>(), q.at("bits_reference").get<double>(), 1e-6);
      EXPECT_LT(q.at("kl_mean").get<double>(), 1e-9);
    } else {
      // int8 shared experts: measurably different, and close.
      EXPECT_GT(q.at("kl_mean").get<double>(), 0.0);
      EXPECT_LT(q.at("kl_mean").get<double>(), 1e-3);
    }
  }
}

}  // namespace
}  // namespace eq
