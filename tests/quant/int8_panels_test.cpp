// FormatTraits::int8_panels (quant/int8_panels.h): for every format that has
// it, (code - offset) * scale (+ bias) equals dequantize() bit for bit at
// every position of a block, on every ISA; the AVX-512 code kernels write the
// scalar kernels' bytes; misaligned blocks are rejected.
#include <gtest/gtest.h>

#include <cmath>

#include <array>
#include <cstring>
#include <string>

#include "core/error.h"
#include "quant/int8_panels.h"
#include "quant/packed_stream.h"
#include "quant_test_util.h"
#include "support/test_formats.h"

namespace eq::quant {
namespace {

using test::IsaGuard;
using test::normal_matrix;
using test::supported_isas;

// The stored slot of natural k within its unit, inverted: natural k of slot s.
int natural_of(Int8KOrder order, int slot) {
  for (int k = 0; k < kInt8Unit; ++k)
    if (int8_slot(order, k) == slot) return k;
  return -1;
}

TEST(Int8Panels, SlotOrderIsAPermutation) {
  for (Int8KOrder order : {Int8KOrder::kNatural, Int8KOrder::kNibble, Int8KOrder::kCrumb})
    for (int s = 0; s < kInt8Unit; ++s) EXPECT_GE(natural_of(order, s), 0);
  EXPECT_EQ(int8_slot(Int8KOrder::kNibble, 1), 4);   // k0 k2 k4 k6 | k1 ...
  EXPECT_EQ(int8_slot(Int8KOrder::kCrumb, 4), 1);    // k0 k4 k8 k12 | ...
  EXPECT_EQ(int8_slot(Int8KOrder::kCrumb, 13), 7);   // | k1 k5 k9 k13
}

TEST(Int8Panels, CodesTimesScalesEqualDequantize) {
  int checked = 0;
  for (const FormatTraits& f : eq::test::all_rows()) {
    if (!f.int8_panels) continue;
    const Int8Panels& p = *f.int8_panels;
    const int64_t G = std::max<int64_t>(kInt8Unit, f.group_size);
    const int64_t N = 53, K = 3 * G;  // a partial last panel
    const std::vector<float> w = normal_matrix(N, K, 7 + f.name.size(), 0.05f);
    const QuantizedMatrix q = f.quantize(w.data(), N, K, {});
    std::vector<float> want(static_cast<size_t>(N * K));
    {
      IsaGuard generic(Isa::kGeneric);
      f.dequantize(q.view(), want.data());
    }
    // Blocks: the whole matrix, and an inner one.
    for (auto [r0, r1, c0, c1] : {std::array<int64_t, 4>{0, N, 0, K}, std::array<int64_t, 4>{16, 48, G, 3 * G}}) {
      const int64_t nk = c1 - c0, np = (r1 - r0 + 15) / 16, units = nk / kInt8Unit;
      std::vector<uint8_t> first;
      for (Isa isa : supported_isas()) {
        IsaGuard guard(isa);
        std::vector<uint8_t> codes(static_cast<size_t>(np * 16 * nk), 0xAB);
        std::vector<float> scales(static_cast<size_t>(np * 16 * units), NAN), biases(scales.size(), NAN);
        // With a prefetch hint for the whole matrix's origin (no effect on the result).
        p.build(q.view(), r0, r1, c0, c1, codes.data(), scales.data(), biases.data(), 0, 0);
        if (first.empty()) first = codes;
        EXPECT_EQ(codes, first) << f.name << " isa " << isa_name(isa);
        for (int64_t r = r0; r < r0 + np * 16; ++r)
          for (int64_t s = 0; s < nk; ++s) {
            const int64_t pi = (r - r0) / 16, j = (r - r0) % 16, u = s / kInt8Unit;
            const int64_t k = c0 + u * kInt8Unit + natural_of(p.order, static_cast<int>(s % kInt8Unit));
            const int code = codes[pi * nk * 16 + s / 4 * 64 + j * 4 + s % 4];
            const float scale = scales[pi * units * 16 + u * 16 + j];
            float v = static_cast<float>(code - p.offset) * scale;
            if (p.has_biases) v = v + biases[pi * units * 16 + u * 16 + j];
            if (r >= r1) {
              ASSERT_EQ(code, p.offset) << f.name << " padding row " << r;
              ASSERT_EQ(scale, 0.0f);
              continue;
            }
            ASSERT_EQ(std::memcmp(&v, &want[r * K + k], 4), 0)
                << f.name << " isa " << isa_name(isa) << " r " << r << " k " << k << ": " << v << " vs "
                << want[r * K + k];
          }
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 2 * 10);  // fp4 g32/64/128, mxfp4, int2/4/8 x 3 groups, int8_row
}

TEST(Int8Panels, RejectsMisalignedBlocks) {
  const FormatTraits& f = format_by_name("fp4_g64");
  const std::vector<float> w = normal_matrix(32, 128, 3);
  const QuantizedMatrix q = f.quantize(w.data(), 32, 128, {});
  std::vector<uint8_t> codes(32 * 128);
  std::vector<float> scales(32 * 4);
  EXPECT_THROW(f.int8_panels->build(q.view(), 0, 32, 32, 128, codes.data(), scales.data(), nullptr, -1, -1), Error);
  EXPECT_THROW(f.int8_panels->build(q.view(), 8, 32, 0, 128, codes.data(), scales.data(), nullptr, -1, -1), Error);
  EXPECT_EQ(format_by_name("fp4_g16").int8_panels, nullptr);   // scales per 16 k: fp32 path
  EXPECT_EQ(format_by_name("int3_g32").int8_panels, nullptr);  // codes straddle words
}

TEST(Int8Panels, SimdCodeKernelsMatchScalar) {
  if (detected_isa() < Isa::kAvx512) GTEST_SKIP() << "no AVX-512";
  std::mt19937_64 rng(5);
  std::vector<uint32_t> words(16 * 64);
  for (uint32_t& v : words) v = static_cast<uint32_t>(rng());
  // Plain codes, and 4-bit codes through every registered code table.
  std::vector<const uint8_t*> tables = {nullptr};
  for (const FormatTraits& f : eq::test::all_rows())
    if (f.stream && f.stream->codes->int8_bytes) tables.push_back(f.stream->codes->int8_bytes);
  for (int bits : {2, 4, 8})
    for (const uint8_t* table : tables) {
      if (table && bits != 4) continue;
      const int64_t kc = 32 * 32 / bits;  // 32 word rows of 2 panels (ld 32)
      std::vector<uint8_t> a(static_cast<size_t>(2 * kc * 16 + 64)), b(a.size());
      kernels::int8_stream_codes_generic(words.data(), 32, kc, bits, table, 2, a.data(), kc * 16 + 64, 0);
      kernels::int8_stream_codes_avx512(words.data(), 32, kc, bits, table, 2, b.data(), kc * 16 + 64, 16);
      EXPECT_EQ(a, b) << bits << " bits, table " << (table ? static_cast<int>(table[0]) : -1);
    }
  std::vector<int8_t> rows(16 * 200);
  for (int8_t& v : rows) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  for (int64_t nrows : {16, 5})
    for (int64_t kc : {192, 160, 32}) {
      std::vector<uint8_t> a(static_cast<size_t>(kc * 16)), b(a.size());
      kernels::int8_row_codes_generic(rows.data(), 200, nrows, kc, a.data(), 0);
      kernels::int8_row_codes_avx512(rows.data(), 200, nrows, kc, b.data(), 32);
      EXPECT_EQ(a, b) << nrows << " rows " << kc << " k";
    }
  // Trellis codes: every y in [-510, 510] (ties of y * 8160 / 2^15 included),
  // as 2 panels of 68 k (pstride 68 * 16 + 16), against the scalar kernel
  // and the definition.
  std::vector<float> y(static_cast<size_t>(2 * (68 * 16 + 16)));
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(static_cast<int>(i % 1021) - 510);
  std::vector<uint8_t> a(2 * 68 * 16 + 64), b(a.size());
  kernels::int8_trellis_codes_generic(y.data(), 2, 68 * 16 + 16, 68, a.data(), 68 * 16 + 32);
  kernels::int8_trellis_codes_avx512(y.data(), 2, 68 * 16 + 16, 68, b.data(), 68 * 16 + 32);
  EXPECT_EQ(a, b);
  for (int64_t p = 0; p < 2; ++p)
    for (int64_t k = 0; k < 68; ++k)
      for (int j = 0; j < 16; ++j) {
        const float v = y[p * (68 * 16 + 16) + k * 16 + j];
        const int code = a[p * (68 * 16 + 32) + k / 4 * 64 + j * 4 + k % 4];
        // Within half a step of y, and the rounding of the definition (half up, in double).
        ASSERT_LE(std::abs((code - 128) * kTrellisInt8Unscale - v), 0.5f * kTrellisInt8Unscale + 1e-3f) << v;
        ASSERT_EQ(code - 128, static_cast<int>(std::floor(v * 8160.0 / 32768.0 + 0.5))) << v;
        ASSERT_GE(code, 1);
      }
}

}  // namespace
}  // namespace eq::quant
