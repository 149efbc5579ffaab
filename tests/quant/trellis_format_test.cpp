// The trellis2/3/4 formats end to end: golden vector, round-trip quality on
// N(0,1) (MSE bounds), importance weighting, matmul against a
// float64 reference, identical bytes on every ISA, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/cpu_features.h"
#include "core/error.h"
#include "quant/trellis/codebook.h"
#include "quant/hadamard.h"
#include "quant/trellis/format.h"
#include "quant/trellis/kernels.h"
#include "quant/trellis/viterbi.h"

namespace eq::quant {
namespace {

std::vector<Isa> supported_isas() {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512})
    if (isa <= detected_isa()) isas.push_back(isa);
  return isas;
}

std::vector<float> gaussian(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd;
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

std::vector<float> round_trip(const FormatTraits& f, const std::vector<float>& w, int64_t rows, int64_t cols,
                              const QuantizeOptions& o = {}) {
  QuantizedMatrix q = f.quantize(w.data(), rows, cols, o);
  EXPECT_EQ(q.nbytes(), f.packed_bytes(rows, cols));
  std::vector<float> out(w.size());
  f.dequantize(q.view(), out.data());
  return out;
}

TEST(TrellisFormat, RegistryRowsDescribeTheLayout) {
  for (int bits : {2, 3, 4}) {
    const FormatTraits& f = trellis_format(bits);
    EXPECT_EQ(f.name, "trellis" + std::to_string(bits));
    EXPECT_EQ(&f, find_format(f.name)) << "registered row is the one returned";
    EXPECT_EQ(f.family, "trellis");
    EXPECT_EQ(f.weight_bits, bits);
    ASSERT_EQ(f.parts.size(), 4u);
    EXPECT_EQ(f.parts[0].name, "trellis");
    EXPECT_EQ(f.packed_bytes(32, 48), size_t(6 * 32 * bits + 48 + 32 + 4 * 32));
  }
  EXPECT_THROW(trellis_format(5), Error);
}

// Dequantization of a matrix spanning several Hadamard blocks on both sides
// (blocks 128 x 32 over [256, 96]) against a float64 evaluation of the
// definition: W = diag(sv) H_N T H_K diag(su), T the decoded tiles.
TEST(TrellisFormat, DequantizeMatchesFloat64DefinitionAcrossBlocks) {
  const int64_t rows = 256, cols = 96;
  const std::vector<float> w = gaussian(static_cast<size_t>(rows * cols), 11);
  for (int bits : {2, 4}) {
    const FormatTraits& f = trellis_format(bits);
    const QuantizedMatrix q = f.quantize(w.data(), rows, cols, {});
    const PackedMatrix m = q.view();
    const auto* tiles = static_cast<const uint8_t*>(m.parts[0].data);
    const auto* su = static_cast<const int8_t*>(m.parts[1].data);
    const auto* sv = static_cast<const int8_t*>(m.parts[2].data);
    const auto* scales = static_cast<const float*>(m.parts[3].data);
    // Tiles decoded by the scalar kernel (tile (kt, nt) at (kt * tiles_n + nt)).
    std::vector<float> t(static_cast<size_t>(rows * cols));
    const int64_t tiles_n = rows / trellis::kTileDim;
    for (int64_t kt = 0; kt < cols / trellis::kTileDim; ++kt)
      for (int64_t nt = 0; nt < tiles_n; ++nt)
        trellis::decode_tile_generic(tiles + (kt * tiles_n + nt) * trellis::tile_bytes(bits), bits,
                                     scales + nt * trellis::kTileDim,
                                     t.data() + nt * trellis::kTileDim * cols + kt * trellis::kTileDim, cols);
    std::vector<double> ref(t.begin(), t.end());
    for (int64_t r = 0; r < rows; ++r) hadamard_f64(ref.data() + r * cols, cols);
    std::vector<double> col(static_cast<size_t>(rows));
    for (int64_t c = 0; c < cols; ++c) {
      for (int64_t r = 0; r < rows; ++r) col[r] = ref[r * cols + c];
      hadamard_f64(col.data(), rows);
      for (int64_t r = 0; r < rows; ++r) ref[r * cols + c] = col[r] * su[c] * sv[r];
    }
    for (Isa isa : supported_isas()) {
      set_active_isa_for_testing(isa);
      std::vector<float> out(static_cast<size_t>(rows * cols));
      f.dequantize(m, out.data());
      double max_err = 0;
      for (size_t i = 0; i < out.size(); ++i) max_err = std::max(max_err, std::abs(out[i] - ref[i]));
      EXPECT_LT(max_err, 1e-5) << "trellis" << bits << " isa " << isa_name(isa);
    }
    set_active_isa_for_testing(detected_isa());
  }
}

// decode_rotated_panels (the batch kernel's decoder) on every ISA: for a
// sub-block of tiles, the panel layout of the scalar decode_tile values.
TEST(TrellisFormat, RotatedPanelsAreDecodedTilesOnEveryIsa) {
  const int64_t rows = 64, cols = 96, r0 = 16, r1 = 64, c0 = 32, c1 = 96;
  const std::vector<float> w = gaussian(static_cast<size_t>(rows * cols), 12);
  for (int bits : {2, 3, 4}) {
    const QuantizedMatrix q = trellis_format(bits).quantize(w.data(), rows, cols, {});
    const PackedMatrix m = q.view();
    const auto* tiles = static_cast<const uint8_t*>(m.parts[0].data);
    const auto* scales = static_cast<const float*>(m.parts[3].data);
    const int64_t tiles_n = rows / trellis::kTileDim, kcount = c1 - c0;
    std::vector<float> t(static_cast<size_t>(rows * cols));
    for (int64_t kt = 0; kt < cols / trellis::kTileDim; ++kt)
      for (int64_t nt = 0; nt < tiles_n; ++nt)
        trellis::decode_tile_generic(tiles + (kt * tiles_n + nt) * trellis::tile_bytes(bits), bits,
                                     scales + nt * trellis::kTileDim,
                                     t.data() + nt * trellis::kTileDim * cols + kt * trellis::kTileDim, cols);
    std::vector<float> expect(static_cast<size_t>((r1 - r0) * kcount));
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = c0; c < c1; ++c)
        expect[(r - r0) / 16 * 16 * kcount + (c - c0) * 16 + (r - r0) % 16] = t[r * cols + c];
    for (Isa isa : supported_isas()) {
      set_active_isa_for_testing(isa);
      std::vector<float> out(expect.size(), NAN);
      trellis::decode_rotated_panels(m, bits, r0, r1, c0, c1, out.data());
      EXPECT_EQ(out, expect) << "trellis" << bits << " isa " << isa_name(isa);
    }
    set_active_isa_for_testing(detected_isa());
  }
}

// Mean squared error on i.i.d. N(0,1) weights against fixed bounds at the
// level QTIP reports (rate-distortion bound 2^-2K). 64K weights, fixed seed.
TEST(TrellisFormat, MseOnGaussianMeetsBounds) {
  const int64_t rows = 128, cols = 512;
  const std::vector<float> w = gaussian(rows * cols, 2024);
  const double bounds[] = {0.0692, 0.0178, 0.00463};
  for (int bits : {2, 3, 4}) {
    const std::vector<float> out = round_trip(trellis_format(bits), w, rows, cols);
    double se = 0;
    for (size_t i = 0; i < w.size(); ++i) se += double(w[i] - out[i]) * (w[i] - out[i]);
    const double mse = se / double(w.size());
    EXPECT_LE(mse, bounds[bits - 2]) << "trellis" << bits;
    EXPECT_GE(mse, std::pow(2.0, -2 * bits)) << "below the rate-distortion bound: the measurement is broken";
    std::printf("trellis%d MSE on N(0,1), %lld weights: %.5f\n", bits, static_cast<long long>(w.size()), mse);
  }
}

TEST(TrellisFormat, ImportanceReducesWeightedError) {
  // Skewed channels: an eighth of the inputs carry 50x the activation energy.
  const int64_t rows = 64, cols = 256;
  const std::vector<float> w = gaussian(rows * cols, 11);
  std::vector<float> importance(cols);
  std::mt19937 rng(12);
  for (int64_t k = 0; k < cols; ++k) importance[k] = (rng() % 8 == 0) ? 50.0f : 1.0f;
  auto weighted_error = [&](const std::vector<float>& out) {
    double e = 0;
    for (int64_t n = 0; n < rows; ++n)
      for (int64_t k = 0; k < cols; ++k) e += importance[k] * double(w[n * cols + k] - out[n * cols + k]) * (w[n * cols + k] - out[n * cols + k]);
    return e;
  };
  const FormatTraits& f = trellis_format(2);
  QuantizeOptions plain, weighted;
  weighted.importance = importance.data();
  const double e_plain = weighted_error(round_trip(f, w, rows, cols, plain));
  const double e_weighted = weighted_error(round_trip(f, w, rows, cols, weighted));
  std::printf("weighted error: uniform %.1f, with importance %.1f\n", e_plain, e_weighted);
  EXPECT_LT(e_weighted, 0.85 * e_plain);
}

// A TileBatchSearch on the CPU (what the GPU's search computes): each tile's
// tail-biting Viterbi search; counts its calls.
int64_t g_batch_calls = 0, g_batch_tiles = 0;
void cpu_tile_batch(int bits, const float* codes, int64_t count, const float* target, const float* weight,
                    uint16_t* states) {
  ++g_batch_calls;
  g_batch_tiles += count;
  trellis::Viterbi viterbi;
  std::vector<uint32_t> st(trellis::kTileSize);
  for (int64_t i = 0; i < count; ++i) {
    const trellis::TrellisProblem p{trellis::kStateBits, bits, codes, trellis::kTileSize,
                                    target + i * trellis::kTileSize, weight + i * trellis::kTileSize};
    viterbi.run_tail_biting(p, st.data());
    for (int t = 0; t < trellis::kTileSize; ++t) states[i * trellis::kTileSize + t] = uint16_t(st[t]);
  }
}

// With importance, the tiles of every Hadamard block's j-th column are
// searched in one call (round j); the bytes are the tile-by-tile search's.
TEST(TrellisFormat, BatchedSearchEqualsTheTileSearch) {
  const std::pair<int64_t, int64_t> shapes[] = {{32, 512}, {16, 384}, {48, 48}, {32, 96}};
  for (const auto& [rows, cols] : shapes)
    for (const bool with_importance : {false, true}) {
      const std::vector<float> w = gaussian(size_t(rows * cols), uint64_t(rows * cols));
      std::vector<float> importance(static_cast<size_t>(cols));
      std::mt19937 rng(static_cast<uint32_t>(cols));
      for (auto& x : importance) x = (rng() % 5 == 0) ? 0.0f : float(1 + rng() % 40);
      QuantizeOptions o;
      o.seed = 99;
      o.importance = with_importance ? importance.data() : nullptr;
      const QuantizedMatrix a = trellis::quantize_matrix(w.data(), rows, cols, o, 3, trellis::initial_scale_ratio(3));
      g_batch_calls = g_batch_tiles = 0;
      const QuantizedMatrix b = trellis::quantize_matrix(w.data(), rows, cols, o, 3, trellis::initial_scale_ratio(3),
                                                         trellis::Code::k1mad, cpu_tile_batch);
      const std::string what = std::to_string(rows) + "x" + std::to_string(cols) + (with_importance ? " importance" : "");
      ASSERT_EQ(a.parts.size(), b.parts.size()) << what;
      for (size_t k = 0; k < a.parts.size(); ++k) EXPECT_EQ(a.parts[k].bytes, b.parts[k].bytes) << what << " part " << k;
      EXPECT_EQ(g_batch_tiles, rows * cols / trellis::kTileSize) << what;
      EXPECT_EQ(g_batch_calls, with_importance ? hadamard_block_size(cols) / trellis::kTileDim : 1) << what;
    }
}

TEST(TrellisFormat, ZerosRoundTripExactly) {
  for (int bits : {2, 3, 4}) {
    std::vector<float> w(32 * 48, 0.0f);
    for (float v : round_trip(trellis_format(bits), w, 32, 48)) ASSERT_EQ(v, 0.0f);
  }
  // A zero row inside a non-zero matrix stays zero.
  std::vector<float> w = gaussian(16 * 32, 3);
  std::vector<float> out = round_trip(trellis_format(3), w, 16, 32);
  double se = 0;
  for (size_t i = 0; i < w.size(); ++i) se += double(w[i] - out[i]) * (w[i] - out[i]);
  EXPECT_LT(se / w.size(), 0.05);
}

TEST(TrellisFormat, RejectsBadInputNamingTensorAndPosition) {
  const FormatTraits& f = trellis_format(2);
  QuantizeOptions o;
  o.tensor_name = "layers.3.experts.7.up_proj";
  std::vector<float> w = gaussian(32 * 32, 4);
  w[17 * 32 + 5] = std::numeric_limits<float>::quiet_NaN();
  try {
    f.quantize(w.data(), 32, 32, o);
    FAIL() << "NaN accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layers.3.experts.7.up_proj"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[17, 5]"), std::string::npos) << e.what();
  }
  w[17 * 32 + 5] = std::numeric_limits<float>::infinity();
  EXPECT_THROW(f.quantize(w.data(), 32, 32, o), Error);
  std::vector<float> odd(24 * 32, 1.0f);
  try {
    f.quantize(odd.data(), 24, 32, o);
    FAIL() << "24 rows accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("multiples of 16"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("up_proj"), std::string::npos) << e.what();
  }
  EXPECT_THROW(f.quantize(odd.data(), 32, 24, o), Error);
}

TEST(TrellisFormat, MatmulMatchesFloat64ReferenceOnEveryIsa) {
  const int64_t rows = 48, cols = 80;  // odd tile counts, Hadamard blocks 16 and 16
  const std::vector<float> w = gaussian(rows * cols, 5);
  for (int bits : {2, 4}) {
    const FormatTraits& f = trellis_format(bits);
    QuantizedMatrix q = f.quantize(w.data(), rows, cols, {});
    std::vector<float> wq(rows * cols);
    f.dequantize(q.view(), wq.data());
    for (int64_t m_rows : {1, 3, 37}) {
      const std::vector<float> x = gaussian(m_rows * cols, 100 + m_rows);
      std::vector<double> ref(m_rows * rows, 0.0);
      for (int64_t i = 0; i < m_rows; ++i)
        for (int64_t n = 0; n < rows; ++n)
          for (int64_t k = 0; k < cols; ++k) ref[i * rows + n] += double(x[i * cols + k]) * wq[n * cols + k];
      for (Isa isa : supported_isas()) {
        set_active_isa_for_testing(isa);
        std::vector<float> y(m_rows * rows, 1.0f);
        f.matmul(q.view(), x.data(), m_rows, y.data(), /*accumulate=*/true);
        for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], ref[i] + 1.0, 1e-3 * (1 + std::abs(ref[i]))) << isa_name(isa) << " M=" << m_rows;
        f.matmul(q.view(), x.data(), m_rows, y.data(), /*accumulate=*/false);
        for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], ref[i], 1e-3 * (1 + std::abs(ref[i]))) << isa_name(isa);
      }
      set_active_isa_for_testing(detected_isa());
    }
  }
}

TEST(TrellisFormat, SameBytesAndValuesOnEveryIsa) {
  const int64_t rows = 16, cols = 48;  // 3 tiles: small enough for the scalar search
  const std::vector<float> w = gaussian(rows * cols, 6);
  std::vector<float> importance(cols);
  for (int64_t k = 0; k < cols; ++k) importance[k] = 1.0f + float(k % 5);
  QuantizeOptions o;
  o.importance = importance.data();
  std::vector<uint8_t> ref_bytes;
  std::vector<float> ref_out;
  for (Isa isa : supported_isas()) {
    set_active_isa_for_testing(isa);
    QuantizedMatrix q = trellis_format(3).quantize(w.data(), rows, cols, o);
    std::vector<float> out(rows * cols);
    trellis_format(3).dequantize(q.view(), out.data());
    std::vector<uint8_t> bytes;
    for (const auto& p : q.parts) bytes.insert(bytes.end(), p.bytes.begin(), p.bytes.end());
    if (ref_bytes.empty()) {
      ref_bytes = bytes;
      ref_out = out;
    } else {
      EXPECT_EQ(bytes, ref_bytes) << isa_name(isa);
      EXPECT_EQ(out, ref_out) << isa_name(isa);
    }
  }
  set_active_isa_for_testing(detected_isa());
}

}  // namespace
}  // namespace eq::quant
