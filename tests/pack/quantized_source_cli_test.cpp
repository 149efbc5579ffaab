// Quantized source checkpoints end to end: an FP8 twin of the bundled model
// (DeepSeek-V3 release layout, 128x128 block scales) against a float32 twin
// holding exactly its dequantized values gives the same bits per byte, the same
// packed experts and the same packed-model output; an MXFP4-source expert
// packed to mxfp4 keeps its codes and scales bit for bit; every quantization
// method we cannot read is refused with exit 4 before any work.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <random>

#include <nlohmann/json.hpp>

#include "core/numeric.h"
#include "io/quantized_source.h"
#include "io/safetensors.h"
#include "quant/format.h"
#include "support/source_twins.h"
#include "test_support.h"

namespace eq {
namespace {

using nlohmann::json;
using test::binary;
using test::run_command;

std::string text_path() { return (test::data_dir() / "corpus" / "eval_prose.txt.zst").string(); }

double bits_per_byte(const std::filesystem::path& model) {
  std::string out;
  const std::string cmd = binary() + " perplexity --model " + model.string() + " --text " + text_path() +
                          " --max-tokens 4096 --json 2>&1";
  EXPECT_EQ(run_command(cmd, &out), 0) << out;
  const json j = json::parse(out.substr(out.find('{')));
  return j.at("bits_per_byte").get<double>();
}

// Every non-copied tensor of a pack (expert groups, quantized matrices) by name -> checksum.
std::map<std::string, uint64_t> packed_hashes(const std::filesystem::path& pack) {
  std::ifstream in(pack / "manifest.json");
  const json m = json::parse(in);
  std::map<std::string, uint64_t> h;
  for (const auto& t : m.at("tensors"))
    if (t.at("kind").get<std::string>() != "copy")
      h[t.at("name").get<std::string>()] = std::stoull(t.at("xxh64").get<std::string>(), nullptr, 16);
  return h;
}

class QuantizedSourceCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::filesystem::path(test::temp_dir("qsource_cli"));
    twins_ = new test::SourceTwins(test::write_source_twins(test::data_dir() / "tinymoe", *dir_ / "twins"));
  }
  static void TearDownTestSuite() {
    delete twins_;
    delete dir_;
  }
  static std::filesystem::path* dir_;
  static test::SourceTwins* twins_;
};
std::filesystem::path* QuantizedSourceCli::dir_ = nullptr;
test::SourceTwins* QuantizedSourceCli::twins_ = nullptr;

TEST_F(QuantizedSourceCli, Fp8TwinReadsAsItsDequantizedFloat32Twin) {
  const double fp8 = bits_per_byte(twins_->fp8), f32 = bits_per_byte(twins_->f32);
  EXPECT_NEAR(fp8, f32, 1e-5);
  // Reading the fp8 codes as weights (what a reader ignoring the scales does)
  // would be far off; the bf16 source is near but not equal.
  const double bf16 = bits_per_byte(test::data_dir() / "tinymoe");
  EXPECT_NE(fp8, bf16);
  EXPECT_NEAR(fp8, bf16, 0.05);
  std::printf("bits per byte: fp8 twin %.6f, float32 twin %.6f, bf16 source %.6f\n", fp8, f32, bf16);
}

TEST_F(QuantizedSourceCli, Fp8TwinPacksAndRunsAsItsFloat32Twin) {
  std::string out;
  std::map<std::string, std::string> generated;
  std::map<std::string, std::map<std::string, uint64_t>> hashes;
  for (const auto& [label, model] : {std::pair{"fp8", twins_->fp8}, std::pair{"f32", twins_->f32}}) {
    const auto pack = *dir_ / (std::string("pack_") + label);
    ASSERT_EQ(run_command(binary() + " pack --model " + model.string() + " --uniform fp4_g32 --attn-format int8_row -o " +
                              pack.string() + " --force 2>&1",
                          &out),
              0)
        << out;
    hashes[label] = packed_hashes(pack);
    ASSERT_EQ(run_command(binary() + " generate --packed " + pack.string() + " --prompt 'import os' -n 24 --json 2>&1",
                          &out),
              0)
        << out;
    generated[label] = json::parse(out.substr(out.find('{'))).at("tokens").dump();
  }
  EXPECT_FALSE(hashes["fp8"].empty());
  EXPECT_EQ(hashes["fp8"], hashes["f32"]);
  EXPECT_EQ(generated["fp8"], generated["f32"]);
}

TEST_F(QuantizedSourceCli, InspectShowsTheSourceQuantizationPerPart) {
  std::string out;
  ASSERT_EQ(run_command(binary() + " inspect " + twins_->fp8.string() + " --json 2>&1", &out), 0) << out;
  const json j = json::parse(out.substr(out.find('{')));
  EXPECT_EQ(j.at("source_quantization").at("method"), "fp8 e4m3, 128x128 block scales");
  EXPECT_EQ(j.at("source_quantization").at("stored").at("routed_experts"), json::array({"F8_E4M3 + block scales"}));
  EXPECT_EQ(j.at("source_quantization").at("stored").at("embeddings_head"), json::array({"BF16"}));
}

// Every method we cannot read exactly: exit 4 from every command, naming the
// file and the method, before any work (no output folder appears).
TEST_F(QuantizedSourceCli, UnsupportedMethodsAreRefusedWithExit4) {
  for (const char* method : {"gptq", "awq", "compressed-tensors", "bitsandbytes"}) {
    const auto model = *dir_ / (std::string("refused_") + method);
    std::filesystem::copy(twins_->f32, model, std::filesystem::copy_options::recursive);
    json cfg = json::parse(std::ifstream(model / "config.json"));
    cfg["quantization_config"] = {{"quant_method", method}, {"bits", 4}};
    std::ofstream(model / "config.json") << cfg.dump(2);
    std::string out;
    for (const std::string& cmd :
         {" perplexity --model " + model.string() + " --text " + text_path(),
          " pack --model " + model.string() + " --uniform fp4_g32 -o " + (*dir_ / "never").string(),
          " inspect " + model.string()}) {
      EXPECT_EQ(run_command(binary() + cmd + " 2>&1", &out), 4) << cmd << "\n" << out;
      EXPECT_NE(out.find(method), std::string::npos) << out;
      EXPECT_NE(out.find("config.json"), std::string::npos) << out;
    }
    EXPECT_FALSE(std::filesystem::exists(*dir_ / "never"));
  }
}

// Experts stored as MXFP4 (release layout: "<name>_blocks" [R, G, 16] and
// "<name>_scales" [R, G]) packed to mxfp4: each expert's parts are the
// format's own import of the source bytes (no requantization), and the pack
// dequantizes to exactly the source's values.
TEST_F(QuantizedSourceCli, Mxfp4SourceExpertsPackToMxfp4BitForBit) {
  const auto src = io::Checkpoint::open(twins_->f32.string());
  const auto model = *dir_ / "mxfp4_source";
  std::filesystem::create_directories(model);
  std::mt19937 rng(7);
  std::vector<std::vector<uint8_t>> keep;
  std::vector<io::TensorToWrite> tensors;
  std::vector<std::string> expert_names;
  for (const auto& name : src->tensor_names()) {
    const auto& info = src->info(name);
    if (name.find(".experts.") != std::string::npos && info.shape.size() == 2 && info.shape[1] % 32 == 0) {
      const int64_t rows = info.shape[0], groups = info.shape[1] / 32;
      std::vector<uint8_t> blocks(size_t(rows * groups * 16)), scales(size_t(rows * groups));
      for (auto& b : blocks) b = uint8_t(rng());
      for (auto& s : scales) s = uint8_t(112 + rng() % 16);
      keep.push_back(std::move(blocks));
      tensors.push_back({name + "_blocks", DType::kU8, {rows, groups, 16}, keep.back()});
      keep.push_back(std::move(scales));
      tensors.push_back({name + "_scales", DType::kU8, {rows, groups}, keep.back()});
      expert_names.push_back(name);
    } else {
      tensors.push_back({name, info.dtype, info.shape, src->view(name).bytes()});
    }
  }
  ASSERT_FALSE(expert_names.empty());
  io::write_safetensors((model / "model.safetensors").string(), tensors);
  json cfg = json::parse(std::ifstream(twins_->f32 / "config.json"));
  cfg["quantization_config"] = {{"quant_method", "mxfp4"}};
  std::ofstream(model / "config.json") << cfg.dump(2);

  const auto pack = *dir_ / "mxfp4_pack";
  std::string out;
  ASSERT_EQ(run_command(binary() + " pack --model " + model.string() + " --uniform mxfp4 -o " + pack.string() +
                            " --force 2>&1",
                        &out),
            0)
      << out;
  // Each expert's slot of each stacked group part equals the import of its source bytes.
  const auto ckpt = io::Checkpoint::open(model.string());
  const io::SourceTensors source(*ckpt, io::parse_quantization_config(cfg, "config.json"));
  const auto packed = io::Checkpoint::open(pack.string());
  const json manifest = json::parse(std::ifstream(pack / "manifest.json"));
  const quant::FormatTraits& mx = quant::format_by_name("mxfp4");
  int checked = 0;
  for (const auto& layer : manifest.at("layers")) {
    for (const auto& e : layer.at("experts")) {
      if (e.at("parts").empty()) continue;
      for (const auto& part : e.at("parts")) {
        const std::string proj = part.at("proj");
        const std::string suffix = proj == "gate" ? "gate_proj" : proj == "up" ? "up_proj" : "down_proj";
        const std::string name = "model.layers." + std::to_string(layer.at("layer").get<int>()) + ".mlp.experts." +
                                 std::to_string(e.at("expert").get<int>()) + "." + suffix + ".weight";
        const auto sl = source.mxfp4_slice(name, 0);
        const quant::QuantizedMatrix q = mx.import_mxfp4(sl.blocks.data(), sl.scales.data(), sl.rows, sl.cols, name);
        const std::string part_name = part.at("part");
        const auto view = packed->view(part.at("tensor").get<std::string>());
        const uint64_t offset = part.at("offset").get<uint64_t>(), bytes = part.at("bytes").get<uint64_t>();
        for (const auto& qp : q.parts)
          if (qp.name == part_name) {
            ASSERT_EQ(bytes, qp.bytes.size()) << name << " " << part_name;
            ASSERT_EQ(std::vector<uint8_t>(view.data + offset, view.data + offset + bytes), qp.bytes)
                << name << " " << part_name;
            ++checked;
          }
      }
    }
  }
  EXPECT_GT(checked, 0) << "manifest layout not understood:\n" << manifest.dump().substr(0, 2000);
}

}  // namespace
}  // namespace eq
