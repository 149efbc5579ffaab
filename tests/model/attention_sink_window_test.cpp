// Attention with a learned sink logit and a sliding window (gpt-oss), against
// float64: attend_causal over random queries, keys and values for windows
// shorter and longer than the query block, with and without a sink, in one
// prefill and continuing from a cache; and on the shared gpt_oss-small model,
// decoding one token at a time past the window gives the prefill's logits
// and the reference's, while dropping the window does not.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "io/safetensors.h"
#include "model/attention_core.h"
#include "model/forward.h"
#include "test_support.h"

namespace eq::model {
namespace {

// Row t (position start + t) of the float64 definition: logits q·k * scale
// over keys j with j <= pos and j > pos - window (window 0: all), the sink
// appended unscaled, softmax over all of them, the sink's share dropped.
std::vector<double> attend_float64(const std::vector<float>& q, const std::vector<float>& k,
                                   const std::vector<float>& v, int64_t rows, int64_t start, int64_t dim,
                                   double scale, int64_t window, const float* sink) {
  std::vector<double> out(rows * dim, 0.0);
  for (int64_t t = 0; t < rows; ++t) {
    const int64_t pos = start + t, lo = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
    std::vector<double> logit;
    for (int64_t j = lo; j <= pos; ++j) {
      double d = 0;
      for (int64_t i = 0; i < dim; ++i) d += double(q[t * dim + i]) * k[j * dim + i];
      logit.push_back(d * scale);
    }
    double m = *std::max_element(logit.begin(), logit.end());
    if (sink) m = std::max(m, double(*sink));
    double sum = sink ? std::exp(double(*sink) - m) : 0.0;
    for (double& l : logit) sum += l = std::exp(l - m);
    for (int64_t j = lo; j <= pos; ++j)
      for (int64_t i = 0; i < dim; ++i) out[t * dim + i] += logit[j - lo] / sum * v[j * dim + i];
  }
  return out;
}

std::vector<float> random_values(int64_t n, std::mt19937& rng, float sd) {
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> x(n);
  for (float& f : x) f = d(rng);
  return x;
}

TEST(AttentionSinkWindow, MatchesFloat64) {
  constexpr int64_t kDim = 16, kKeys = 150;  // over two query blocks of 64
  std::mt19937 rng(7);
  const std::vector<float> k = random_values(kKeys * kDim, rng, 1.0f), v = random_values(kKeys * kDim, rng, 1.0f);
  const double scale = 1.0 / std::sqrt(double(kDim));
  const float sinks[] = {-2.0f, 0.5f, 4.0f};
  for (int64_t start : {int64_t{0}, int64_t{100}, int64_t{149}})  // prefill, a continued chunk, one decode step
    for (int64_t window : {int64_t{0}, int64_t{1}, int64_t{5}, int64_t{32}, int64_t{70}, int64_t{500}})
      for (const float* sink : {static_cast<const float*>(nullptr), &sinks[0], &sinks[1], &sinks[2]}) {
        const int64_t rows = kKeys - start;
        const std::vector<float> q = random_values(rows * kDim, rng, 1.5f);
        const QkPart part{q.data(), kDim, k.data(), kDim, kDim};
        std::vector<float> out(rows * kDim, -1.0f);
        FloatBuffer scores;
        attend_causal(rows, start, &part, 1, v.data(), kDim, kDim, float(scale), out.data(), kDim, scores, window,
                      sink);
        const std::vector<double> want = attend_float64(q, k, v, rows, start, kDim, scale, window, sink);
        double err = 0;
        for (size_t i = 0; i < out.size(); ++i) err = std::max(err, std::abs(out[i] - want[i]));
        EXPECT_LT(err, 2e-6) << "start " << start << " window " << window << " sink "
                             << (sink ? *sink : std::numeric_limits<float>::quiet_NaN());
      }
}

// The sink's share in closed form: one visible key with logit s gives
// v · e^s / (e^s + e^sink), so a large sink drives the output to zero and a
// very negative one leaves v.
TEST(AttentionSinkWindow, SinkTakesMassAndAddsNoValue) {
  const float q[2] = {1.0f, 2.0f}, k[2] = {0.5f, 0.25f}, v[3] = {2.0f, -4.0f, 8.0f};  // s = 1.0 at scale 1
  const QkPart part{q, 2, k, 2, 2};
  for (float sink : {-30.0f, -1.0f, 0.0f, 1.0f, 3.0f}) {
    float out[3];
    FloatBuffer scores;
    attend_causal(1, 0, &part, 1, v, 3, 3, 1.0f, out, 3, scores, 0, &sink);
    const double share = std::exp(1.0) / (std::exp(1.0) + std::exp(double(sink)));
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(out[i], share * v[i], 1e-6) << "sink " << sink;
  }
}

// The mask alone: with all logits equal and no sink, a query averages the
// values of exactly the positions (p - window, p].
TEST(AttentionSinkWindow, WindowAveragesTheLastPositions) {
  constexpr int64_t kN = 12, kWindow = 4;
  std::vector<float> q(kN, 0.0f), k(kN, 0.0f), v(kN);
  for (int64_t j = 0; j < kN; ++j) v[j] = float(j);
  const QkPart part{q.data(), 1, k.data(), 1, 1};
  std::vector<float> out(kN);
  FloatBuffer scores;
  attend_causal(kN, 0, &part, 1, v.data(), 1, 1, 1.0f, out.data(), 1, scores, kWindow);
  for (int64_t p = 0; p < kN; ++p) {
    const int64_t lo = std::max<int64_t>(0, p - kWindow + 1);
    EXPECT_FLOAT_EQ(out[p], float(p + lo) / 2.0f) << "position " << p;
  }
}

// gpt_oss-small's reference windows are 64 bytes, its sliding layers see 32:
// prefill and one-token decode give the same logits, both the reference's;
// the same model with every layer full-attention is off past position 32.
TEST(AttentionSinkWindow, SharedGptOssDecodeRespectsTheWindow) {
  EQ_REQUIRE_SHARED();
  const auto dir = test::shared_dir() / "models" / "gpt_oss-small";
  auto ref = io::SafetensorsFile::open((dir / "reference" / "reference.safetensors").string());
  const io::TensorInfo* tok = ref->find("tokens");
  ASSERT_NE(tok, nullptr);
  const int64_t T = tok->shape[1];
  std::vector<int32_t> tokens(T);  // window 0
  std::memcpy(tokens.data(), ref->view(*tok).data, T * sizeof(int32_t));
  const std::vector<float> ref_logits = ref->view(*ref->find("logits")).to_f32();

  auto model = Model::open(dir.string());
  const int64_t V = model->config().vocab_size;
  ASSERT_EQ(model->config().layer_attention_window(0), 32);
  ASSERT_GT(T, 32);
  KvCache prefill_cache = model->new_cache(1, T);
  const FloatBuffer prefill = model->forward(tokens, 1, T, prefill_cache);
  KvCache cache = model->new_cache(1, T);
  double decode_vs_prefill = 0, decode_vs_ref = 0;
  for (int64_t t = 0; t < T; ++t) {
    const FloatBuffer step = model->forward(std::span<const int32_t>(&tokens[t], 1), 1, 1, cache);
    for (int64_t i = 0; i < V; ++i) {
      decode_vs_prefill = std::max(decode_vs_prefill, std::abs(double(step[i]) - prefill[t * V + i]));
      decode_vs_ref = std::max(decode_vs_ref, std::abs(double(step[i]) - ref_logits[t * V + i]));
    }
  }
  std::printf("decode vs prefill max abs %.3g, vs reference %.3g\n", decode_vs_prefill, decode_vs_ref);
  EXPECT_LT(decode_vs_prefill, 1e-4);
  EXPECT_LT(decode_vs_ref, 2e-3);

  ModelConfig full = model->config();
  full.attention_window.assign(full.attention_window.size(), 0);
  Model unwindowed(open_checkpoint(dir.string(), &full));
  KvCache c2 = unwindowed.new_cache(1, T);
  const FloatBuffer logits = unwindowed.forward(tokens, 1, T, c2);
  double before = 0, after = 0;  // positions inside the window agree; later ones do not
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < V; ++i) {
      const double d = std::abs(double(logits[t * V + i]) - ref_logits[t * V + i]);
      (t < 32 ? before : after) = std::max(t < 32 ? before : after, d);
    }
  std::printf("without the window: max abs %.3g before position 32, %.3g after\n", before, after);
  EXPECT_LT(before, 2e-3);
  EXPECT_GT(after, 0.05);
}

}  // namespace
}  // namespace eq::model
