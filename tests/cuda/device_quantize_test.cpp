// The GPU quantizers against the CPU's (ctest label `cuda`): every row with a
// device quantizer, on random weights (normal, bf16-rounded so that equal
// magnitudes tie, with zero and constant groups), importance weights, odd
// shapes and the bundled model's real weights; every part must be equal
// byte for byte. Builds without EQ_CUDA, and machines without a GPU, skip
// with a message; the option's own checks (exit 4 without a GPU) run
// everywhere.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/numeric.h"
#include "io/safetensors.h"
#include "quant/cuda/cuda_quantize.h"
#include "quant/device.h"
#include "quant/format.h"
#include "test_support.h"

namespace eq::quant {
namespace {

bool gpu_ready(std::string* why) {
  *why = cuda::unavailable_reason();
  return why->empty();
}

#define SKIP_WITHOUT_GPU()                                           \
  do {                                                               \
    std::string why;                                                 \
    if (!gpu_ready(&why)) GTEST_SKIP() << "no GPU quantizer: " << why; \
  } while (0)

std::vector<float> random_weights(int64_t rows, int64_t cols, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> w(static_cast<size_t>(rows * cols));
  for (float& x : w) x = bf16_to_f32(f32_to_bf16(normal(rng)));  // bf16 values: many equal magnitudes
  // A zero group, a constant group and an outlier, where the shape has room.
  if (cols >= 64) {
    for (int64_t k = 0; k < 32; ++k) w[k] = 0.0f;
    for (int64_t k = 32; k < 64; ++k) w[k] = 0.015625f;
  }
  if (rows > 1) w[static_cast<size_t>(cols + 5)] = 0.5f;
  return w;
}

std::vector<float> random_importance(int64_t cols, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<float> e(1.0f);
  std::vector<float> h(static_cast<size_t>(cols));
  for (float& x : h) x = e(rng);
  return h;
}

// Quantizes on both devices and compares every part byte for byte; on a
// difference, the share of equal bytes says how far apart they are.
void expect_same(const FormatTraits& f, const float* w, int64_t rows, int64_t cols, const float* importance,
                 const std::string& what) {
  QuantizeOptions o;
  o.importance = importance;
  o.seed = 1234;
  o.tensor_name = what;
  const QuantizedMatrix cpu = f.quantize(w, rows, cols, o);
  o.device = Device::kCuda;
  const QuantizedMatrix gpu = f.quantize(w, rows, cols, o);
  ASSERT_EQ(cpu.parts.size(), gpu.parts.size()) << f.name << " " << what;
  for (size_t p = 0; p < cpu.parts.size(); ++p) {
    const auto& a = cpu.parts[p].bytes;
    const auto& b = gpu.parts[p].bytes;
    ASSERT_EQ(a.size(), b.size()) << f.name << " " << what << " part " << cpu.parts[p].name;
    size_t same = 0;
    for (size_t i = 0; i < a.size(); ++i) same += a[i] == b[i];
    EXPECT_EQ(same, a.size()) << f.name << " " << what << " part " << cpu.parts[p].name << ": " << same << " of "
                              << a.size() << " bytes equal";
  }
}

bool is_trellis(const FormatTraits& f) { return f.family == "trellis"; }

TEST(DeviceOption, ParsesAndRefusesWithoutGpu) {
  EXPECT_EQ(parse_device("cpu"), Device::kCpu);
  EXPECT_EQ(parse_device("cuda"), Device::kCuda);
  try {
    parse_device("gpu");
    FAIL() << "no error for an unknown device";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
  }
  EXPECT_NO_THROW(require_device(Device::kCpu));
  std::string why;
  if (gpu_ready(&why)) {
    EXPECT_NO_THROW(require_device(Device::kCuda));
  } else {
    try {
      require_device(Device::kCuda);
      FAIL() << "no error for --device cuda without a GPU";
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 4);
      EXPECT_NE(std::string(e.what()).find("--device cuda"), std::string::npos) << e.what();
    }
  }
}

TEST(DeviceOption, EveryFourBitAndAffineAndTrellisRowHasADeviceQuantizer) {
  for (const FormatTraits& f : all_formats()) {
    const bool expected = f.family == "fp4" || f.family == "mxfp4" || f.family == "nvfp4" ||
                          f.family == "affine" || f.family == "trellis";
    EXPECT_EQ(f.device_quantizer != nullptr, expected) << f.name;
  }
}

TEST(DeviceQuantize, StreamFormatsRandomWeights) {
  SKIP_WITHOUT_GPU();
  for (const FormatTraits& f : all_formats()) {
    if (f.device_quantizer == nullptr || is_trellis(f)) continue;
    const int64_t cols = 4 * 128;  // a multiple of every group
    for (int64_t rows : {1, 37, 256}) {
      const std::vector<float> w = random_weights(rows, cols, 7 + rows);
      const std::vector<float> h = random_importance(cols, 11);
      expect_same(f, w.data(), rows, cols, nullptr, "random " + std::to_string(rows) + "x" + std::to_string(cols));
      expect_same(f, w.data(), rows, cols, h.data(), "random+importance " + std::to_string(rows));
    }
  }
}

TEST(DeviceQuantize, TrellisRandomWeights) {
  SKIP_WITHOUT_GPU();
  for (const FormatTraits& f : all_formats()) {
    if (f.device_quantizer == nullptr || !is_trellis(f)) continue;
    // Odd tile counts; importance exercises the feedback path.
    const int64_t rows = 48, cols = 80;
    const std::vector<float> w = random_weights(rows, cols, 3);
    const std::vector<float> h = random_importance(cols, 5);
    expect_same(f, w.data(), rows, cols, nullptr, "random 48x80");
    expect_same(f, w.data(), rows, cols, h.data(), "random+importance 48x80");
  }
}

TEST(DeviceQuantize, BundledModelWeights) {
  SKIP_WITHOUT_GPU();
  const auto file = (test::data_dir() / "tinymoe" / "model.safetensors").string();
  const auto st = io::SafetensorsFile::open(file);
  const std::vector<std::string> names = {"model.layers.0.mlp.experts.0.gate_proj.weight",
                                          "model.layers.0.mlp.experts.0.down_proj.weight"};
  for (const std::string& name : names) {
    const io::TensorInfo& info = *st->find(name);
    const std::vector<float> w = st->view(info).to_f32();
    const int64_t rows = info.shape[0], cols = info.shape[1];
    const std::vector<float> h = random_importance(cols, 17);
    for (const FormatTraits& f : all_formats()) {
      if (f.device_quantizer == nullptr || cols % f.col_multiple != 0 || rows % f.row_multiple != 0) continue;
      expect_same(f, w.data(), rows, cols, nullptr, name);
      expect_same(f, w.data(), rows, cols, h.data(), name + " +importance");
    }
  }
}

}  // namespace
}  // namespace eq::quant
