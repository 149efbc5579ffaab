// The end-to-end check of the quantized-source readers: the shared FP8
// (DeepSeek-V3 release layout) and MXFP4 (gpt-oss release layout) checkpoints,
// read through io::SourceTensors, give exactly the weights their reference
// outputs were computed with. Each folder's reference.json records
// quantization.dequantized_tensors_sha256 over every tensor after
// dequantization, sorted by name: the name, one zero byte, then the float32
// values little-endian in C order, quantized tensors under the bf16
// checkpoint's names and layout.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/quantized_source.h"
#include "io/safetensors.h"
#include "test_support.h"

namespace eq {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The stream the recorded sha256 covers, written to `out`. An mxfp4 stacked
// tensor reads [E, out, in] (its release layout) and is stored [E, in, out] in
// the bf16 checkpoint (x @ W): transposed back here.
void write_dequantized(const fs::path& model, const fs::path& out) {
  const json config = json::parse(std::ifstream(model / "config.json"));
  const auto ckpt = io::Checkpoint::open(model.string());
  const io::SourceTensors src(*ckpt, io::parse_quantization_config(config, (model / "config.json").string()));
  std::ofstream f(out, std::ios::binary);
  for (const std::string& name : src.names()) {  // sorted
    const io::SourceTensors::Info& info = src.info(name);
    std::vector<float> v = src.load_f32(name);
    if (info.encoding == io::SourceTensors::Encoding::kMxfp4 && info.shape.size() == 3) {
      const int64_t E = info.shape[0], R = info.shape[1], C = info.shape[2];
      std::vector<float> t(v.size());
      for (int64_t e = 0; e < E; ++e)
        for (int64_t r = 0; r < R; ++r)
          for (int64_t c = 0; c < C; ++c) t[(e * C + c) * R + r] = v[(e * R + r) * C + c];
      v.swap(t);
    }
    f.write(name.data(), static_cast<std::streamsize>(name.size()));
    f.put('\0');
    f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
  }
}

TEST(SharedQuantizedTwins, DequantizeToTheWeightsOfTheirReferences) {
  EQ_REQUIRE_SHARED();
  const fs::path dir = test::temp_dir("quantized_twins");
  int checked = 0;
  for (const char* name : {"deepseek_v3-small-fp8", "gpt_oss-small-mxfp4"}) {
    const fs::path model = test::shared_dir() / "models" / name;
    if (!fs::exists(model)) {
      std::printf("  %s: not in ../shared, skipped\n", name);
      continue;
    }
    const json ref = json::parse(std::ifstream(model / "reference" / "reference.json"));
    const std::string want = ref.at("quantization").at("dequantized_tensors_sha256");
    const fs::path stream = dir / (std::string(name) + ".bin");
    write_dequantized(model, stream);
    std::string got;
    ASSERT_EQ(test::run_command("sha256sum " + stream.string() + " | cut -c1-64", &got), 0) << got;
    while (!got.empty() && (got.back() == '\n' || got.back() == ' ')) got.pop_back();
    EXPECT_EQ(got, want) << name << ": the dequantized weights differ from the reference's";
    std::printf("  %s: sha256 of the dequantized tensors %s (recorded %s)\n", name, got.c_str(), want.c_str());
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no quantized shared model present";
}

}  // namespace
}  // namespace eq
