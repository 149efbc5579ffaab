// mixtral, qwen2_moe, olmoe (and qwen3_moe with a dense layer) on small random
// checkpoints written here, against an independent float64 implementation of
// the HF transformers definitions (plain loops, full recompute, no KV cache,
// tensor names spelled out here rather than taken from lib/model/config).
// Also: prefill + decode equals one prefill, thread-count independence, the
// observer's view, and a replaced MoE block.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <numeric>
#include <random>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/thread_pool.h"
#include "io/safetensors.h"
#include "model/forward.h"
#include "model/generate.h"
#include "float64_model_check.h"
#include "test_support.h"

namespace eq::model {
namespace {

struct Spec {
  std::string type;  // model_type
  int64_t V = 97, H = 64, L = 3, nh = 4, nkv = 2, hd = 16, E = 8, K = 2, I = 32;
  int64_t shared_I = 0;      // qwen2_moe shared expert
  int64_t dense_I = 0;       // dense layers (qwen*) via mlp_only_layers
  std::vector<int64_t> dense_layers;
  bool renorm = false, qkv_bias = false, qk_norm_head = false, qk_norm_full = false, tie = false;
  double clip_qkv = 0, eps = 1e-6, theta = 10000;
  std::string moe_prefix() const { return type == "mixtral" ? "block_sparse_moe" : "mlp"; }
  std::vector<std::string> proj() const {
    return type == "mixtral" ? std::vector<std::string>{"w1", "w3", "w2"}
                             : std::vector<std::string>{"gate_proj", "up_proj", "down_proj"};
  }
  bool is_dense(int64_t l) const {
    return std::find(dense_layers.begin(), dense_layers.end(), l) != dense_layers.end();
  }
};

Spec mixtral() {
  Spec s;
  s.type = "mixtral";
  s.renorm = true;
  s.eps = 1e-5;
  return s;
}
Spec qwen2_moe() {
  Spec s;
  s.type = "qwen2_moe";
  s.qkv_bias = true;
  s.shared_I = 48;
  s.dense_I = 80;
  s.dense_layers = {1};
  s.tie = true;
  return s;
}
Spec olmoe() {
  Spec s;
  s.type = "olmoe";
  s.qk_norm_full = true;
  s.clip_qkv = 2.5;
  s.eps = 1e-5;
  return s;
}
Spec qwen3_moe() {
  Spec s;
  s.type = "qwen3_moe";
  s.qk_norm_head = true;
  s.renorm = true;
  s.dense_I = 40;
  s.dense_layers = {0};
  s.theta = 1e6;
  return s;
}

using arch_check::Weights;

nlohmann::json config_json(const Spec& s) {
  nlohmann::json j = {{"model_type", s.type},        {"vocab_size", s.V},          {"hidden_size", s.H},
                      {"num_hidden_layers", s.L},    {"num_attention_heads", s.nh}, {"num_key_value_heads", s.nkv},
                      {"head_dim", s.hd},            {"num_experts_per_tok", s.K}, {"rms_norm_eps", s.eps},
                      {"rope_theta", s.theta},       {"tie_word_embeddings", s.tie},
                      {"max_position_embeddings", 64}, {"torch_dtype", "float32"}};
  if (s.type == "mixtral") {
    j["num_local_experts"] = s.E;
    j["intermediate_size"] = s.I;
  } else if (s.type == "olmoe") {
    j["num_experts"] = s.E;
    j["intermediate_size"] = s.I;
    j["norm_topk_prob"] = false;
    j["clip_qkv"] = s.clip_qkv;
  } else {
    j["num_experts"] = s.E;
    j["moe_intermediate_size"] = s.I;
    j["intermediate_size"] = s.dense_I;
    j["norm_topk_prob"] = s.renorm;
    j["mlp_only_layers"] = s.dense_layers;
    j["decoder_sparse_step"] = 1;
    if (s.type == "qwen2_moe") j["shared_expert_intermediate_size"] = s.shared_I;
  }
  return j;
}

Weights random_weights(const Spec& s, uint32_t seed) {
  arch_check::RandomWeights r(seed);
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float scale, float offset = 0) {
    r.add(name, std::move(shape), scale, offset);
  };
  const float lin = 1.0f / std::sqrt(static_cast<float>(s.H));
  add("model.embed_tokens.weight", {s.V, s.H}, 1.0f);
  for (int64_t l = 0; l < s.L; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {s.H}, 0.1f, 1.0f);
    add(p + "post_attention_layernorm.weight", {s.H}, 0.1f, 1.0f);
    const std::string a = p + "self_attn.";
    add(a + "q_proj.weight", {s.nh * s.hd, s.H}, lin);
    add(a + "k_proj.weight", {s.nkv * s.hd, s.H}, lin);
    add(a + "v_proj.weight", {s.nkv * s.hd, s.H}, lin);
    add(a + "o_proj.weight", {s.H, s.nh * s.hd}, 1.0f / std::sqrt(static_cast<float>(s.nh * s.hd)));
    if (s.qkv_bias) {
      add(a + "q_proj.bias", {s.nh * s.hd}, 0.2f);
      add(a + "k_proj.bias", {s.nkv * s.hd}, 0.2f);
      add(a + "v_proj.bias", {s.nkv * s.hd}, 0.2f);
    }
    if (s.qk_norm_head) {
      add(a + "q_norm.weight", {s.hd}, 0.1f, 1.0f);
      add(a + "k_norm.weight", {s.hd}, 0.1f, 1.0f);
    }
    if (s.qk_norm_full) {
      add(a + "q_norm.weight", {s.nh * s.hd}, 0.1f, 1.0f);
      add(a + "k_norm.weight", {s.nkv * s.hd}, 0.1f, 1.0f);
    }
    const auto pr = s.proj();
    auto mlp = [&](const std::string& m, int64_t inter) {
      add(m + pr[0] + ".weight", {inter, s.H}, lin);
      add(m + pr[1] + ".weight", {inter, s.H}, lin);
      add(m + pr[2] + ".weight", {s.H, inter}, 1.0f / std::sqrt(static_cast<float>(inter)));
    };
    if (s.is_dense(l)) {
      mlp(p + "mlp.", s.dense_I);
      continue;
    }
    const std::string m = p + s.moe_prefix() + ".";
    add(m + "gate.weight", {s.E, s.H}, 2.0f * lin);
    for (int64_t e = 0; e < s.E; ++e) mlp(m + "experts." + std::to_string(e) + ".", s.I);
    if (s.shared_I > 0) {
      mlp(m + "shared_expert.", s.shared_I);
      add(m + "shared_expert_gate.weight", {1, s.H}, lin);
    }
  }
  add("model.norm.weight", {s.H}, 0.1f, 1.0f);
  if (!s.tie) add("lm_head.weight", {s.V, s.H}, lin);
  return r.weights;
}

std::string write_checkpoint(const Spec& s, const Weights& w) {
  return arch_check::write_float32_checkpoint(w, config_json(s), s.type);
}

// ---------------------------------------------------------------------------
// float64 reference: one sequence, full recompute, HF semantics.
// ---------------------------------------------------------------------------
struct Ref64 {
  const Spec& s;
  std::map<std::string, std::vector<double>> w;
  Ref64(const Spec& spec, const Weights& ws) : s(spec) {
    for (const auto& [n, sv] : ws) w[n] = std::vector<double>(sv.second.begin(), sv.second.end());
  }
  const std::vector<double>& at(const std::string& n) const { return w.at(n); }
  bool has(const std::string& n) const { return w.count(n) > 0; }

  // y[out] = W[out, in] x
  static std::vector<double> matvec(const std::vector<double>& W, const std::vector<double>& x, int64_t out) {
    const int64_t in = static_cast<int64_t>(x.size());
    std::vector<double> y(out, 0.0);
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) y[o] += W[o * in + i] * x[i];
    return y;
  }
  std::vector<double> rms(const std::vector<double>& x, const std::vector<double>& g, size_t off, size_t n) const {
    double ss = 0;
    for (size_t i = 0; i < n; ++i) ss += x[off + i] * x[off + i];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + s.eps);
    std::vector<double> y(n);
    for (size_t i = 0; i < n; ++i) y[i] = g[i] * x[off + i] * inv;
    return y;
  }
  std::vector<double> mlp(const std::string& m, const std::vector<double>& x, int64_t inter) const {
    const auto pr = s.proj();
    auto g = matvec(at(m + pr[0] + ".weight"), x, inter);
    auto u = matvec(at(m + pr[1] + ".weight"), x, inter);
    for (int64_t i = 0; i < inter; ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
    return matvec(at(m + pr[2] + ".weight"), g, s.H);
  }
  void rope(std::vector<double>& v, int64_t heads, int64_t pos) const {
    const int64_t half = s.hd / 2;
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < half; ++i) {
        const double a = pos * std::pow(s.theta, -2.0 * i / s.hd);
        double& x1 = v[h * s.hd + i];
        double& x2 = v[h * s.hd + i + half];
        const double r1 = x1 * std::cos(a) - x2 * std::sin(a), r2 = x2 * std::cos(a) + x1 * std::sin(a);
        x1 = r1;
        x2 = r2;
      }
  }

  // logits [T][V]
  std::vector<std::vector<double>> run(const std::vector<int32_t>& tokens) const {
    const int64_t T = static_cast<int64_t>(tokens.size()), qd = s.nh * s.hd, kvd = s.nkv * s.hd;
    std::vector<std::vector<double>> h(T);
    for (int64_t t = 0; t < T; ++t)
      h[t] = std::vector<double>(at("model.embed_tokens.weight").begin() + tokens[t] * s.H,
                                 at("model.embed_tokens.weight").begin() + (tokens[t] + 1) * s.H);
    for (int64_t l = 0; l < s.L; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".", a = p + "self_attn.";
      std::vector<std::vector<double>> q(T), k(T), v(T);
      for (int64_t t = 0; t < T; ++t) {
        const auto x = rms(h[t], at(p + "input_layernorm.weight"), 0, s.H);
        q[t] = matvec(at(a + "q_proj.weight"), x, qd);
        k[t] = matvec(at(a + "k_proj.weight"), x, kvd);
        v[t] = matvec(at(a + "v_proj.weight"), x, kvd);
        if (s.qkv_bias)
          for (int64_t i = 0; i < qd; ++i) q[t][i] += at(a + "q_proj.bias")[i];
        if (s.qkv_bias)
          for (int64_t i = 0; i < kvd; ++i) k[t][i] += at(a + "k_proj.bias")[i], v[t][i] += at(a + "v_proj.bias")[i];
        if (s.qk_norm_full) {
          q[t] = rms(q[t], at(a + "q_norm.weight"), 0, qd);
          k[t] = rms(k[t], at(a + "k_norm.weight"), 0, kvd);
        }
        if (s.qk_norm_head) {
          std::vector<double> qq, kk;
          for (int64_t hh = 0; hh < s.nh; ++hh) {
            auto r = rms(q[t], at(a + "q_norm.weight"), hh * s.hd, s.hd);
            qq.insert(qq.end(), r.begin(), r.end());
          }
          for (int64_t hh = 0; hh < s.nkv; ++hh) {
            auto r = rms(k[t], at(a + "k_norm.weight"), hh * s.hd, s.hd);
            kk.insert(kk.end(), r.begin(), r.end());
          }
          q[t] = qq;
          k[t] = kk;
        }
        if (s.clip_qkv > 0)
          for (auto* vec : {&q[t], &k[t], &v[t]})
            for (double& d : *vec) d = std::clamp(d, -s.clip_qkv, s.clip_qkv);
        rope(q[t], s.nh, t);
        rope(k[t], s.nkv, t);
      }
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> ctx(qd, 0.0);
        for (int64_t hh = 0; hh < s.nh; ++hh) {
          const int64_t g = hh / (s.nh / s.nkv);
          std::vector<double> sc(t + 1);
          double mx = -1e300;
          for (int64_t j = 0; j <= t; ++j) {
            double d = 0;
            for (int64_t i = 0; i < s.hd; ++i) d += q[t][hh * s.hd + i] * k[j][g * s.hd + i];
            sc[j] = d / std::sqrt(static_cast<double>(s.hd));
            mx = std::max(mx, sc[j]);
          }
          double z = 0;
          for (auto& x : sc) z += (x = std::exp(x - mx));
          for (int64_t j = 0; j <= t; ++j)
            for (int64_t i = 0; i < s.hd; ++i) ctx[hh * s.hd + i] += sc[j] / z * v[j][g * s.hd + i];
        }
        const auto o = matvec(at(a + "o_proj.weight"), ctx, s.H);
        for (int64_t i = 0; i < s.H; ++i) h[t][i] += o[i];
      }
      for (int64_t t = 0; t < T; ++t) {
        const auto x = rms(h[t], at(p + "post_attention_layernorm.weight"), 0, s.H);
        std::vector<double> out(s.H, 0.0);
        if (s.is_dense(l)) {
          out = mlp(p + "mlp.", x, s.dense_I);
        } else {
          const std::string m = p + s.moe_prefix() + ".";
          auto logit = matvec(at(m + "gate.weight"), x, s.E);
          const double mx = *std::max_element(logit.begin(), logit.end());
          double z = 0;
          for (auto& d : logit) z += (d = std::exp(d - mx));
          for (auto& d : logit) d /= z;  // probabilities over all experts
          std::vector<int> order(s.E);
          std::iota(order.begin(), order.end(), 0);
          std::stable_sort(order.begin(), order.end(), [&](int a2, int b2) { return logit[a2] > logit[b2]; });
          double wsum = 0;
          for (int64_t j = 0; j < s.K; ++j) wsum += logit[order[j]];
          for (int64_t j = 0; j < s.K; ++j) {
            const double wj = s.renorm ? logit[order[j]] / wsum : logit[order[j]];
            const auto y = mlp(m + "experts." + std::to_string(order[j]) + ".", x, s.I);
            for (int64_t i = 0; i < s.H; ++i) out[i] += wj * y[i];
          }
          if (s.shared_I > 0) {
            const auto y = mlp(m + "shared_expert.", x, s.shared_I);
            const double gl = matvec(at(m + "shared_expert_gate.weight"), x, 1)[0];
            const double g = 1.0 / (1.0 + std::exp(-gl));
            for (int64_t i = 0; i < s.H; ++i) out[i] += g * y[i];
          }
        }
        for (int64_t i = 0; i < s.H; ++i) h[t][i] += out[i];
      }
    }
    std::vector<std::vector<double>> logits(T);
    const auto& head = s.tie ? at("model.embed_tokens.weight") : at("lm_head.weight");
    for (int64_t t = 0; t < T; ++t) logits[t] = matvec(head, rms(h[t], at("model.norm.weight"), 0, s.H), s.V);
    return logits;
  }
};

class ArchTest : public ::testing::TestWithParam<Spec> {};

TEST_P(ArchTest, MatchesFloat64Reference) {
  const Spec s = GetParam();
  const Weights w = random_weights(s, 7);
  auto model = Model::open(write_checkpoint(s, w));
  const Ref64 ref(s, w);
  arch_check::expect_logits_match_float64(*model, s.V, [&](const std::vector<int32_t>& t) { return ref.run(t); },
                                          s.type);
}

TEST_P(ArchTest, DecodeMatchesPrefillAndThreadsAgree) {
  const Spec s = GetParam();
  auto model = Model::open(write_checkpoint(s, random_weights(s, 3)));
  arch_check::expect_decode_matches_prefill_and_threads_agree(*model, s.V, 17, 9, 0, s.type);
}

INSTANTIATE_TEST_SUITE_P(Archs, ArchTest, ::testing::Values(mixtral(), qwen2_moe(), olmoe(), qwen3_moe()),
                         [](const auto& info) { return info.param.type; });

// The observer sees consistent routing, and a replacement block is used.
struct CountingObserver : MoeObserver {
  bool want = true;
  int calls = 0;
  double max_err = 0;  // |output - Σ w · expert_output| (no shared expert in this spec)
  bool wants_expert_outputs() const override { return want; }
  void on_moe_block(const MoeObservation& o) override {
    ++calls;
    for (int64_t t = 0; t < o.tokens; ++t) {
      float wsum = 0;
      for (int64_t j = 0; j < o.top_k; ++j) wsum += o.gate_weights[t * o.top_k + j];
      EXPECT_NEAR(wsum, 1.0f, 1e-5);  // mixtral renormalizes
      for (int64_t i = 0; i < o.hidden; ++i) {
        double acc = 0;
        for (int64_t j = 0; j < o.top_k; ++j)
          acc += o.gate_weights[t * o.top_k + j] * o.expert_outputs[(t * o.top_k + j) * o.hidden + i];
        max_err = std::max(max_err, std::abs(acc - o.output[t * o.hidden + i]));
      }
    }
  }
};

struct ZeroBlock : MoeBlock {
  int calls = 0;
  int64_t hidden;
  explicit ZeroBlock(int64_t h) : hidden(h) {}
  void forward(const MoeCall& call, const float*, float* out) override {
    ++calls;
    std::fill(out, out + call.batch * call.seq_len * hidden, 0.0f);
  }
};

TEST(MoeHooks, ObserverAndReplacement) {
  const Spec s = mixtral();
  auto model = Model::open(write_checkpoint(s, random_weights(s, 1)));
  CountingObserver obs;
  model->set_observer(&obs);
  const std::vector<int32_t> tokens = arch_check::random_tokens(8, s.V, 2);
  KvCache c = model->new_cache(1, 8);
  const auto before = model->forward(tokens, 1, 8, c);
  EXPECT_EQ(obs.calls, s.L);
  EXPECT_LE(obs.max_err, 1e-5);
  model->set_observer(nullptr);

  auto zero = std::make_unique<ZeroBlock>(s.H);
  ZeroBlock* z = zero.get();
  model->set_moe_block(1, std::move(zero));
  KvCache c2 = model->new_cache(1, 8);
  const auto after = model->forward(tokens, 1, 8, c2);
  EXPECT_EQ(z->calls, 1);
  EXPECT_NE(before, after);
}

TEST(Tokens, OutOfRangeIdNamesPosition) {
  const Spec s = mixtral();
  auto model = Model::open(write_checkpoint(s, random_weights(s, 1)));
  std::vector<int32_t> tokens = {1, 2, 3, static_cast<int32_t>(s.V)};
  KvCache c = model->new_cache(2, 2);
  try {
    model->forward(tokens, 2, 2, c);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sequence 1, position 1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace eq::model
