// The LUT-code trellis formats (trellis{2,3,4}_lut, docs/formats.md): the
// code against its written definition and golden values, its quantization
// error on N(0,1) against 1MAD's bounds, and the VBMI int8 tile decoder of
// the batch path against the scalar definition.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "quant/format.h"
#include "quant/trellis/codebook.h"
#include "quant/trellis/format.h"
#include "quant/trellis/kernels.h"
#include "quant/trellis/gemv.h"

namespace eq::quant {
namespace {

using trellis::Code;

TEST(TrellisLut, CodeMatchesDefinitionAndGoldenValues) {
  double sum = 0, sum2 = 0;
  int largest = 0;
  for (uint32_t s = 0; s < 65536; ++s) {
    const uint32_t a = (s ^ (s >> 10)) & 63;
    const uint32_t b = (static_cast<uint32_t>(static_cast<uint8_t>(trellis::kLutA[a])) ^ (s >> 6)) & 63;
    const int y = trellis::kLutA[a] + trellis::kLutB[b];
    ASSERT_EQ(trellis::code_lut(s), y) << s;
    ASSERT_EQ(trellis::code_table(Code::kLut)[s], static_cast<float>(y)) << s;
    sum += y;
    sum2 += double(y) * y;
    largest = std::max(largest, std::abs(y));
  }
  // Golden values (docs/formats.md): a change of either table changes them.
  EXPECT_EQ(trellis::code_lut(0), 8);  // a = 0: A[0] = -20 (byte 0xEC); b = 0xEC & 63 = 44: B[44] = 28
  EXPECT_EQ(trellis::code_lut(1), -22);
  EXPECT_EQ(trellis::code_lut(0x1234), 17);
  EXPECT_EQ(trellis::code_lut(0xFFFF), -6);
  EXPECT_EQ(largest, 106);  // y + 128 is a valid unsigned byte in [22, 234]
  EXPECT_NEAR(sum / 65536, 0.0, 1e-9);
  EXPECT_NEAR(std::sqrt(sum2 / 65536), trellis::kLutStd, 1e-6);
  EXPECT_EQ(trellis::code_of(format_by_name("trellis3_lut")), Code::kLut);
  EXPECT_EQ(trellis::code_of(format_by_name("trellis3")), Code::k1mad);
  EXPECT_EQ(format_by_name("trellis2_lut").weight_bits, 2);
  EXPECT_EQ(&trellis_format(4, Code::kLut), &format_by_name("trellis4_lut"));
}

std::vector<float> gaussian(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = nd(rng);
  return v;
}

// The same bounds as 1MAD's TrellisFormat.MseOnGaussianMeetsBounds, on the same sample.
TEST(TrellisLut, MseOnGaussianMeetsOneMadBounds) {
  const int64_t rows = 128, cols = 512;
  const std::vector<float> w = gaussian(rows * cols, 2024);
  const double bounds[] = {0.0692, 0.0178, 0.00463};
  for (int bits : {2, 3, 4}) {
    const FormatTraits& f = trellis_format(bits, Code::kLut);
    const QuantizedMatrix q = f.quantize(w.data(), rows, cols, {});
    std::vector<float> out(w.size());
    f.dequantize(q.view(), out.data());
    double se = 0;
    for (size_t i = 0; i < w.size(); ++i) se += double(w[i] - out[i]) * (w[i] - out[i]);
    const double mse = se / double(w.size());
    EXPECT_LE(mse, bounds[bits - 2]) << f.name;
    EXPECT_GE(mse, std::pow(2.0, -2 * bits)) << "below the rate-distortion bound: the measurement is broken";
    std::printf("%s MSE on N(0,1), %lld weights: %.5f\n", f.name.data(), static_cast<long long>(w.size()), mse);
  }
}

// Every LUT tile decoder against tile_state + code_lut, on random streams
// (any bytes are a valid tail-biting stream).
TEST(TrellisLut, TileDecodersEqualDefinition) {
  std::mt19937_64 rng(77);
  for (int bits : {2, 3, 4}) {
    for (int rep = 0; rep < 20; ++rep) {
      std::vector<uint8_t> tile(static_cast<size_t>(trellis::tile_bytes(bits)));
      for (uint8_t& b : tile) b = static_cast<uint8_t>(rng());
      float factor[16];
      for (int r = 0; r < 16; ++r) factor[r] = 0.01f * (r + 1);
      std::vector<float> rows(16 * 20), panel(256);
      std::vector<uint8_t> codes(256), fast(256);
      trellis::decode_tile_lut_generic(tile.data(), bits, factor, rows.data(), 20);
      trellis::decode_tile_panel_lut_generic(tile.data(), bits, factor, panel.data());
      trellis::decode_tile_int8_lut_generic(tile.data(), bits, codes.data());
      for (int t = 0; t < 256; ++t) {
        const int r = t / 16, c = t % 16;
        const int y = trellis::code_lut(trellis::tile_state(tile.data(), bits, t));
        ASSERT_EQ(rows[r * 20 + c], static_cast<float>(y) * factor[r]) << bits << " " << t;
        ASSERT_EQ(panel[c * 16 + r], static_cast<float>(y) * factor[r]) << bits << " " << t;
        ASSERT_EQ(codes[(c / 4) * 64 + r * 4 + c % 4], y + 128) << bits << " " << t;
      }
      if (detected_isa() >= Isa::kAvx512 && trellis::cpu_has_avx512_vbmi()) {
        trellis::decode_tile_int8_lut_avx512_vbmi(tile.data(), bits, fast.data());
        ASSERT_EQ(fast, codes) << "VBMI int8 decoder, trellis" << bits << "_lut";
        std::vector<float> fast_rows(16 * 20, -1.0f), fast_panel(256, -1.0f);
        trellis::decode_tile_lut_avx512_vbmi(tile.data(), bits, factor, fast_rows.data(), 20);
        trellis::decode_tile_panel_lut_avx512_vbmi(tile.data(), bits, factor, fast_panel.data());
        for (int r = 0; r < 16; ++r)
          for (int c = 0; c < 16; ++c) ASSERT_EQ(fast_rows[r * 20 + c], rows[r * 20 + c]) << "VBMI rows " << r << " " << c;
        ASSERT_EQ(fast_panel, panel) << "VBMI panel decoder, trellis" << bits << "_lut";
      }
    }
  }
}

}  // namespace
}  // namespace eq::quant
