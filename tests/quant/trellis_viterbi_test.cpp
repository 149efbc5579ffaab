// Trellis search: the 1MAD code, Viterbi optimality against brute force on
// small trellises (every ISA), tail-biting consistency, SIMD step == scalar.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/cpu_features.h"
#include "quant/trellis/codebook.h"
#include "quant/trellis/gemv.h"
#include "quant/trellis/kernels.h"
#include "quant/trellis/viterbi.h"

namespace eq::quant::trellis {
namespace {

std::vector<Isa> supported_isas() {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512})
    if (isa <= detected_isa()) isas.push_back(isa);
  return isas;
}

TEST(TrellisCode, OneMadMatchesQtipDefinition) {
  // y = sum of the bytes of (s * 34038481 + 76625530) mod 2^32, minus 510.
  for (uint32_t s : {0u, 1u, 2u, 255u, 4660u, 65535u}) {
    uint64_t x = (uint64_t{s} * 34038481ull + 76625530ull) & 0xFFFFFFFFull;
    int y = static_cast<int>((x & 255) + ((x >> 8) & 255) + ((x >> 16) & 255) + ((x >> 24) & 255)) - 510;
    EXPECT_EQ(code_1mad(s), y) << s;
  }
  EXPECT_EQ(code_1mad(0), -185);  // 76625530 = 0x0491367A: 4 + 145 + 54 + 122 - 510
  double sum = 0, sq = 0;
  const float* table = code_table_1mad();
  for (uint32_t s = 0; s < 65536; ++s) {
    ASSERT_EQ(table[s], static_cast<float>(code_1mad(s)));
    sum += table[s];
    sq += double(table[s]) * table[s];
  }
  const double mean = sum / 65536, stdev = std::sqrt(sq / 65536 - mean * mean);
  EXPECT_NEAR(mean / k1madStd, 0.0, 0.02);
  EXPECT_NEAR(stdev / k1madStd, 1.0, 0.02);
}

// Cost of the stream given by the start state's low L-K bits and the symbols.
double stream_cost(const TrellisProblem& p, uint32_t start, const std::vector<uint32_t>& symbols, uint32_t* last) {
  const uint32_t mask = (1u << p.L) - 1;
  uint32_t s = start;
  double cost = 0;
  for (int t = 0; t < p.T; ++t) {
    s = ((s << p.K) | symbols[t]) & mask;
    double d = double(p.codes[s]) - p.target[t];
    cost += p.weight[t] * d * d;
  }
  *last = s;
  return cost;
}

// Minimum over all streams (free start), or over streams with the given overlap.
double brute_force(const TrellisProblem& p, int64_t overlap) {
  const uint32_t starts = 1u << (p.L - p.K), fan = 1u << p.K;
  const uint32_t overlap_mask = starts - 1;
  uint64_t combos = 1;
  for (int t = 0; t < p.T; ++t) combos *= fan;
  double best = std::numeric_limits<double>::infinity();
  std::vector<uint32_t> symbols(p.T);
  for (uint32_t start = 0; start < starts; ++start) {
    if (overlap >= 0 && start != overlap) continue;
    for (uint64_t c = 0; c < combos; ++c) {
      uint64_t v = c;
      for (int t = 0; t < p.T; ++t, v /= fan) symbols[t] = static_cast<uint32_t>(v % fan);
      uint32_t last;
      double cost = stream_cost(p, start, symbols, &last);
      if (overlap >= 0 && (last & overlap_mask) != overlap) continue;
      best = std::min(best, cost);
    }
  }
  return best;
}

struct SmallCase {
  int L, K, T;
};

TEST(TrellisViterbi, OptimalAgainstBruteForceOnEveryIsa) {
  // L >= K + 4 so the AVX2/AVX-512 steps (not the scalar fallback) run.
  const SmallCase cases[] = {{10, 2, 5}, {10, 3, 4}, {12, 4, 3}};
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  for (const SmallCase& sc : cases) {
    std::vector<float> codes(size_t{1} << sc.L), target(sc.T), weight(sc.T);
    for (auto& c : codes) c = std::round(nd(rng) * 100.0f);
    for (auto& t : target) t = nd(rng) * 100.0f;
    for (auto& w : weight) w = 0.5f + std::uniform_real_distribution<float>(0, 1)(rng);
    TrellisProblem p{sc.L, sc.K, codes.data(), sc.T, target.data(), weight.data()};
    const double free_best = brute_force(p, -1);
    const int64_t overlap = 5;
    const double constrained_best = brute_force(p, overlap);
    for (Isa isa : supported_isas()) {
      set_active_isa_for_testing(isa);
      Viterbi v;
      std::vector<uint32_t> states(sc.T);
      EXPECT_NEAR(v.run(p, -1, states.data()), free_best, 1e-6 * free_best) << isa_name(isa) << " L=" << sc.L;
      EXPECT_NEAR(v.run(p, overlap, states.data()), constrained_best, 1e-6 * constrained_best) << isa_name(isa);
      EXPECT_EQ(states[0] >> sc.K, overlap);  // start state continues the overlap...
      EXPECT_EQ(states[sc.T - 1] & ((1u << (sc.L - sc.K)) - 1), overlap);  // ...and the last state ends with it
      for (int t = 1; t < sc.T; ++t)  // consecutive states are shifts
        EXPECT_EQ(states[t] >> sc.K, states[t - 1] & ((1u << (sc.L - sc.K)) - 1));
    }
  }
  set_active_isa_for_testing(detected_isa());
}

TEST(TrellisViterbi, TailBitingStreamWrapsAround) {
  // With L = 16 and T = 256 the circular stream is consistent: every state is
  // the 16-bit window ending at its symbol, wrapping at the end.
  std::mt19937 rng(4);
  std::normal_distribution<float> nd;
  for (int K : {2, 3, 4}) {
    std::vector<float> target(kTileSize), weight(kTileSize, 1.0f);
    for (auto& t : target) t = nd(rng) * 140.0f;
    TrellisProblem p{16, K, code_table_1mad(), kTileSize, target.data(), weight.data()};
    Viterbi v;
    std::vector<uint32_t> states(kTileSize);
    v.run_tail_biting(p, states.data());
    for (int t = 0; t < kTileSize; ++t) {
      uint32_t prev = states[(t + kTileSize - 1) % kTileSize];
      EXPECT_EQ(states[t] >> K, prev & ((1u << (16 - K)) - 1)) << "K=" << K << " t=" << t;
    }
  }
}

TEST(TrellisKernels, SimdStepEqualsScalarBitForBit) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  const int L = 16;
  std::vector<float> prev(1 << L), codes(code_table_1mad(), code_table_1mad() + (1 << L));
  for (auto& c : prev) c = std::abs(nd(rng)) * 1000.0f;
  for (int i = 0; i < 200; ++i) prev[rng() % prev.size()] = prev[rng() % prev.size()];  // ties
  for (int K : {2, 3, 4}) {
    std::vector<float> ref_next(1 << L), next(1 << L);
    std::vector<uint8_t> ref_planes((1 << L) / 8), planes((1 << L) / 8);
    generic_kernels().viterbi_step(prev.data(), ref_next.data(), ref_planes.data(), codes.data(), L, K, 37.5f, 0.75f);
    for (Isa isa : supported_isas()) {
      const Kernels& k = isa == Isa::kAvx512 ? avx512_kernels() : isa == Isa::kAvx2 ? avx2_kernels() : generic_kernels();
      k.viterbi_step(prev.data(), next.data(), planes.data(), codes.data(), L, K, 37.5f, 0.75f);
      EXPECT_EQ(next, ref_next) << isa_name(isa) << " K=" << K;
      EXPECT_TRUE(std::equal(planes.begin(), planes.begin() + K * ((1 << (L - K)) / 8), ref_planes.begin()))
          << isa_name(isa) << " K=" << K;
    }
  }
}

// Two steps at once (fused in blocks on AVX-512) equal two scalar steps bit
// for bit: costs and both steps' argmin planes, with ties, for every K the
// formats use and the shapes on both sides of two_steps_fused.
TEST(TrellisKernels, TwoStepsEqualTwoScalarStepsBitForBit) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  for (const auto& [L, K] : std::vector<std::pair<int, int>>{{16, 1}, {16, 2}, {16, 3}, {16, 4}, {16, 5}, {12, 4}, {11, 4}, {8, 2}}) {
    std::vector<float> prev(size_t{1} << L), codes(size_t{1} << L);
    for (auto& c : prev) c = std::abs(nd(rng)) * 1000.0f;
    for (auto& c : codes) c = std::round(nd(rng) * 147.0f);
    for (int i = 0; i < 200; ++i) prev[rng() % prev.size()] = prev[rng() % prev.size()];  // ties
    const size_t plane_bytes = std::max<size_t>(1, (size_t{1} << (L - K)) / 8) * size_t(K);
    std::vector<float> middle(prev.size()), ref_next(prev.size()), next(prev.size());
    std::vector<uint8_t> ref_planes(2 * plane_bytes), planes(2 * plane_bytes);
    viterbi_step_generic(prev.data(), middle.data(), ref_planes.data(), codes.data(), L, K, 37.5f, 0.75f);
    viterbi_step_generic(middle.data(), ref_next.data(), ref_planes.data() + plane_bytes, codes.data(), L, K, -12.25f,
                         1.5f);
    for (Isa isa : supported_isas()) {
      const Kernels& k = isa == Isa::kAvx512 ? avx512_kernels() : isa == Isa::kAvx2 ? avx2_kernels() : generic_kernels();
      std::fill(next.begin(), next.end(), -1.0f);
      std::fill(planes.begin(), planes.end(), uint8_t{0xA5});
      k.viterbi_two_steps(prev.data(), next.data(), planes.data(), planes.data() + plane_bytes, codes.data(), L, K,
                          37.5f, 0.75f, -12.25f, 1.5f);
      EXPECT_EQ(next, ref_next) << isa_name(isa) << " L=" << L << " K=" << K;
      EXPECT_EQ(planes, ref_planes) << isa_name(isa) << " L=" << L << " K=" << K;
    }
  }
}

// Every tile decoder (each ISA's table, and both AVX-512 variants with and
// without VBMI when the machine has them), row-major and panel layout, equals
// the bit-level definition (tile_state, code_1mad, float(y) * factor) for
// every K on random tiles and on the all-zero / all-one streams.
TEST(TrellisKernels, SimdDecodeEqualsReference) {
  using RowFn = void (*)(const uint8_t*, int, const float*, float*, int64_t);
  using PanelFn = void (*)(const uint8_t*, int, const float*, float*);
  std::vector<std::tuple<std::string, RowFn, PanelFn>> decoders;
  for (Isa isa : supported_isas()) {
    const Kernels& k = isa == Isa::kAvx512 ? avx512_kernels() : isa == Isa::kAvx2 ? avx2_kernels() : generic_kernels();
    decoders.emplace_back(std::string(isa_name(isa)) + " table", k.decode_tile, k.decode_tile_panel);
  }
  if (detected_isa() >= Isa::kAvx512) {
    decoders.emplace_back("avx512", decode_tile_avx512, decode_tile_panel_avx512);
    if (cpu_has_avx512_vbmi()) decoders.emplace_back("avx512_vbmi", decode_tile_avx512_vbmi, decode_tile_panel_avx512_vbmi);
  }
  std::mt19937 rng(6);
  std::uniform_real_distribution<float> factor_dist(-0.02f, 0.02f);
  for (int K : {2, 3, 4}) {
    for (int trial = 0; trial < 24; ++trial) {
      // Exactly tile_bytes(K) bytes, so ASan catches any read past the tile.
      std::vector<uint8_t> tile(tile_bytes(K));
      for (auto& b : tile) b = trial == 0 ? 0x00 : trial == 1 ? 0xFF : static_cast<uint8_t>(rng());
      float factor[16];
      for (float& f : factor) f = factor_dist(rng);
      std::vector<float> expect(16 * 20, -1.0f), expect_panel(kTileSize);
      for (int t = 0; t < kTileSize; ++t) {
        const float v = static_cast<float>(code_1mad(tile_state(tile.data(), K, t))) * factor[t / 16];
        expect[(t / 16) * 20 + t % 16] = v;
        expect_panel[(t % 16) * 16 + t / 16] = v;
      }
      for (const auto& [name, row_fn, panel_fn] : decoders) {
        std::vector<float> out(16 * 20, -1.0f);  // stride 20: the padding must stay untouched
        row_fn(tile.data(), K, factor, out.data(), 20);
        ASSERT_EQ(out, expect) << name << " K=" << K << " trial " << trial;
        std::vector<float> panel(kTileSize, NAN);
        panel_fn(tile.data(), K, factor, panel.data());
        ASSERT_EQ(panel, expect_panel) << name << " panel K=" << K << " trial " << trial;
      }
    }
  }
}

// The int8 code decoders (Kernels::decode_tile_int8): every table and both
// AVX-512 variants equal the definition round-half-up(y * 8160 / 2^15) + 128
// at the panel position of each state.
TEST(TrellisKernels, Int8CodeDecodeEqualsReference) {
  using Int8Fn = void (*)(const uint8_t*, int, uint8_t*);
  std::vector<std::pair<std::string, Int8Fn>> decoders;
  for (Isa isa : supported_isas()) {
    const Kernels& k = isa == Isa::kAvx512 ? avx512_kernels() : isa == Isa::kAvx2 ? avx2_kernels() : generic_kernels();
    decoders.emplace_back(std::string(isa_name(isa)) + " table", k.decode_tile_int8);
  }
  if (detected_isa() >= Isa::kAvx512) {
    decoders.emplace_back("avx512", decode_tile_int8_avx512);
    if (cpu_has_avx512_vbmi()) decoders.emplace_back("avx512_vbmi", decode_tile_int8_avx512_vbmi);
  }
  std::mt19937 rng(8);
  for (int K : {2, 3, 4})
    for (int trial = 0; trial < 24; ++trial) {
      std::vector<uint8_t> tile(tile_bytes(K));
      for (auto& b : tile) b = trial == 0 ? 0x00 : trial == 1 ? 0xFF : static_cast<uint8_t>(rng());
      std::vector<uint8_t> expect(kTileSize);
      for (int t = 0; t < kTileSize; ++t) {
        const int r = t / 16, c = t % 16;
        const float y = static_cast<float>(code_1mad(tile_state(tile.data(), K, t)));
        // y * 8160 / 2^15 rounded half up (vpmulhrsw), in double: the definition.
        const int code = static_cast<int>(std::floor(static_cast<double>(y) * 8160.0 / 32768.0 + 0.5));
        ASSERT_LE(std::abs(code), 127);
        expect[(c / 4) * 64 + r * 4 + c % 4] = static_cast<uint8_t>(code + 128);
      }
      for (const auto& [name, fn] : decoders) {
        std::vector<uint8_t> out(kTileSize, 0);
        fn(tile.data(), K, out.data());
        ASSERT_EQ(out, expect) << name << " K=" << K << " trial " << trial;
      }
    }
}

TEST(TrellisKernels, SimdStripMatmulMatchesScalar) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  const int64_t m_rows = 5, cols = 48;
  std::vector<float> x(m_rows * cols), strip(16 * cols);
  for (auto& v : x) v = nd(rng);
  for (auto& v : strip) v = nd(rng);
  std::vector<float> ref(m_rows * 20, 0.0f);
  generic_kernels().strip_matmul(x.data(), m_rows, cols, strip.data(), ref.data(), 20);
  for (Isa isa : supported_isas()) {
    const Kernels& k = isa == Isa::kAvx512 ? avx512_kernels() : isa == Isa::kAvx2 ? avx2_kernels() : generic_kernels();
    std::vector<float> z(m_rows * 20, 0.0f);
    k.strip_matmul(x.data(), m_rows, cols, strip.data(), z.data(), 20);
    for (size_t i = 0; i < z.size(); ++i) EXPECT_NEAR(z[i], ref[i], 1e-4) << isa_name(isa);
  }
}

}  // namespace
}  // namespace eq::quant::trellis
