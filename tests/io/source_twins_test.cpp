// The FP8 twin of the bundled model, read through SourceTensors, is exactly
// its float32 twin: every logical tensor, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/quantized_source.h"
#include "support/source_twins.h"
#include "test_support.h"

namespace eq {
namespace {

nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return nlohmann::json::parse(s.str());
}

TEST(SourceTwins, Fp8TwinReadsExactlyAsTheFloat32Twin) {
  const auto twins = test::write_source_twins(test::data_dir() / "tinymoe", test::temp_dir("twins"));
  const auto fp8_ckpt = io::Checkpoint::open(twins.fp8.string());
  const auto f32_ckpt = io::Checkpoint::open(twins.f32.string());
  const auto fp8_config = read_json(twins.fp8 / "config.json");
  const auto quant = io::parse_quantization_config(fp8_config, (twins.fp8 / "config.json").string());
  EXPECT_EQ(quant.summary(), "fp8 e4m3, 128x128 block scales");
  EXPECT_EQ(io::parse_quantization_config(read_json(twins.f32 / "config.json"), "f32").method, io::SourceQuant::kNone);
  EXPECT_TRUE(std::filesystem::exists(twins.fp8 / "generation_config.json"));

  const io::SourceTensors src(*fp8_ckpt, quant);
  ASSERT_EQ(src.names(), f32_ckpt->tensor_names());
  // attention q/k/v/o and the expert projections of 4 layers x 32 experts
  EXPECT_EQ(twins.quantized.size(), 4u * (4u + 32u * 3u));
  for (const std::string& name : src.names()) {
    SCOPED_TRACE(name);
    const bool quantized = std::binary_search(twins.quantized.begin(), twins.quantized.end(), name);
    EXPECT_EQ(src.info(name).encoding,
              quantized ? io::SourceTensors::Encoding::kFp8Block : io::SourceTensors::Encoding::kPlain);
    EXPECT_EQ(fp8_ckpt->has(name + "_scale_inv"), quantized);
    const std::vector<float> got = src.load_f32(name), want = f32_ckpt->load_f32(name);
    ASSERT_EQ(got.size(), want.size());
    size_t mismatches = 0;
    for (size_t i = 0; i < got.size(); ++i) mismatches += std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(want[i]);
    EXPECT_EQ(mismatches, 0u);
  }
  // The twin really is quantized: an expert weight differs from the bf16 source.
  const auto source = io::Checkpoint::open((test::data_dir() / "tinymoe").string());
  const std::string w = "model.layers.0.mlp.experts.0.up_proj.weight";
  EXPECT_NE(source->load_f32(w), src.load_f32(w));
}

}  // namespace
}  // namespace eq
