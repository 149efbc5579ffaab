// FormatTraits::import_mxfp4: an MXFP4 source matrix (release layout) taken
// into the mxfp4 format bit for bit. Checked against a float64 decode of the
// release bytes, and by mapping our parts back to the release bytes with an
// inverse written from the layout in docs/formats.md.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>

#include "core/error.h"
#include "quant/format.h"
#include "quant_test_util.h"
#include "support/test_formats.h"

namespace eq::quant {
namespace {

double e2m1(uint8_t nibble) {
  static const double kValues[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
  return (nibble & 8) ? -kValues[nibble & 7] : kValues[nibble & 7];  // nibble 8 is -0
}

struct Release {
  std::vector<uint8_t> blocks, scales;  // [rows, G, 16], [rows, G]
};

Release random_release(int64_t rows, int64_t cols, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Release r;
  r.blocks.resize(static_cast<size_t>(rows * cols / 2));
  r.scales.resize(static_cast<size_t>(rows * cols / 32));
  for (auto& b : r.blocks) b = static_cast<uint8_t>(rng());
  for (size_t i = 0; i < r.blocks.size(); i += 7) r.blocks[i] = 0x88;  // -0 in both nibbles
  for (auto& s : r.scales) s = static_cast<uint8_t>(rng() % 255);
  const uint8_t extremes[] = {0, 1, 127, 253, 254};
  for (size_t i = 0; i < std::size(extremes) && i < r.scales.size(); ++i) r.scales[i * 5 % r.scales.size()] = extremes[i];
  return r;
}

// Inverse of the stored layout (docs/formats.md, mxfp4 and the column bit
// stream): code(k, n) = (qweight[k / 8, n] >> 4 (k % 8)) & 0xF, scale byte at
// scales[k / 32, n]; release byte j of block (n, g) = code(32g + 2j, n) |
// code(32g + 2j + 1, n) << 4.
Release to_release(const QuantizedMatrix& q) {
  const int64_t rows = q.rows, cols = q.cols, groups = cols / 32;
  const auto* qweight = reinterpret_cast<const uint32_t*>(q.parts[0].bytes.data());
  const uint8_t* scales = q.parts[1].bytes.data();
  auto code = [&](int64_t k, int64_t n) { return (qweight[(k / 8) * rows + n] >> (4 * (k % 8))) & 0xFu; };
  Release r;
  r.blocks.resize(static_cast<size_t>(rows * groups * 16));
  r.scales.resize(static_cast<size_t>(rows * groups));
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t g = 0; g < groups; ++g) {
      r.scales[static_cast<size_t>(n * groups + g)] = scales[g * rows + n];
      for (int64_t j = 0; j < 16; ++j)
        r.blocks[static_cast<size_t>((n * groups + g) * 16 + j)] =
            static_cast<uint8_t>(code(32 * g + 2 * j, n) | code(32 * g + 2 * j + 1, n) << 4);
    }
  return r;
}

TEST(ImportMxfp4, OnlyTheMxfp4RowHasTheHook) {
  for (const FormatTraits& f : eq::test::all_rows()) EXPECT_EQ(f.import_mxfp4 != nullptr, f.name == "mxfp4") << f.name;
}

TEST(ImportMxfp4, DequantizesExactlyAndMapsBackByteForByte) {
  const FormatTraits& mx = format_by_name("mxfp4");
  ASSERT_NE(mx.import_mxfp4, nullptr);
  const std::pair<int64_t, int64_t> shapes[] = {{1, 32}, {37, 96}, {16, 256}, {64, 2880}};
  uint64_t seed = 3;
  for (const auto& [rows, cols] : shapes) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
    const Release in = random_release(rows, cols, seed++);
    const QuantizedMatrix q = mx.import_mxfp4(in.blocks.data(), in.scales.data(), rows, cols, "t.weight");
    EXPECT_EQ(q.format, &mx);
    EXPECT_NO_THROW(validate_packed(q.view(), "t.weight"));

    std::vector<float> want(static_cast<size_t>(rows * cols));
    for (int64_t n = 0; n < rows; ++n)
      for (int64_t k = 0; k < cols; ++k) {
        const uint8_t byte = in.blocks[static_cast<size_t>(n * cols / 2 + k / 2)];
        const double scale = std::ldexp(1.0, in.scales[static_cast<size_t>(n * cols / 32 + k / 32)] - 127);
        want[static_cast<size_t>(n * cols + k)] = static_cast<float>(e2m1(k % 2 ? byte >> 4 : byte & 15) * scale);
      }
    for (Isa isa : test::supported_isas()) {
      test::IsaGuard guard(isa);
      const std::vector<float> got = test::dequantized(q);
      size_t mismatches = 0;
      for (size_t i = 0; i < got.size(); ++i) mismatches += std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(want[i]);
      EXPECT_EQ(mismatches, 0u) << "isa " << static_cast<int>(isa);
    }

    const Release back = to_release(q);
    EXPECT_EQ(back.blocks, in.blocks);
    EXPECT_EQ(back.scales, in.scales);
  }
}

TEST(ImportMxfp4, RefusesNanScalesAndRaggedColumns) {
  const FormatTraits& mx = format_by_name("mxfp4");
  Release in = random_release(4, 64, 9);
  in.scales[5] = 0xFF;
  try {
    mx.import_mxfp4(in.blocks.data(), in.scales.data(), 4, 64, "experts.gate_up_proj");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_NE(std::string(e.what()).find("'experts.gate_up_proj'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("row 2, group 1"), std::string::npos) << e.what();
  }
  in.scales[5] = 127;
  EXPECT_THROW(mx.import_mxfp4(in.blocks.data(), in.scales.data(), 4, 48, "x"), Error);
  EXPECT_THROW(mx.import_mxfp4(in.blocks.data(), in.scales.data(), 0, 64, "x"), Error);
}

}  // namespace
}  // namespace eq::quant
