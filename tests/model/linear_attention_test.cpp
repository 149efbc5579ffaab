// The gated delta net (linear_attention.h): its token-by-token recurrence
// and its chunked form against a float64 evaluation of the chunked
// (UT-transform) form of the same rule, the two forms against each other
// (outputs and state), the state carried across calls, the config of the hybrid layers, and
// on ../shared/models/qwen3_next-small and qwen3_5_moe-small a prefill
// against the same tokens decoded one at a time.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/config.h"
#include "model/forward.h"
#include "model/linear_attention.h"
#include "test_support.h"

namespace eq::model {
namespace {

struct DeltaInputs {
  int64_t T, dk, dv;
  std::vector<float> q, k, v, g, beta;  // q, k unit-norm (q also scaled), beta in (0, 1), g < 0
};

DeltaInputs random_inputs(int64_t T, int64_t dk, int64_t dv, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  std::uniform_real_distribution<float> u01(0.05f, 0.95f);
  DeltaInputs in{T, dk, dv, {}, {}, {}, {}, {}};
  auto unit_rows = [&](std::vector<float>& x, float scale) {
    x.resize(T * dk);
    for (int64_t t = 0; t < T; ++t) {
      double ss = 0;
      for (int64_t i = 0; i < dk; ++i) ss += std::pow(x[t * dk + i] = n01(rng), 2);
      for (int64_t i = 0; i < dk; ++i) x[t * dk + i] = static_cast<float>(x[t * dk + i] / std::sqrt(ss) * scale);
    }
  };
  unit_rows(in.q, static_cast<float>(1.0 / std::sqrt(double(dk))));
  unit_rows(in.k, 1.0f);
  in.v.resize(T * dv);
  for (float& x : in.v) x = n01(rng);
  for (int64_t t = 0; t < T; ++t) {
    in.beta.push_back(u01(rng));
    in.g.push_back(-0.5f * u01(rng));
  }
  return in;
}

// The chunked form in float64: within a chunk of C positions with
// cumulative decays G, solve (I + strictly-lower(diag(beta) K Kᵀ ∘ D)) U =
// [beta v | beta k exp(G)] by forward substitution, then
//   v_new = U_v - U_k S;  out = (q exp(G)) S + (Q Kᵀ ∘ D, lower incl. diag) v_new
//   S = exp(G_last) S + (K exp(G_last - G))ᵀ v_new.
std::vector<double> chunked_reference(const DeltaInputs& in, int64_t C) {
  const int64_t T = in.T, dk = in.dk, dv = in.dv;
  std::vector<double> S(dk * dv, 0.0), out(T * dv, 0.0);
  for (int64_t c0 = 0; c0 < T; c0 += C) {
    const int64_t L = std::min(C, T - c0);
    std::vector<double> G(L);
    for (int64_t i = 0; i < L; ++i) G[i] = (i ? G[i - 1] : 0.0) + in.g[c0 + i];
    auto kk = [&](int64_t a, int64_t b) {  // k_a · k_b
      double s = 0;
      for (int64_t x = 0; x < dk; ++x) s += double(in.k[(c0 + a) * dk + x]) * in.k[(c0 + b) * dk + x];
      return s;
    };
    // Forward substitution of the unit lower-triangular system.
    std::vector<double> Uv(L * dv), Uk(L * dk);
    for (int64_t i = 0; i < L; ++i) {
      const double b = in.beta[c0 + i];
      for (int64_t x = 0; x < dv; ++x) Uv[i * dv + x] = b * in.v[(c0 + i) * dv + x];
      for (int64_t x = 0; x < dk; ++x) Uk[i * dk + x] = b * in.k[(c0 + i) * dk + x] * std::exp(G[i]);
      for (int64_t j = 0; j < i; ++j) {
        const double a = b * kk(i, j) * std::exp(G[i] - G[j]);
        for (int64_t x = 0; x < dv; ++x) Uv[i * dv + x] -= a * Uv[j * dv + x];
        for (int64_t x = 0; x < dk; ++x) Uk[i * dk + x] -= a * Uk[j * dk + x];
      }
    }
    std::vector<double> vnew(L * dv);
    for (int64_t i = 0; i < L; ++i)
      for (int64_t x = 0; x < dv; ++x) {
        double s = Uv[i * dv + x];
        for (int64_t y = 0; y < dk; ++y) s -= Uk[i * dk + y] * S[y * dv + x];
        vnew[i * dv + x] = s;
      }
    for (int64_t i = 0; i < L; ++i)
      for (int64_t x = 0; x < dv; ++x) {
        double s = 0;
        for (int64_t y = 0; y < dk; ++y) s += double(in.q[(c0 + i) * dk + y]) * std::exp(G[i]) * S[y * dv + x];
        for (int64_t j = 0; j <= i; ++j) {
          double qk = 0;
          for (int64_t y = 0; y < dk; ++y) qk += double(in.q[(c0 + i) * dk + y]) * in.k[(c0 + j) * dk + y];
          s += qk * std::exp(G[i] - G[j]) * vnew[j * dv + x];
        }
        out[(c0 + i) * dv + x] = s;
      }
    const double last = G[L - 1];
    for (int64_t y = 0; y < dk; ++y)
      for (int64_t x = 0; x < dv; ++x) {
        double s = std::exp(last) * S[y * dv + x];
        for (int64_t j = 0; j < L; ++j) s += double(in.k[(c0 + j) * dk + y]) * std::exp(last - G[j]) * vnew[j * dv + x];
        S[y * dv + x] = s;
      }
  }
  return out;
}

TEST(GatedDeltaRule, RecurrenceEqualsChunkedFormInFloat64) {
  const DeltaInputs in = random_inputs(/*T=*/37, /*dk=*/16, /*dv=*/8, 7);
  std::vector<float> state(in.dk * in.dv, 0.0f), out(in.T * in.dv);
  gated_delta_rule(in.q.data(), in.k.data(), in.dk, in.v.data(), in.dv, in.g.data(), in.beta.data(), 1, in.T, in.dk,
                   in.dv, state.data(), out.data(), in.dv);
  for (int64_t C : {1, 4, 16, 64}) {
    const std::vector<double> want = chunked_reference(in, C);
    double max_diff = 0, max_ref = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      max_diff = std::max(max_diff, std::abs(out[i] - want[i]));
      max_ref = std::max(max_ref, std::abs(want[i]));
    }
    std::printf("chunk %lld: max |float32 recurrence - float64 chunked| %.3g (outputs up to %.3g)\n",
                static_cast<long long>(C), max_diff, max_ref);
    EXPECT_LE(max_diff, 1e-5 * std::max(1.0, max_ref)) << "chunk " << C;
  }
}

// The chunked form (float32) against the float64 chunked evaluation and the
// recurrence: outputs and the final state, over several chunks and a partial
// last one, for chunk lengths that divide T and that do not.
TEST(GatedDeltaRule, ChunkedFormEqualsRecurrenceAndFloat64) {
  const DeltaInputs in = random_inputs(/*T=*/150, /*dk=*/32, /*dv=*/16, 13);
  std::vector<float> s_rec(in.dk * in.dv, 0.0f), out_rec(in.T * in.dv);
  gated_delta_rule(in.q.data(), in.k.data(), in.dk, in.v.data(), in.dv, in.g.data(), in.beta.data(), 1, in.T, in.dk,
                   in.dv, s_rec.data(), out_rec.data(), in.dv);
  const std::vector<double> want = chunked_reference(in, 64);
  for (int64_t C : {1, 7, 64, 256}) {
    std::vector<float> s(in.dk * in.dv, 0.0f), out(in.T * in.dv);
    gated_delta_rule_chunked(in.q.data(), in.k.data(), in.dk, in.v.data(), in.dv, in.g.data(), in.beta.data(), 1,
                             in.T, in.dk, in.dv, s.data(), out.data(), in.dv, C);
    double d64 = 0, drec = 0, dstate = 0, ref = 0, sref = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      d64 = std::max(d64, std::abs(out[i] - want[i]));
      drec = std::max(drec, double(std::abs(out[i] - out_rec[i])));
      ref = std::max(ref, std::abs(want[i]));
    }
    for (size_t i = 0; i < s.size(); ++i) {
      dstate = std::max(dstate, double(std::abs(s[i] - s_rec[i])));
      sref = std::max(sref, double(std::abs(s_rec[i])));
    }
    std::printf("chunk %lld: max |chunked - float64| %.3g, |chunked - recurrence| %.3g (outputs up to %.3g), "
                "state %.3g (up to %.3g)\n",
                static_cast<long long>(C), d64, drec, ref, dstate, sref);
    EXPECT_LE(d64, 1e-5 * std::max(1.0, ref)) << "chunk " << C;
    EXPECT_LE(drec, 1e-5 * std::max(1.0, ref)) << "chunk " << C;
    EXPECT_LE(dstate, 1e-5 * std::max(1.0, sref)) << "chunk " << C;
  }
}

// Decays so strong that exp of the cumulative gate underflows inside a chunk:
// the chunked form stays finite and equal to the recurrence.
TEST(GatedDeltaRule, ChunkedFormUnderStrongDecay) {
  DeltaInputs in = random_inputs(/*T=*/96, /*dk=*/16, /*dv=*/16, 17);
  for (size_t t = 0; t < in.g.size(); ++t) in.g[t] = t % 5 == 0 ? -40.0f : -0.01f;
  std::vector<float> s_rec(in.dk * in.dv, 0.0f), out_rec(in.T * in.dv), s(in.dk * in.dv, 0.0f), out(in.T * in.dv);
  gated_delta_rule(in.q.data(), in.k.data(), in.dk, in.v.data(), in.dv, in.g.data(), in.beta.data(), 1, in.T, in.dk,
                   in.dv, s_rec.data(), out_rec.data(), in.dv);
  gated_delta_rule_chunked(in.q.data(), in.k.data(), in.dk, in.v.data(), in.dv, in.g.data(), in.beta.data(), 1, in.T,
                           in.dk, in.dv, s.data(), out.data(), in.dv);
  double d = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    ASSERT_TRUE(std::isfinite(out[i])) << i;
    d = std::max(d, double(std::abs(out[i] - out_rec[i])));
  }
  for (size_t i = 0; i < s.size(); ++i) d = std::max(d, double(std::abs(s[i] - s_rec[i])));
  std::printf("strong decay: max |chunked - recurrence| %.3g\n", d);
  EXPECT_LE(d, 1e-5);
}

TEST(GatedDeltaRule, StateCarriesAcrossCalls) {
  const DeltaInputs in = random_inputs(/*T=*/20, /*dk=*/8, /*dv=*/12, 11);
  std::vector<float> s_all(in.dk * in.dv, 0.0f), out_all(in.T * in.dv);
  gated_delta_rule(in.q.data(), in.k.data(), in.dk, in.v.data(), in.dv, in.g.data(), in.beta.data(), 1, in.T, in.dk,
                   in.dv, s_all.data(), out_all.data(), in.dv);
  std::vector<float> s_step(in.dk * in.dv, 0.0f), out_step(in.T * in.dv);
  for (int64_t t = 0; t < in.T; ++t)
    gated_delta_rule(in.q.data() + t * in.dk, in.k.data() + t * in.dk, in.dk, in.v.data() + t * in.dv, in.dv,
                     in.g.data() + t, in.beta.data() + t, 1, 1, in.dk, in.dv, s_step.data(), out_step.data() + t * in.dv,
                     in.dv);
  EXPECT_EQ(out_all, out_step);
  EXPECT_EQ(s_all, s_step);
}

nlohmann::json hybrid_json(const char* model_type) {
  auto j = nlohmann::json::parse(R"({"vocab_size":256,"hidden_size":64,"num_hidden_layers":8,
    "num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"num_experts":8,"num_experts_per_tok":2,
    "moe_intermediate_size":32,"shared_expert_intermediate_size":48,"rms_norm_eps":1e-6,
    "rope_parameters":{"rope_theta":1e7,"rope_type":"default","partial_rotary_factor":0.25},
    "linear_num_key_heads":2,"linear_num_value_heads":4,"linear_key_head_dim":16,"linear_value_head_dim":8,
    "linear_conv_kernel_dim":4})");
  j["model_type"] = model_type;
  return j;
}

TEST(GatedDeltaConfig, LayerTypesAndInterval) {
  ModelConfig c = parse_config(hybrid_json("qwen3_next"), "cfg.json");
  // No layer_types: every 4th layer full attention.
  EXPECT_EQ(c.layer_is_linear, (std::vector<bool>{true, true, true, false, true, true, true, false}));
  EXPECT_TRUE(c.linear.fused_projections);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_TRUE(c.attention_output_gate);
  EXPECT_TRUE(c.norm_zero_centred);
  EXPECT_TRUE(c.shared_expert_gated);
  EXPECT_EQ(c.shared_expert_intermediate_size, 48);
  EXPECT_EQ(c.rope_dim, 4);
  EXPECT_EQ(c.linear.conv_dim(), 2 * 2 * 16 + 4 * 8);
  auto j = hybrid_json("qwen3_5_moe_text");
  j["full_attention_interval"] = 2;
  c = parse_config(j, "cfg.json");
  EXPECT_EQ(c.layer_is_linear, (std::vector<bool>{true, false, true, false, true, false, true, false}));
  EXPECT_FALSE(c.linear.fused_projections);
  j["layer_types"] = std::vector<std::string>(8, "full_attention");
  j["layer_types"][5] = "linear_attention";
  c = parse_config(j, "cfg.json");
  EXPECT_EQ(c.layer_is_linear, (std::vector<bool>{false, false, false, false, false, true, false, false}));
  j["layer_types"][5] = "sliding_attention";
  EXPECT_THROW(parse_config(j, "cfg.json"), Error);
  j["layer_types"] = std::vector<std::string>(3, "full_attention");
  EXPECT_THROW(parse_config(j, "cfg.json"), Error);
}

// A prefill of T tokens against the same tokens decoded one at a time (conv
// and recurrent states, and the KV rows of the full-attention layers, carried
// in the cache).
class PrefillDecodeTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PrefillDecodeTest, PrefillEqualsStepByStepDecode) {
  EQ_REQUIRE_SHARED();
  auto model = Model::open((test::shared_dir() / "models" / GetParam()).string());
  const int64_t B = 2, T = 40, V = model->config().vocab_size;
  std::vector<int32_t> tokens(B * T);
  for (int64_t i = 0; i < B * T; ++i) tokens[i] = static_cast<int32_t>((i * 37 + 11) % 251);
  KvCache prefill = model->new_cache(B, T);
  const auto all = model->forward(tokens, B, T, prefill);
  KvCache decode = model->new_cache(B, T);
  double max_diff = 0, max_logit = 0;
  for (float x : all) max_logit = std::max(max_logit, std::abs(double(x)));
  for (int64_t t = 0; t < T; ++t) {
    const std::vector<int32_t> step = {tokens[t], tokens[T + t]};
    const auto logits = model->forward(step, B, 1, decode);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t v = 0; v < V; ++v)
        max_diff = std::max(max_diff, std::abs(double(logits[b * V + v]) - all[(b * T + t) * V + v]));
  }
  // The matmuls of one row and of many sum in different orders: relative to the logits' scale.
  std::printf("[%s] max |prefill - decode| logit %.3g (logits up to %.3g)\n", GetParam().c_str(), max_diff, max_logit);
  EXPECT_LE(max_diff, 1e-5 * std::max(1.0, max_logit));
}

// The first linear-attention layer alone: a prefill of its normed inputs
// against the same rows one position at a time.
TEST_P(PrefillDecodeTest, LinearAttentionLayerPrefillEqualsDecode) {
  EQ_REQUIRE_SHARED();
  auto model = Model::open((test::shared_dir() / "models" / GetParam()).string());
  const ModelConfig& c = model->config();
  const int64_t layer = std::find(c.layer_is_linear.begin(), c.layer_is_linear.end(), true) - c.layer_is_linear.begin();
  ASSERT_LT(layer, c.num_layers);
  const LinearAttentionWeights w = load_linear_attention(model->weights(), c, layer);
  const int64_t B = 2, T = 100, H = c.hidden_size;  // two chunks of the prefill
  std::mt19937 rng(5);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  std::vector<float> x(B * T * H), all(B * T * H), step(B * H);
  for (float& f : x) f = n01(rng);
  KvCache prefill = model->new_cache(B, T);
  linear_attention_forward(c, w, layer, x.data(), B, T, prefill, all.data());
  KvCache decode = model->new_cache(B, T);
  double max_diff = 0, max_out = 0;
  for (int64_t t = 0; t < T; ++t) {
    std::vector<float> xt(B * H);
    for (int64_t b = 0; b < B; ++b) std::copy_n(x.data() + (b * T + t) * H, H, xt.data() + b * H);
    linear_attention_forward(c, w, layer, xt.data(), B, 1, decode, step.data());
    decode.advance(1);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < H; ++i) {
        max_diff = std::max(max_diff, std::abs(double(step[b * H + i]) - all[(b * T + t) * H + i]));
        max_out = std::max(max_out, std::abs(double(all[(b * T + t) * H + i])));
      }
  }
  std::printf("[%s] layer %lld: max |prefill - decode| %.3g (outputs up to %.3g)\n", GetParam().c_str(),
              static_cast<long long>(layer), max_diff, max_out);
  EXPECT_LE(max_diff, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(SharedModels, PrefillDecodeTest, ::testing::Values("qwen3_next-small", "qwen3_5_moe-small"),
                         [](const auto& info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

}  // namespace
}  // namespace eq::model
