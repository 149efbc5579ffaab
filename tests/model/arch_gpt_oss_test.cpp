// gpt_oss on a small random checkpoint written here in the stacked layout
// (gate_up_proj [E, H, 2I] with gate/up interleaved, down_proj [E, I, H],
// applied as x @ W, with their biases), against an independent float64
// implementation of the transformers definitions (plain loops, full
// recompute, no KV cache): q/k/v/o biases, YaRN without truncation, a learned
// sink per head, sliding-window layers from layer_types (the sequence is
// longer than the window and than a query block), the biased router with a
// softmax over the top-k logits, and the clamped SwiGLU with a limit low
// enough to clamp often. Also: prefill + chunk + decode equals one prefill,
// and the thread count changes no bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <numbers>
#include <numeric>
#include <random>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/thread_pool.h"
#include "io/safetensors.h"
#include "model/forward.h"
#include "float64_model_check.h"
#include "test_support.h"

namespace eq::model {
namespace {

constexpr int64_t V = 97, H = 48, L = 3, NH = 4, NKV = 2, HD = 16, E = 8, K = 3, I = 16, kWindow = 7;
constexpr double kTheta = 10000, kFactor = 4, kOriginal = 256, kEps = 1e-5, kLimit = 1.5, kAlpha = 1.702;
const bool kSliding[L] = {true, false, true};

using arch_check::Weights;

nlohmann::json config_json() {
  return {{"model_type", "gpt_oss"},
          {"vocab_size", V},
          {"hidden_size", H},
          {"num_hidden_layers", L},
          {"num_attention_heads", NH},
          {"num_key_value_heads", NKV},
          {"head_dim", HD},
          {"num_local_experts", E},
          {"num_experts_per_tok", K},
          {"intermediate_size", I},
          {"attention_bias", true},
          {"rms_norm_eps", kEps},
          {"sliding_window", kWindow},
          {"layer_types", {"sliding_attention", "full_attention", "sliding_attention"}},
          {"swiglu_limit", kLimit},
          {"max_position_embeddings", 1024},
          {"rope_parameters",
           {{"rope_type", "yarn"},
            {"rope_theta", kTheta},
            {"factor", kFactor},
            {"original_max_position_embeddings", int64_t(kOriginal)},
            {"beta_fast", 32.0},
            {"beta_slow", 1.0},
            {"truncate", false}}},
          {"tie_word_embeddings", false},
          {"dtype", "float32"}};
}

Weights random_weights(uint32_t seed) {
  arch_check::RandomWeights r(seed);
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float scale, float offset = 0) {
    r.add(name, std::move(shape), scale, offset);
  };
  auto lin = [](int64_t in) { return 1.0f / std::sqrt(static_cast<float>(in)); };
  add("model.embed_tokens.weight", {V, H}, 1.0f);
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".", a = p + "self_attn.", m = p + "mlp.";
    add(p + "input_layernorm.weight", {H}, 0.1f, 1.0f);
    add(p + "post_attention_layernorm.weight", {H}, 0.1f, 1.0f);
    add(a + "q_proj.weight", {NH * HD, H}, lin(H));
    add(a + "k_proj.weight", {NKV * HD, H}, lin(H));
    add(a + "v_proj.weight", {NKV * HD, H}, lin(H));
    add(a + "o_proj.weight", {H, NH * HD}, lin(NH * HD));
    add(a + "q_proj.bias", {NH * HD}, 0.2f);
    add(a + "k_proj.bias", {NKV * HD}, 0.2f);
    add(a + "v_proj.bias", {NKV * HD}, 0.2f);
    add(a + "o_proj.bias", {H}, 0.2f);
    add(a + "sinks", {NH}, 1.0f);
    add(m + "router.weight", {E, H}, 2.0f * lin(H));
    add(m + "router.bias", {E}, 0.5f);
    add(m + "experts.gate_up_proj", {E, H, 2 * I}, 1.5f * lin(H));
    add(m + "experts.gate_up_proj_bias", {E, 2 * I}, 0.5f);
    add(m + "experts.down_proj", {E, I, H}, lin(I));
    add(m + "experts.down_proj_bias", {E, H}, 0.2f);
  }
  add("model.norm.weight", {H}, 0.1f, 1.0f);
  add("lm_head.weight", {V, H}, lin(H));
  return r.weights;
}

std::string write_checkpoint(const Weights& w) { return arch_check::write_float32_checkpoint(w, config_json(), "gpt_oss"); }

// ---------------------------------------------------------------------------
// float64 reference: one sequence, full recompute.
// ---------------------------------------------------------------------------
using Vec = std::vector<double>;

struct Ref64 {
  std::map<std::string, Vec> w;
  Vec inv_freq;
  double cos_sin_factor = 0;

  explicit Ref64(const Weights& ws) {
    for (const auto& [n, sv] : ws) w[n] = Vec(sv.second.begin(), sv.second.end());
    // YaRN, truncate false: the ramp's ends are the exact (fractional) dims.
    const double d = HD;
    auto dim_of = [&](double rot) { return d * std::log(kOriginal / (rot * 2 * std::numbers::pi)) / (2 * std::log(kTheta)); };
    const double low = std::max(0.0, dim_of(32)), high = std::min(d - 1, dim_of(1));
    for (int64_t i = 0; i < HD / 2; ++i) {
      const double f = std::pow(kTheta, -2.0 * i / d);
      const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
      inv_freq.push_back(f * (1 - ramp) + f / kFactor * ramp);
    }
    cos_sin_factor = 0.1 * std::log(kFactor) + 1.0;
  }
  const Vec& at(const std::string& n) const { return w.at(n); }

  Vec matvec(const std::string& name, const Vec& x, int64_t out, const std::string& bias) const {
    const Vec& W = at(name);
    const int64_t in = static_cast<int64_t>(x.size());
    Vec y(at(bias).begin(), at(bias).begin() + out);
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) y[o] += W[o * in + i] * x[i];
    return y;
  }
  Vec rms(const Vec& x, const std::string& g) const {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double inv = 1.0 / std::sqrt(ss / double(x.size()) + kEps);
    Vec y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = at(g)[i] * x[i] * inv;
    return y;
  }
  void rope(Vec& v, size_t off, int64_t pos) const {
    const int64_t half = HD / 2;
    const Vec x(v.begin() + off, v.begin() + off + HD);
    for (int64_t i = 0; i < half; ++i) {
      const double a = pos * inv_freq[i], c = std::cos(a) * cos_sin_factor, s = std::sin(a) * cos_sin_factor;
      v[off + i] = x[i] * c - x[i + half] * s;
      v[off + i + half] = x[i + half] * c + x[i] * s;
    }
  }

  Vec moe(const std::string& m, const Vec& x) const {
    const Vec logit = matvec(m + "router.weight", x, E, m + "router.bias");
    std::vector<int64_t> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return logit[a] > logit[b]; });
    double z = 0;
    for (int64_t j = 0; j < K; ++j) z += std::exp(logit[order[j]] - logit[order[0]]);
    const Vec &gu = at(m + "experts.gate_up_proj"), &gub = at(m + "experts.gate_up_proj_bias");
    const Vec &dn = at(m + "experts.down_proj"), &dnb = at(m + "experts.down_proj_bias");
    Vec out(H, 0.0);
    for (int64_t j = 0; j < K; ++j) {
      const int64_t e = order[j];
      const double wj = std::exp(logit[e] - logit[order[0]]) / z;
      Vec act(I);
      for (int64_t i = 0; i < I; ++i) {
        double g = gub[e * 2 * I + 2 * i], u = gub[e * 2 * I + 2 * i + 1];
        for (int64_t h = 0; h < H; ++h) {
          g += x[h] * gu[(e * H + h) * 2 * I + 2 * i];
          u += x[h] * gu[(e * H + h) * 2 * I + 2 * i + 1];
        }
        g = std::min(g, kLimit);
        u = std::clamp(u, -kLimit, kLimit);
        act[i] = (u + 1) * g / (1 + std::exp(-kAlpha * g));
      }
      for (int64_t h = 0; h < H; ++h) {
        double y = dnb[e * H + h];
        for (int64_t i = 0; i < I; ++i) y += act[i] * dn[(e * I + i) * H + h];
        out[h] += wj * y;
      }
    }
    return out;
  }

  // logits [T][V]
  std::vector<Vec> run(const std::vector<int32_t>& tokens) const {
    const int64_t T = static_cast<int64_t>(tokens.size());
    std::vector<Vec> h(T);
    for (int64_t t = 0; t < T; ++t)
      h[t] = Vec(at("model.embed_tokens.weight").begin() + tokens[t] * H,
                 at("model.embed_tokens.weight").begin() + (tokens[t] + 1) * H);
    const double scale = 1.0 / std::sqrt(double(HD));
    for (int64_t l = 0; l < L; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".", a = p + "self_attn.";
      std::vector<Vec> q(T), k(T), v(T);
      for (int64_t t = 0; t < T; ++t) {
        const Vec x = rms(h[t], p + "input_layernorm.weight");
        q[t] = matvec(a + "q_proj.weight", x, NH * HD, a + "q_proj.bias");
        k[t] = matvec(a + "k_proj.weight", x, NKV * HD, a + "k_proj.bias");
        v[t] = matvec(a + "v_proj.weight", x, NKV * HD, a + "v_proj.bias");
        for (int64_t hh = 0; hh < NH; ++hh) rope(q[t], hh * HD, t);
        for (int64_t hh = 0; hh < NKV; ++hh) rope(k[t], hh * HD, t);
      }
      for (int64_t t = 0; t < T; ++t) {
        Vec ctx(NH * HD, 0.0);
        const int64_t first = kSliding[l] ? std::max<int64_t>(0, t - kWindow + 1) : 0;
        for (int64_t hh = 0; hh < NH; ++hh) {
          const int64_t g = hh / (NH / NKV);
          const double sink = at(a + "sinks")[hh];
          Vec sc;
          for (int64_t j = first; j <= t; ++j) {
            double d = 0;
            for (int64_t i = 0; i < HD; ++i) d += q[t][hh * HD + i] * k[j][g * HD + i];
            sc.push_back(d * scale);
          }
          const double mx = std::max(sink, *std::max_element(sc.begin(), sc.end()));
          double z = std::exp(sink - mx);
          for (auto& s : sc) z += (s = std::exp(s - mx));
          for (int64_t j = first; j <= t; ++j)
            for (int64_t i = 0; i < HD; ++i) ctx[hh * HD + i] += sc[j - first] / z * v[j][g * HD + i];
        }
        const Vec o = matvec(a + "o_proj.weight", ctx, H, a + "o_proj.bias");
        for (int64_t i = 0; i < H; ++i) h[t][i] += o[i];
      }
      for (int64_t t = 0; t < T; ++t) {
        const Vec out = moe(p + "mlp.", rms(h[t], p + "post_attention_layernorm.weight"));
        for (int64_t i = 0; i < H; ++i) h[t][i] += out[i];
      }
    }
    std::vector<Vec> logits(T);
    const Vec& head = at("lm_head.weight");
    for (int64_t t = 0; t < T; ++t) {
      const Vec x = rms(h[t], "model.norm.weight");
      logits[t].assign(V, 0.0);
      for (int64_t o = 0; o < V; ++o)
        for (int64_t i = 0; i < H; ++i) logits[t][o] += head[o * H + i] * x[i];
    }
    return logits;
  }
};

TEST(GptOssArch, MatchesFloat64Reference) {
  const Weights w = random_weights(7);
  auto model = Model::open(write_checkpoint(w));
  const Ref64 ref(w);
  arch_check::expect_logits_match_float64(*model, V, [&](const std::vector<int32_t>& t) { return ref.run(t); },
                                          "gpt_oss");
}

// 30 tokens through windows of kWindow (7): the chunk and the decode steps reach
// past the window.
TEST(GptOssArch, DecodeMatchesPrefillAndThreadsAgree) {
  auto model = Model::open(write_checkpoint(random_weights(3)));
  arch_check::expect_decode_matches_prefill_and_threads_agree(*model, V, 30, 9, 12, "gpt_oss");
}

// A NaN attention sink or an infinite router bias is refused on read, naming
// the tensor and the flat index of the value (io/finite_values.h), by the
// library and by generate, perplexity and pack: never a run on garbage.
TEST(GptOssArch, NonFiniteSinkOrRouterBiasIsRefusedNamingTheTensor) {
  struct Case {
    std::string tensor;
    size_t index;
    float value;
    std::string shown;
  };
  const Case cases[] = {
      {"model.layers.1.self_attn.sinks", 2, std::nanf(""), "(nan) at flat index 2 [2]"},
      {"model.layers.0.mlp.router.bias", 5, INFINITY, "(+inf) at flat index 5 [5]"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.tensor);
    Weights w = random_weights(3);
    w[k.tensor].second[k.index] = k.value;
    const std::string dir = write_checkpoint(w);
    const std::string want = "tensor '" + k.tensor + "' holds a non-finite value " + k.shown;
    try {
      auto model = Model::open(dir);
      KvCache cache = model->new_cache(1, 4);
      const std::vector<int32_t> tokens = {1, 2, 3, 4};
      model->forward(tokens, 1, 4, cache);
      ADD_FAILURE() << "expected an error naming " << k.tensor;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
    const std::string ids = dir + "-ids.json", packed = dir + "-packed";
    std::ofstream(ids) << "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]";
    for (const std::string& args :
         {"generate --model " + dir + " --tokens " + ids + " -n 2",
          "perplexity --model " + dir + " --tokens " + ids + " --ctx 8",
          "pack --model " + dir + " --uniform int8_row --threads 1 -o " + packed}) {
      std::string out;
      EXPECT_EQ(test::run_command("timeout 60 " + test::binary() + " " + args, &out), 2) << args << "\n" << out;
      EXPECT_NE(out.find(want), std::string::npos) << args << "\n" << out;
    }
    EXPECT_FALSE(std::filesystem::exists(packed));
  }
}

}  // namespace
}  // namespace eq::model
