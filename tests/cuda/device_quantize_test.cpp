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
#include "quant/cuda/cuda_gpus.h"
#include "quant/cuda/cuda_quantize.h"
#include "quant/device.h"
#include "quant/gpus.h"
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

TEST(DeviceOption, ParsesAGpuListAndRefusesBadOnes) {
  for (const char* bad : {"cuda:", "cuda:a", "cuda:0,", "cuda:-1", "cuda:0,0", "cuda:1x"}) {
    try {
      parse_device(bad);
      FAIL() << "no error for --device " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 2) << bad;
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(parse_device("cuda:0"), Device::kCuda);
  std::string why;
  if (gpu_ready(&why)) {
    EXPECT_EQ(device_count(Device::kCuda), 1u);
    EXPECT_NO_THROW(require_device(Device::kCuda));
    // A GPU index past the visible ones is refused before any work.
    parse_device("cuda:0,4096");
    try {
      require_device(Device::kCuda);
      FAIL() << "no error for a GPU that is not there";
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 4);
      EXPECT_NE(std::string(e.what()).find("GPU 4096"), std::string::npos) << e.what();
    }
  }
  cuda::select_gpus({});  // back to every visible GPU for the other tests
  EXPECT_EQ(device_count(Device::kCpu), 1u);
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

// Squared error of `f`'s round trip of w, weighted by the importance (1 without).
double weighted_sq_error(const FormatTraits& f, const float* w, int64_t rows, int64_t cols, const float* importance,
                         Device device, TrellisSearch search) {
  QuantizeOptions o;
  o.importance = importance;
  o.seed = 99;
  o.device = device;
  set_trellis_search(search);
  const QuantizedMatrix q = f.quantize(w, rows, cols, o);
  set_trellis_search(TrellisSearch::kExact);  // the other tests compare with the CPU's bytes
  std::vector<float> back(static_cast<size_t>(rows * cols));
  f.dequantize(q.view(), back.data());
  double sum = 0;
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t k = 0; k < cols; ++k) {
      const double d = double(w[n * cols + k]) - back[n * cols + k];
      sum += (importance ? importance[k] : 1.0) * d * d;
    }
  return sum;
}

// The half search against the exact one (the CPU's) on the same matrices:
// its error at most 0.5% above, and the same bytes on every run.
void expect_half_close(const std::vector<std::vector<float>>& matrices, int64_t rows, int64_t cols,
                       const float* importance, const std::string& what) {
  for (const FormatTraits& f : all_formats()) {
    if (f.device_quantizer == nullptr || !is_trellis(f)) continue;
    double exact = 0, half = 0;
    for (const auto& w : matrices) {
      exact += weighted_sq_error(f, w.data(), rows, cols, importance, Device::kCpu, TrellisSearch::kExact);
      half += weighted_sq_error(f, w.data(), rows, cols, importance, Device::kCuda, TrellisSearch::kHalf);
    }
    EXPECT_LE(half, exact * 1.005) << f.name << " " << what << ": half " << half << ", exact " << exact;
    EXPECT_GT(half, exact * 0.9) << f.name << " " << what << ": half " << half << ", exact " << exact;
    QuantizeOptions o;
    o.device = Device::kCuda;
    set_trellis_search(TrellisSearch::kHalf);
    const auto& w = matrices.front();
    const QuantizedMatrix a = f.quantize(w.data(), rows, cols, o), b = f.quantize(w.data(), rows, cols, o);
    set_trellis_search(TrellisSearch::kExact);
    for (size_t p = 0; p < a.parts.size(); ++p)
      EXPECT_TRUE(a.parts[p].bytes == b.parts[p].bytes) << f.name << " " << what << ": not deterministic";
  }
}

TEST(DeviceQuantize, TrellisHalfSearchRandomWeights) {
  SKIP_WITHOUT_GPU();
  const int64_t rows = 256, cols = 512;  // 512 tiles a matrix
  std::vector<std::vector<float>> matrices;
  for (uint64_t seed : {21, 22}) matrices.push_back(random_weights(rows, cols, seed));
  const std::vector<float> h = random_importance(cols, 23);
  expect_half_close(matrices, rows, cols, nullptr, "random 256x512");
  expect_half_close(matrices, rows, cols, h.data(), "random 256x512 +importance");
}

TEST(DeviceQuantize, TrellisHalfSearchRealWeights) {
  SKIP_WITHOUT_GPU();
  EQ_REQUIRE_SHARED();
  const auto file = (test::shared_dir() / "models" / "qwen3moe-small" / "model-00001-of-00003.safetensors").string();
  const auto st = io::SafetensorsFile::open(file);
  std::vector<std::vector<float>> matrices;
  int64_t rows = 0, cols = 0;
  for (int e = 0; e < 16; ++e)
    for (const char* proj : {"gate_proj", "up_proj"}) {
      const io::TensorInfo& info = *st->find("model.layers.0.mlp.experts." + std::to_string(e) + "." + proj + ".weight");
      rows = info.shape[0];
      cols = info.shape[1];
      matrices.push_back(st->view(info).to_f32());
    }
  const std::vector<float> h = random_importance(cols, 29);
  expect_half_close(matrices, rows, cols, nullptr, "qwen3moe-small layer 0 gate/up");
  expect_half_close(matrices, rows, cols, h.data(), "qwen3moe-small layer 0 gate/up +importance");
}

}  // namespace
}  // namespace eq::quant
