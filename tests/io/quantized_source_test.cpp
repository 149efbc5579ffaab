// SourceTensors: quantized source checkpoints read exactly (against float64
// references decoded by hand from the raw bytes), logical names, and the
// refusals made before any work.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.h"
#include "core/numeric.h"
#include "io/quantized_source.h"
#include "support/source_twins.h"
#include "test_support.h"

namespace eq {
namespace {

using io::SourceQuant;
using io::SourceQuantization;
using io::SourceTensors;
using nlohmann::json;

struct Stored {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// A checkpoint folder holding `tensors` (model.safetensors) and `config`.
struct Folder {
  std::string path;
  std::unique_ptr<io::Checkpoint> ckpt;
  SourceQuantization quant;
};

Folder write_folder(const std::vector<Stored>& tensors, const json& config) {
  Folder f;
  f.path = test::temp_dir("qsrc").string();
  std::vector<io::TensorToWrite> w;
  for (const Stored& t : tensors) w.push_back({t.name, t.dtype, t.shape, t.bytes});
  io::write_safetensors(f.path + "/model.safetensors", w);
  std::ofstream(f.path + "/config.json") << config.dump();
  f.ckpt = io::Checkpoint::open(f.path);
  f.quant = io::parse_quantization_config(config, f.path + "/config.json");
  return f;
}

json fp8_config(int64_t b0 = 128, int64_t b1 = 128, const char* fmt = nullptr) {
  json qc = {{"quant_method", "fp8"}, {"activation_scheme", "dynamic"}, {"weight_block_size", {b0, b1}}};
  if (fmt) qc["fmt"] = fmt;
  return {{"model_type", "deepseek_v3"}, {"quantization_config", qc}};
}
const json kMxfp4Config = {{"model_type", "gpt_oss"}, {"quantization_config", {{"quant_method", "mxfp4"}}}};
const json kPlainConfig = {{"model_type", "qwen3_moe"}};

template <typename T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

uint64_t numel(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

// Finite fp8 codes of every kind (zeros, -0, subnormals, extremes).
std::vector<uint8_t> random_fp8(DType dtype, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& c : v) {
    do c = static_cast<uint8_t>(rng());
    while (!std::isfinite(dtype == DType::kF8_E4M3 ? test::fp8_e4m3_reference(c) : test::fp8_e5m2_reference(c)));
  }
  return v;
}

// Scales (1 + m/8) * 2^e: exact in F32, BF16 and F16 alike.
std::vector<float> random_scales(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> s(n);
  for (auto& v : s) v = std::ldexp(1.0f + static_cast<float>(rng() % 8) / 8.0f, static_cast<int>(rng() % 15) - 12);
  return s;
}

std::vector<uint8_t> scale_bytes(const std::vector<float>& s, DType dtype) {
  if (dtype == DType::kF32) return bytes_of(s);
  std::vector<uint16_t> h(s.size());
  for (size_t i = 0; i < s.size(); ++i) h[i] = dtype == DType::kBF16 ? f32_to_bf16(s[i]) : f32_to_f16(s[i]);
  return bytes_of(h);
}

// w[.., r, c] = float(fp8[.., r, c] * scale_inv[.., r / b0, c / b1]), in float64.
std::vector<float> fp8_reference(const std::vector<uint8_t>& codes, const std::vector<float>& scales, DType dtype,
                                 const std::vector<int64_t>& shape, int64_t b0, int64_t b1) {
  const int64_t rows = shape[shape.size() - 2], cols = shape.back();
  const int64_t gr = (rows + b0 - 1) / b0, gc = (cols + b1 - 1) / b1;
  std::vector<float> out(codes.size());
  for (size_t i = 0; i < codes.size(); ++i) {
    const int64_t m = static_cast<int64_t>(i) / (rows * cols), r = static_cast<int64_t>(i) / cols % rows,
                  c = static_cast<int64_t>(i) % cols;
    const double v = dtype == DType::kF8_E4M3 ? test::fp8_e4m3_reference(codes[i]) : test::fp8_e5m2_reference(codes[i]);
    out[i] = static_cast<float>(v * static_cast<double>(scales[static_cast<size_t>((m * gr + r / b0) * gc + c / b1)]));
  }
  return out;
}

// Bitwise equality (so -0 and +0 differ), reporting the first mismatch.
void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(want[i]))
      FAIL() << what << ": element " << i << " is " << got[i] << ", expected " << want[i];
}

Error error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "one line: " << e.what();
    return e;
  }
  ADD_FAILURE() << "no error";
  return Error(ErrorKind::kInternal, "");
}

void expect_error(const std::function<void()>& f, ErrorKind kind, const std::vector<std::string>& mentions) {
  const Error e = error_of(f);
  EXPECT_EQ(e.kind(), kind) << e.what();
  for (const auto& m : mentions) EXPECT_NE(std::string(e.what()).find(m), std::string::npos) << m << ": " << e.what();
}

// ---------------------------------------------------------------------------
// FP8 block scales
// ---------------------------------------------------------------------------

struct Fp8Case {
  DType dtype;
  std::vector<int64_t> shape;
  int64_t b0, b1;
  DType scale_dtype;
};

TEST(SourceTensorsFp8, DequantizesExactlyWithPartialBlocks) {
  const std::vector<Fp8Case> cases = {
      {DType::kF8_E4M3, {200, 300}, 128, 128, DType::kF32},   // grid [2, 3], partial both ways
      {DType::kF8_E5M2, {200, 300}, 128, 128, DType::kF32},
      {DType::kF8_E4M3, {16, 192}, 128, 128, DType::kBF16},   // one partial row block
      {DType::kF8_E5M2, {300, 16}, 128, 128, DType::kF16},    // one partial column block
      {DType::kF8_E4M3, {200, 300}, 64, 128, DType::kF32},    // non-square blocks: grid [4, 3]
      {DType::kF8_E5M2, {130, 129}, 32, 64, DType::kBF16},
      {DType::kF8_E4M3, {3, 70, 50}, 32, 16, DType::kF32},    // stacked: per-expert grids
  };
  uint64_t seed = 1;
  for (const Fp8Case& c : cases) {
    const std::string trace = std::string(dtype_name(c.dtype)) + " " + std::to_string(c.shape[0]) + "x" +
                              std::to_string(c.shape[1]) + " blocks " + std::to_string(c.b0) + "x" +
                              std::to_string(c.b1) + " scales " + std::string(dtype_name(c.scale_dtype));
    SCOPED_TRACE(trace);
    const int64_t rows = c.shape[c.shape.size() - 2], cols = c.shape.back();
    std::vector<int64_t> grid(c.shape.begin(), c.shape.end() - 2);
    grid.push_back((rows + c.b0 - 1) / c.b0);
    grid.push_back((cols + c.b1 - 1) / c.b1);
    const auto codes = random_fp8(c.dtype, numel(c.shape), seed++);
    const auto scales = random_scales(numel(grid), seed++);
    const std::string name = "model.layers.0.mlp.experts.0.down_proj.weight";
    const auto f = write_folder({{name, c.dtype, c.shape, codes},
                                 {name + "_scale_inv", c.scale_dtype, grid, scale_bytes(scales, c.scale_dtype)}},
                                fp8_config(c.b0, c.b1));
    const SourceTensors src(*f.ckpt, f.quant);
    const auto want = fp8_reference(codes, scales, c.dtype, c.shape, c.b0, c.b1);
    expect_same_bits(src.load_f32(name), want, "to_f32");
    if (c.shape.size() == 3) {
      const size_t per = static_cast<size_t>(rows * cols);
      for (int64_t e = 0; e < c.shape[0]; ++e) {
        std::vector<float> slice(per);
        src.slice_to_f32(name, e, slice.data());
        expect_same_bits(slice, {want.begin() + e * per, want.begin() + (e + 1) * per}, "slice " + std::to_string(e));
      }
    }
  }
}

TEST(SourceTensorsFp8, RefusesNonFiniteCodesAndScales) {
  const std::string name = "w.weight";
  auto codes = random_fp8(DType::kF8_E4M3, 40 * 50, 7);
  const auto scales = random_scales(1, 8);
  codes[3 * 50 + 17] = 0x7F;  // E4M3 NaN
  {
    const auto f = write_folder({{name, DType::kF8_E4M3, {40, 50}, codes},
                                 {name + "_scale_inv", DType::kF32, {1, 1}, bytes_of(scales)}},
                                fp8_config());
    const SourceTensors src(*f.ckpt, f.quant);
    expect_error([&] { src.load_f32(name); }, ErrorKind::kInvalidInput, {f.path, "'w.weight'", "0x7f", "[3, 17]"});
  }
  codes[3 * 50 + 17] = 0xFF;  // the negative NaN
  {
    const auto f = write_folder({{name, DType::kF8_E4M3, {40, 50}, codes},
                                 {name + "_scale_inv", DType::kF32, {1, 1}, bytes_of(scales)}},
                                fp8_config());
    expect_error([&] { SourceTensors(*f.ckpt, f.quant).load_f32(name); }, ErrorKind::kInvalidInput, {"0xff", "[3, 17]"});
  }
  auto e5 = random_fp8(DType::kF8_E5M2, 40 * 50, 9);
  e5[39 * 50 + 49] = 0x7C;  // E5M2 +Inf
  {
    const auto f = write_folder({{name, DType::kF8_E5M2, {40, 50}, e5},
                                 {name + "_scale_inv", DType::kF32, {1, 1}, bytes_of(scales)}},
                                fp8_config());
    expect_error([&] { SourceTensors(*f.ckpt, f.quant).load_f32(name); }, ErrorKind::kInvalidInput,
                 {"'w.weight'", "0x7c", "[39, 49]"});
  }
  codes[3 * 50 + 17] = 0x38;
  const std::vector<float> nan_scale = {std::nanf("")};
  const auto f = write_folder({{name, DType::kF8_E4M3, {40, 50}, codes},
                               {name + "_scale_inv", DType::kF32, {1, 1}, bytes_of(nan_scale)}},
                              fp8_config());
  expect_error([&] { SourceTensors(*f.ckpt, f.quant).load_f32(name); }, ErrorKind::kInvalidInput,
               {"'w.weight_scale_inv'", "non-finite", "[0, 0]"});
}

// ---------------------------------------------------------------------------
// MXFP4 (gpt-oss release layout)
// ---------------------------------------------------------------------------

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// Scale bytes 0 .. 252 with the extremes (0, 1, 251, 252) and 127 forced in:
// every E2M1 code times 2^(252 - 127) is finite (2^125 x 6 < FLT_MAX); larger
// scales overflow with large codes (SourceTensorsMxfp4.ScaleFeIsReadUntilItsProductOverflows).
std::vector<uint8_t> random_e8m0(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng() % 253);
  const uint8_t extremes[] = {0, 1, 127, 251, 252};
  for (size_t i = 0; i < std::size(extremes) && i < n; ++i) v[i * 3 % n] = extremes[i];
  return v;
}

// value of element k of row r = E2M1(nibble) * 2^(scale - 127), float64, rounded once.
std::vector<float> mxfp4_reference(const std::vector<uint8_t>& blocks, const std::vector<uint8_t>& scales,
                                   int64_t total_rows, int64_t groups) {
  std::vector<float> out(static_cast<size_t>(total_rows * groups * 32));
  for (int64_t r = 0; r < total_rows; ++r)
    for (int64_t k = 0; k < groups * 32; ++k) {
      const int64_t g = k / 32, j = (k % 32) / 2;
      const uint8_t byte = blocks[static_cast<size_t>((r * groups + g) * 16 + j)];
      const uint8_t nibble = k % 2 == 0 ? byte & 15 : byte >> 4;
      const double v = test::e2m1_reference(nibble) *
                       std::ldexp(1.0, static_cast<int>(scales[static_cast<size_t>(r * groups + g)]) - 127);
      out[static_cast<size_t>(r * groups * 32 + k)] = static_cast<float>(v);
    }
  return out;
}

TEST(SourceTensorsMxfp4, Stacked3DToF32SlicesAndRawBytes) {
  const int64_t E = 3, R = 5, G = 4;
  const auto blocks = random_bytes(static_cast<size_t>(E * R * G * 16), 11);
  const auto scales = random_e8m0(static_cast<size_t>(E * R * G), 12);
  const std::string p = "model.layers.0.mlp.experts.gate_up_proj";
  const auto f = write_folder({{p + "_blocks", DType::kU8, {E, R, G, 16}, blocks},
                               {p + "_scales", DType::kU8, {E, R, G}, scales}},
                              kMxfp4Config);
  const SourceTensors src(*f.ckpt, f.quant);
  ASSERT_TRUE(src.has(p));
  EXPECT_EQ(src.info(p).shape, (std::vector<int64_t>{E, R, G * 32}));
  const auto want = mxfp4_reference(blocks, scales, E * R, G);
  expect_same_bits(src.load_f32(p), want, "to_f32");
  const size_t per = static_cast<size_t>(R * G * 32);
  for (int64_t e = 0; e < E; ++e) {
    std::vector<float> slice(per);
    src.slice_to_f32(p, e, slice.data());
    expect_same_bits(slice, {want.begin() + e * per, want.begin() + (e + 1) * per}, "slice " + std::to_string(e));
    const auto raw = src.mxfp4_slice(p, e);
    EXPECT_EQ(raw.rows, R);
    EXPECT_EQ(raw.cols, G * 32);
    ASSERT_EQ(raw.blocks.size(), static_cast<size_t>(R * G * 16));
    ASSERT_EQ(raw.scales.size(), static_cast<size_t>(R * G));
    EXPECT_TRUE(std::equal(raw.blocks.begin(), raw.blocks.end(), blocks.begin() + e * R * G * 16));
    EXPECT_TRUE(std::equal(raw.scales.begin(), raw.scales.end(), scales.begin() + e * R * G));
  }
  expect_error([&] { src.mxfp4_slice(p, E); }, ErrorKind::kInvalidInput, {f.path, "out of range"});
  expect_error([&] { src.slice_to_f32(p, -1, nullptr); }, ErrorKind::kInvalidInput, {"out of range"});
}

TEST(SourceTensorsMxfp4, TwoDimensionalForm) {
  const int64_t R = 7, G = 3;
  const auto blocks = random_bytes(static_cast<size_t>(R * G * 16), 21);
  const auto scales = random_e8m0(static_cast<size_t>(R * G), 22);
  const auto f = write_folder(
      {{"lm.weight_blocks", DType::kU8, {R, G, 16}, blocks}, {"lm.weight_scales", DType::kU8, {R, G}, scales}},
      kMxfp4Config);
  const SourceTensors src(*f.ckpt, f.quant);
  EXPECT_EQ(src.info("lm.weight").shape, (std::vector<int64_t>{R, G * 32}));
  expect_same_bits(src.load_f32("lm.weight"), mxfp4_reference(blocks, scales, R, G), "to_f32");
  const auto raw = src.mxfp4_slice("lm.weight", 0);
  EXPECT_EQ(raw.rows, R);
  EXPECT_EQ(raw.cols, G * 32);
  EXPECT_TRUE(std::equal(raw.blocks.begin(), raw.blocks.end(), blocks.begin(), blocks.end()));
  EXPECT_TRUE(std::equal(raw.scales.begin(), raw.scales.end(), scales.begin(), scales.end()));
  expect_error([&] { src.mxfp4_slice("lm.weight", 1); }, ErrorKind::kInvalidInput, {"out of range"});
  std::vector<float> dst(static_cast<size_t>(R * G * 32));
  expect_error([&] { src.slice_to_f32("lm.weight", 0, dst.data()); }, ErrorKind::kInvalidInput,
               {"'lm.weight'", "not a stacked tensor"});
}

TEST(SourceTensorsMxfp4, RefusesTheNanScaleByte) {
  auto scales = random_e8m0(6, 31);
  scales[4] = 0xFF;
  const auto f = write_folder({{"x_blocks", DType::kU8, {3, 2, 16}, random_bytes(96, 32)},
                               {"x_scales", DType::kU8, {3, 2}, scales}},
                              kMxfp4Config);
  expect_error([&] { SourceTensors(*f.ckpt, f.quant).load_f32("x"); }, ErrorKind::kInvalidInput,
               {f.path, "'x_scales'", "0xff", "[2, 0]"});
}

// E8M0 0xFE is 2^127: finite times a code up to 1.5, an overflow from 2 up.
// The decoded value decides (io/finite_values.h), named by its flat index.
TEST(SourceTensorsMxfp4, ScaleFeIsReadUntilItsProductOverflows) {
  std::vector<uint8_t> blocks(2 * 16, 0x22);  // every element 1.0 (nibble 2)
  blocks[16 + 3] = 0x32;                       // row 1, element 7 (high nibble): 1.5
  const std::vector<uint8_t> scales = {127, 0xFE};
  {
    const auto f = write_folder({{"x_blocks", DType::kU8, {2, 1, 16}, blocks}, {"x_scales", DType::kU8, {2, 1}, scales}},
                                kMxfp4Config);
    const auto v = SourceTensors(*f.ckpt, f.quant).load_f32("x");
    EXPECT_EQ(v[0], 1.0f);
    EXPECT_EQ(v[32 + 7], std::ldexp(1.5f, 127));
  }
  blocks[16 + 3] = 0x52;  // element 7: 3.0 x 2^127 overflows
  const auto f = write_folder({{"x_blocks", DType::kU8, {2, 1, 16}, blocks}, {"x_scales", DType::kU8, {2, 1}, scales}},
                              kMxfp4Config);
  expect_error([&] { SourceTensors(*f.ckpt, f.quant).load_f32("x"); }, ErrorKind::kInvalidInput,
               {f.path, "tensor 'x' holds a non-finite value (+inf) at flat index 39 [1, 7]"});
  expect_error([&] { SourceTensors(*f.ckpt, f.quant).check_finite("x_blocks"); }, ErrorKind::kInvalidInput,
               {"flat index 39 [1, 7]"});
  // Handed out raw (a pack moves MXFP4 bits into an MXFP4 format unchanged).
  expect_error([&] { SourceTensors(*f.ckpt, f.quant).mxfp4_slice("x", 0); }, ErrorKind::kInvalidInput,
               {"tensor 'x' holds a non-finite value (+inf) at flat index 39 [1, 7]"});
}

// A block scale times a finite code that overflows float32 is refused by the
// decoded value; a negative scale, or a 0 scale over a non-zero code, by the
// scale (the reference quantizer's scale is max|block| / 448: positive, or 0
// for an all-zero block).
TEST(SourceTensorsFp8, RefusesOverflowingNegativeAndZeroScales) {
  const std::string name = "w.weight";
  std::vector<uint8_t> codes(4 * 6, 0x38);  // E4M3 1.0
  codes[1 * 6 + 4] = 0x7E;                  // 448
  auto folder = [&](const std::vector<float>& scales) {
    return write_folder({{name, DType::kF8_E4M3, {4, 6}, codes},
                         {name + "_scale_inv", DType::kF32, {2, 2}, bytes_of(scales)}},
                        fp8_config(2, 3));
  };
  {
    const auto f = folder({1.0f, 1e36f, 1.0f, 1.0f});  // block (0, 1): 448 x 1e36 = inf
    expect_error([&] { SourceTensors(*f.ckpt, f.quant).load_f32(name); }, ErrorKind::kInvalidInput,
                 {f.path, "tensor 'w.weight' holds a non-finite value (+inf) at flat index 10 [1, 4]"});
    expect_error([&] { SourceTensors(*f.ckpt, f.quant).check_finite(name); }, ErrorKind::kInvalidInput,
                 {"flat index 10 [1, 4]"});
  }
  {
    const auto f = folder({1.0f, 1.0f, -0.5f, 1.0f});
    expect_error([&] { SourceTensors(*f.ckpt, f.quant).load_f32(name); }, ErrorKind::kInvalidInput,
                 {"'w.weight_scale_inv'", "negative scale", "[1, 0]"});
  }
  {
    const auto f = folder({1.0f, 1.0f, 1.0f, 0.0f});  // block (1, 1) holds non-zero codes
    expect_error([&] { SourceTensors(*f.ckpt, f.quant).load_f32(name); }, ErrorKind::kInvalidInput,
                 {"'w.weight_scale_inv'", "the scale 0 at [1, 1]", "code 0x38 at [2, 3]"});
  }
  // A 0 scale over a block of zeros (+0 and -0 codes) is what the reference
  // writes for such a block: read as zeros.
  for (int64_t r = 2; r < 4; ++r)
    for (int64_t c = 3; c < 6; ++c) codes[static_cast<size_t>(r * 6 + c)] = (r + c) % 2 ? 0x80 : 0x00;
  const auto f = folder({1.0f, 1.0f, 1.0f, 0.0f});
  const auto v = SourceTensors(*f.ckpt, f.quant).load_f32(name);
  EXPECT_EQ(v[2 * 6 + 3], 0.0f);
  EXPECT_EQ(v[0], 1.0f);
}

// Plain float tensors follow the same rule, whole or slice by slice (the
// flat index counts from the start of the whole tensor).
TEST(SourceTensorsPlain, NonFiniteValuesAreRefusedNamingTheFlatIndex) {
  std::vector<uint16_t> h(3 * 2 * 4, f32_to_f16(0.25f));
  h[2 * 8 + 1 * 4 + 2] = 0xFC00;  // F16 -inf in slice 2
  std::vector<uint16_t> b(5, f32_to_bf16(1.0f));
  b[4] = 0x7FC1;  // a BF16 NaN
  const auto f = write_folder({{"stack", DType::kF16, {3, 2, 4}, bytes_of(h)}, {"norm", DType::kBF16, {5}, bytes_of(b)}},
                              kPlainConfig);
  const SourceTensors src(*f.ckpt, f.quant);
  expect_error([&] { src.load_f32("stack"); }, ErrorKind::kInvalidInput,
               {f.path, "tensor 'stack' holds a non-finite value (-inf) at flat index 22 [2, 1, 2]"});
  std::vector<float> slice(8);
  EXPECT_NO_THROW(src.slice_to_f32("stack", 1, slice.data()));
  EXPECT_EQ(slice[0], 0.25f);
  expect_error([&] { src.slice_to_f32("stack", 2, slice.data()); }, ErrorKind::kInvalidInput,
               {"flat index 22 [2, 1, 2]"});
  expect_error([&] { src.load_f32("norm"); }, ErrorKind::kInvalidInput,
               {"tensor 'norm' holds a non-finite value (nan) at flat index 4 [4]"});
  expect_error([&] { src.check_finite("norm"); }, ErrorKind::kInvalidInput, {"flat index 4 [4]"});
}

// ---------------------------------------------------------------------------
// Logical names
// ---------------------------------------------------------------------------

TEST(SourceTensorsNames, ScalesHiddenBlocksMergedPlainUntouched) {
  const std::vector<float> norm = {1.0f, 2.0f, -3.0f, 0.5f};
  const std::vector<int32_t> ids = {1, 2, 3};
  const auto codes = random_fp8(DType::kF8_E4M3, 200 * 300, 41);
  const auto s = random_scales(6, 42);
  const auto f = write_folder({{"a.weight", DType::kF8_E4M3, {200, 300}, codes},
                               {"a.weight_scale_inv", DType::kF32, {2, 3}, bytes_of(s)},
                               {"norm.weight", DType::kF32, {4}, bytes_of(norm)},
                               {"ids", DType::kI32, {3}, bytes_of(ids)}},
                              fp8_config());
  const SourceTensors src(*f.ckpt, f.quant);
  EXPECT_EQ(src.names(), (std::vector<std::string>{"a.weight", "ids", "norm.weight"}));
  EXPECT_FALSE(src.has("a.weight_scale_inv"));
  const auto& a = src.info("a.weight");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{200, 300}));
  EXPECT_EQ(a.stored, DType::kF8_E4M3);
  EXPECT_EQ(a.encoding, SourceTensors::Encoding::kFp8Block);
  EXPECT_EQ(a.stored_bytes, 200u * 300u + 6u * 4u);
  EXPECT_EQ(a.numel(), 60000u);
  const auto& n = src.info("norm.weight");
  EXPECT_EQ(n.encoding, SourceTensors::Encoding::kPlain);
  EXPECT_EQ(n.stored, DType::kF32);
  EXPECT_EQ(n.stored_bytes, 16u);
  expect_same_bits(src.load_f32("norm.weight"), norm, "plain");
  expect_error([&] { src.load_f32("ids"); }, ErrorKind::kInvalidInput, {"'ids'", "I32"});
  expect_error([&] { src.info("a.weight_scale_inv"); }, ErrorKind::kInvalidInput, {f.path, "'a.weight_scale_inv'"});
  EXPECT_EQ(src.quantization().summary(), "fp8, 128x128 block scales");
  EXPECT_EQ(&src.checkpoint(), f.ckpt.get());

  const auto m = write_folder({{"e.down_blocks", DType::kU8, {2, 3, 4, 16}, random_bytes(384, 43)},
                               {"e.down_scales", DType::kU8, {2, 3, 4}, random_e8m0(24, 44)},
                               {"e.down_bias", DType::kBF16, {2, 3}, random_bytes(12, 45)}},
                              kMxfp4Config);
  const SourceTensors mx(*m.ckpt, m.quant);
  EXPECT_EQ(mx.names(), (std::vector<std::string>{"e.down", "e.down_bias"}));
  const auto& d = mx.info("e.down");
  EXPECT_EQ(d.shape, (std::vector<int64_t>{2, 3, 128}));
  EXPECT_EQ(d.stored, DType::kU8);
  EXPECT_EQ(d.encoding, SourceTensors::Encoding::kMxfp4);
  EXPECT_EQ(d.stored_bytes, 384u + 24u);
  EXPECT_EQ(mx.info("e.down_bias").encoding, SourceTensors::Encoding::kPlain);
  expect_error([&] { mx.mxfp4_slice("e.down_bias", 0); }, ErrorKind::kInvalidInput, {"'e.down_bias'", "mxfp4"});
}

// ---------------------------------------------------------------------------
// Refusals (in the constructor: before any work)
// ---------------------------------------------------------------------------

TEST(SourceTensorsRefusals, MissingScalesOrMethodAreUnsupported) {
  const auto codes = random_fp8(DType::kF8_E4M3, 64 * 64, 51);
  const auto one = bytes_of(std::vector<float>{1.0f});
  {
    const auto f = write_folder({{"w.weight", DType::kF8_E4M3, {64, 64}, codes}}, fp8_config());
    expect_error([&] { SourceTensors(*f.ckpt, f.quant); }, ErrorKind::kUnsupported,
                 {f.path, "'w.weight'", "'w.weight_scale_inv'"});
  }
  {
    const auto f = write_folder({{"w.weight", DType::kF8_E4M3, {64, 64}, codes},
                                 {"w.weight_scale_inv", DType::kF32, {1, 1}, one}},
                                kPlainConfig);
    expect_error([&] { SourceTensors(*f.ckpt, f.quant); }, ErrorKind::kUnsupported,
                 {f.path, "'w.weight'", "F8_E4M3", "no fp8"});
  }
  {
    const auto f = write_folder({{"p_blocks", DType::kU8, {2, 1, 16}, random_bytes(32, 52)}}, kMxfp4Config);
    expect_error([&] { SourceTensors(*f.ckpt, f.quant); }, ErrorKind::kUnsupported, {f.path, "'p_blocks'", "'p_scales'"});
  }
  {
    const auto f = write_folder({{"p_scales", DType::kU8, {2, 1}, random_bytes(2, 53)}}, kMxfp4Config);
    expect_error([&] { SourceTensors(*f.ckpt, f.quant); }, ErrorKind::kUnsupported, {f.path, "'p_scales'", "'p_blocks'"});
  }
  {
    const auto f = write_folder({{"p_blocks", DType::kU8, {2, 1, 16}, random_bytes(32, 54)},
                                 {"p_scales", DType::kU8, {2, 1}, random_bytes(2, 55)}},
                                fp8_config());
    expect_error([&] { SourceTensors(*f.ckpt, f.quant); }, ErrorKind::kUnsupported, {f.path, "'p_blocks'", "mxfp4"});
  }
}

TEST(SourceTensorsRefusals, WrongShapesAndDtypesAreInvalid) {
  const auto codes = random_fp8(DType::kF8_E4M3, 200 * 300, 61);
  const auto six = bytes_of(random_scales(6, 62));
  {  // grid [2, 3] is what 128x128 would need; the config says 64x128 -> [4, 3]
    const auto f = write_folder({{"w.weight", DType::kF8_E4M3, {200, 300}, codes},
                                 {"w.weight_scale_inv", DType::kF32, {2, 3}, six}},
                                fp8_config(64, 128));
    expect_error([&] { SourceTensors(*f.ckpt, f.quant); }, ErrorKind::kInvalidInput,
                 {f.path, "'w.weight_scale_inv'", "[2, 3]", "'w.weight'", "[4, 3]"});
  }
  {
    const auto f = write_folder({{"w.weight", DType::kF8_E4M3, {200, 300}, codes},
                                 {"w.weight_scale_inv", DType::kF32, {3, 2}, six}},
                                fp8_config());
    expect_error([&] { SourceTensors(*f.ckpt, f.quant); }, ErrorKind::kInvalidInput, {"'w.weight_scale_inv'", "[3, 2]"});
  }
  {
    const auto f = write_folder({{"w.weight", DType::kF8_E4M3, {200, 300}, codes},
                                 {"w.weight_scale_inv", DType::kF32, {2, 3}, six}},
                                fp8_config(128, 128, "e5m2"));
    expect_error([&] { SourceTensors(*f.ckpt, f.quant); }, ErrorKind::kInvalidInput, {"'w.weight'", "e5m2"});
  }
  {
    const auto f = write_folder({{"w.weight", DType::kBF16, {2, 3}, random_bytes(12, 63)},
                                 {"w.weight_scale_inv", DType::kF32, {1, 1}, bytes_of(std::vector<float>{1.0f})}},
                                fp8_config());
    expect_error([&] { SourceTensors(*f.ckpt, f.quant); }, ErrorKind::kInvalidInput,
                 {"'w.weight_scale_inv'", "no F8 tensor", "BF16"});
  }
  {
    const auto f = write_folder({{"p_blocks", DType::kU8, {2, 3, 16}, random_bytes(96, 64)},
                                 {"p_scales", DType::kU8, {2, 2}, random_bytes(4, 65)}},
                                kMxfp4Config);
    expect_error([&] { SourceTensors(*f.ckpt, f.quant); }, ErrorKind::kInvalidInput,
                 {f.path, "'p_blocks'", "'p_scales'", "[2, 3, 16]", "[2, 2]"});
  }
  {
    const auto f = write_folder({{"p_blocks", DType::kU8, {2, 3, 8}, random_bytes(48, 66)},
                                 {"p_scales", DType::kU8, {2, 3}, random_bytes(6, 67)}},
                                kMxfp4Config);
    expect_error([&] { SourceTensors(*f.ckpt, f.quant); }, ErrorKind::kInvalidInput, {"'p_blocks'", "[2, 3, 8]"});
  }
}

}  // namespace
}  // namespace eq
