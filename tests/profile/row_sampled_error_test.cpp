// The sensitivity measurement's fast estimate (profile/row_sampled_error.h)
// against the exact measurement (expert_rel_mse: every row quantized, the
// expert's whole quantized output), on random experts whose rows and input
// channels differ in scale as real ones do.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>

#include "profile/row_sampled_error.h"
#include "profile/sensitivity.h"

namespace eq::profile {
namespace {

// Rows scaled by a log-normal factor (some rows and channels matter more).
model::Tensor32Ptr random_matrix(int64_t rows, int64_t cols, std::mt19937& rng, float sigma) {
  auto t = std::make_shared<model::Tensor32>();
  t->shape = {rows, cols};
  t->data.resize(size_t(rows * cols));
  std::normal_distribution<float> dist(0.0f, sigma), spread(0.0f, 0.4f);
  for (int64_t r = 0; r < rows; ++r) {
    const float scale = std::exp(spread(rng));
    for (int64_t c = 0; c < cols; ++c) t->data[size_t(r * cols + c)] = scale * dist(rng);
  }
  return t;
}

struct Expert {
  model::ModelConfig config;
  model::MlpWeights w;
  std::vector<float> x, gates, imp_in, imp_mid;
  int64_t rows = 96;
};

Expert random_expert(int64_t H, int64_t I, uint32_t seed) {
  Expert e;
  std::mt19937 rng(seed);
  e.config.hidden_size = H;
  e.w.intermediate = I;
  e.w.gate = random_matrix(I, H, rng, 0.08f);
  e.w.up = random_matrix(I, H, rng, 0.08f);
  e.w.down = random_matrix(H, I, rng, 0.08f);
  e.w.act = {.kind = model::ActivationKind::kSwiGlu};
  // Input channels of unequal energy, a few of them large.
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::uniform_real_distribution<float> gate(0.1f, 1.0f);
  std::vector<float> channel(static_cast<size_t>(H));
  for (auto& c : channel) c = std::exp(0.8f * dist(rng));
  e.x.resize(size_t(e.rows * H));
  for (int64_t r = 0; r < e.rows; ++r)
    for (int64_t h = 0; h < H; ++h) e.x[size_t(r * H + h)] = channel[size_t(h)] * dist(rng);
  for (int64_t r = 0; r < e.rows; ++r) e.gates.push_back(gate(rng));
  e.imp_in.assign(size_t(H), 0.0f);
  for (int64_t r = 0; r < e.rows; ++r)
    for (int64_t h = 0; h < H; ++h) e.imp_in[size_t(h)] += e.x[size_t(r * H + h)] * e.x[size_t(r * H + h)];
  const ExpertOutput o = expert_output(e.w, e.x.data(), e.rows, H);
  e.imp_mid.assign(size_t(I), 0.0f);
  for (int64_t r = 0; r < e.rows; ++r)
    for (int64_t i = 0; i < I; ++i) e.imp_mid[size_t(i)] += o.mid(r, i) * o.mid(r, i);
  return e;
}

double exact(const Expert& e, const std::string& format) {
  return expert_rel_mse(e.config, e.w, e.x.data(), e.gates.data(), e.rows, format, e.imp_in, e.imp_mid, "t.");
}

double estimate(const Expert& e, const std::string& format, int64_t sample_rows) {
  const RowSampledExpert s(e.w, e.config.hidden_size, e.x.data(), e.gates.data(), e.rows, sample_rows);
  return s.rel_mse(format, e.imp_in, e.imp_mid, "t.", quant::Device::kCpu);
}

// |ln(a / b)| as a percent miss.
double miss_pct(double a, double b) { return 100.0 * (std::exp(std::abs(std::log(a / b))) - 1.0); }

TEST(SampledRows, SpreadsWholeBlocksEvenly) {
  EXPECT_EQ(sampled_rows(4, 64).size(), 4u);      // all: fewer rows than wanted
  EXPECT_EQ(sampled_rows(64, 0).size(), 64u);     // 0: every row
  EXPECT_EQ(sampled_rows(80, 48).size(), 48u);    // 3 of 5 blocks: two left out
  EXPECT_EQ(sampled_rows(80, 64).size(), 80u);    // 4 of 5 blocks: most of them, so all
  const std::vector<int64_t> r = sampled_rows(768, 64);  // 4 of 48 blocks: 6, 18, 30, 42
  ASSERT_EQ(r.size(), 64u);
  EXPECT_EQ(r[0], 6 * 16);
  EXPECT_EQ(r[16], 18 * 16);
  EXPECT_EQ(r[32], 30 * 16);
  EXPECT_EQ(r[48], 42 * 16);
  EXPECT_EQ(r[63], 42 * 16 + 15);
  EXPECT_EQ(sampled_rows(768, 65).size(), 80u);  // rounded up to whole blocks
}

// Every row sampled: the estimate leaves out only the cross terms, which are
// small beside the error itself (it reads 3-6 % high on these experts).
TEST(RowSampledError, EveryRowTracksTheExactMeasurement) {
  const Expert e = random_expert(128, 64, 11);
  for (const std::string f : {"int2_g64", "int4_g64", "fp4_g32", "int8_row", "trellis2"}) {
    const double x = exact(e, f), s = estimate(e, f, 0);
    ASSERT_GT(x, 0) << f;
    EXPECT_LT(miss_pct(s, x), 8.0) << f << ": estimate " << s << " exact " << x;
  }
}

// 64 of 512 and 256 rows: within 25% (the sampled rows' share of the error
// differs from their share of the rows; every format of an expert misses the
// same way), and the formats keep the exact measurement's order.
TEST(RowSampledError, SampledRowsTrackTheExactMeasurement) {
  const std::vector<std::string> formats = {"int2_g64", "int3_g64", "int4_g64", "fp4_g32", "int8_row"};
  for (uint32_t seed : {3u, 4u}) {
    const Expert e = random_expert(512, 256, seed);
    std::vector<double> x, s;
    for (const auto& f : formats) {
      x.push_back(exact(e, f));
      s.push_back(estimate(e, f, 64));
      EXPECT_LT(miss_pct(s.back(), x.back()), 25.0) << f << " seed " << seed << ": estimate " << s.back()
                                                    << " exact " << x.back();
    }
    for (size_t i = 0; i < formats.size(); ++i)
      for (size_t j = 0; j < formats.size(); ++j)
        if (x[i] > x[j]) {
          EXPECT_GT(s[i], s[j]) << formats[i] << " vs " << formats[j] << " seed " << seed;
        }
  }
}

TEST(RowSampledError, WithBiasesAndClampedSwiGlu) {
  Expert e = random_expert(256, 128, 7);
  std::mt19937 rng(8);
  e.w.gate_bias = random_matrix(1, 128, rng, 0.5f);
  e.w.up_bias = random_matrix(1, 128, rng, 0.5f);
  e.w.down_bias = random_matrix(1, 256, rng, 0.5f);
  e.w.act = {.kind = model::ActivationKind::kSwiGluClamped, .alpha = 1.702f, .limit = 7.0f};
  for (const std::string f : {"int3_g64", "fp4_g32"}) {
    EXPECT_LT(miss_pct(estimate(e, f, 0), exact(e, f)), 8.0) << f;
    EXPECT_LT(miss_pct(estimate(e, f, 64), exact(e, f)), 25.0) << f;
  }
}

}  // namespace
}  // namespace eq::profile
