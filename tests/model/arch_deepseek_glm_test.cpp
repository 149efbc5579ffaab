// deepseek_v3 (multi-head latent attention, YaRN, interleaved RoPE) and
// glm4_moe (partial RoPE, per-head q/k norm, q/k/v biases) on small random
// checkpoints written here, against an independent float64 implementation of
// the HF transformers definitions (plain loops, full recompute, no KV cache,
// tensor names spelled out here). Both use the grouped sigmoid router with a
// correction bias, ungated shared experts and a dense first layer. Also:
// prefill + decode (latent-space attention over the cache) equals one
// prefill (expanded keys), thread-count independence, and multi-token-
// prediction layers present in the checkpoint are skipped.
#include <gtest/gtest.h>

#include <cmath>
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
#include "model/latent_attention.h"
#include "float64_model_check.h"
#include "test_support.h"

namespace eq::model {
namespace {

struct Spec {
  std::string name, type;  // test name, model_type
  int64_t V = 97, H = 48, L = 3, nh = 4, E = 8, K = 3, I = 16, dense_I = 40, n_shared = 2;
  int64_t groups = 4, topk_groups = 2;
  double scaling = 2.5, eps = 1e-6, theta = 10000;
  bool renorm = true, bias = false;
  // glm4_moe
  int64_t nkv = 2, hd = 16;
  double partial = 0.5;
  bool qk_norm = true;
  // deepseek_v3
  int64_t q_lora = 24, kv_lora = 16, nope = 8, rope = 8, v = 12;
  bool interleave = true, yarn = true;
  double yarn_factor = 8, mscale = 1.0, mscale_all_dim = 0.707;
  int64_t yarn_original = 4096;
  int64_t mtp_layers = 0;  // multi-token-prediction layers written after the last
  bool latent() const { return type == "deepseek_v3"; }
  int64_t rope_dim() const { return latent() ? rope : static_cast<int64_t>(hd * partial); }
};

void PrintTo(const Spec& s, std::ostream* os) { *os << s.name; }

Spec deepseek() {
  Spec s;
  s.name = "deepseek_v3";
  s.type = "deepseek_v3";
  s.mtp_layers = 1;
  return s;
}
// No query LoRA, plain (not interleaved) RoPE without YaRN, attention biases.
Spec deepseek_plain() {
  Spec s = deepseek();
  s.name = "deepseek_v3_no_q_lora";
  s.q_lora = 0;
  s.interleave = false;
  s.yarn = false;
  s.bias = true;
  s.renorm = false;
  s.mtp_layers = 0;
  return s;
}
Spec glm4() {
  Spec s;
  s.name = "glm4_moe";
  s.type = "glm4_moe";
  s.H = 64;
  s.E = 8;
  s.K = 2;
  s.groups = 2;
  s.topk_groups = 1;
  s.scaling = 1.5;
  s.n_shared = 1;
  s.eps = 1e-5;
  s.theta = 1e6;
  s.bias = true;
  s.mtp_layers = 1;
  return s;
}

using arch_check::Weights;

nlohmann::json config_json(const Spec& s) {
  nlohmann::json j = {{"model_type", s.type},
                      {"vocab_size", s.V},
                      {"hidden_size", s.H},
                      {"num_hidden_layers", s.L},
                      {"num_attention_heads", s.nh},
                      {"n_routed_experts", s.E},
                      {"num_experts_per_tok", s.K},
                      {"moe_intermediate_size", s.I},
                      {"intermediate_size", s.dense_I},
                      {"n_shared_experts", s.n_shared},
                      {"n_group", s.groups},
                      {"topk_group", s.topk_groups},
                      {"routed_scaling_factor", s.scaling},
                      {"norm_topk_prob", s.renorm},
                      {"first_k_dense_replace", 1},
                      {"num_nextn_predict_layers", s.mtp_layers},
                      {"rms_norm_eps", s.eps},
                      {"attention_bias", s.bias},
                      {"max_position_embeddings", 32768},
                      {"tie_word_embeddings", false},
                      {"dtype", "float32"}};
  if (s.latent()) {
    j["num_key_value_heads"] = s.nh;
    j["q_lora_rank"] = s.q_lora > 0 ? nlohmann::json(s.q_lora) : nlohmann::json(nullptr);
    j["kv_lora_rank"] = s.kv_lora;
    j["qk_nope_head_dim"] = s.nope;
    j["qk_rope_head_dim"] = s.rope;
    j["v_head_dim"] = s.v;
    j["head_dim"] = s.rope;
    j["rope_interleave"] = s.interleave;
    if (s.yarn)
      j["rope_parameters"] = {{"rope_type", "yarn"},
                              {"rope_theta", s.theta},
                              {"factor", s.yarn_factor},
                              {"original_max_position_embeddings", s.yarn_original},
                              {"beta_fast", 32.0},
                              {"beta_slow", 1.0},
                              {"mscale", s.mscale},
                              {"mscale_all_dim", s.mscale_all_dim}};
    else
      j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", s.theta}};
  } else {
    j["num_key_value_heads"] = s.nkv;
    j["head_dim"] = s.hd;
    j["use_qk_norm"] = s.qk_norm;
    j["partial_rotary_factor"] = s.partial;
    j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", s.theta}, {"partial_rotary_factor", s.partial}};
  }
  return j;
}

Weights random_weights(const Spec& s, uint32_t seed) {
  arch_check::RandomWeights r(seed);
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float scale, float offset = 0) {
    r.add(name, std::move(shape), scale, offset);
  };
  auto lin = [](int64_t in) { return 1.0f / std::sqrt(static_cast<float>(in)); };
  add("model.embed_tokens.weight", {s.V, s.H}, 1.0f);
  for (int64_t l = 0; l < s.L + s.mtp_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {s.H}, 0.1f, 1.0f);
    add(p + "post_attention_layernorm.weight", {s.H}, 0.1f, 1.0f);
    const std::string a = p + "self_attn.";
    if (s.latent()) {
      const int64_t qk = s.nope + s.rope;
      if (s.q_lora > 0) {
        add(a + "q_a_proj.weight", {s.q_lora, s.H}, lin(s.H));
        add(a + "q_a_layernorm.weight", {s.q_lora}, 0.1f, 1.0f);
        add(a + "q_b_proj.weight", {s.nh * qk, s.q_lora}, lin(s.q_lora));
      } else {
        add(a + "q_proj.weight", {s.nh * qk, s.H}, lin(s.H));
      }
      add(a + "kv_a_proj_with_mqa.weight", {s.kv_lora + s.rope, s.H}, lin(s.H));
      add(a + "kv_a_layernorm.weight", {s.kv_lora}, 0.1f, 1.0f);
      add(a + "kv_b_proj.weight", {s.nh * (s.nope + s.v), s.kv_lora}, lin(s.kv_lora));
      add(a + "o_proj.weight", {s.H, s.nh * s.v}, lin(s.nh * s.v));
      if (s.bias) {
        if (s.q_lora > 0) add(a + "q_a_proj.bias", {s.q_lora}, 0.2f);
        add(a + "kv_a_proj_with_mqa.bias", {s.kv_lora + s.rope}, 0.2f);
        add(a + "o_proj.bias", {s.H}, 0.2f);
      }
    } else {
      add(a + "q_proj.weight", {s.nh * s.hd, s.H}, lin(s.H));
      add(a + "k_proj.weight", {s.nkv * s.hd, s.H}, lin(s.H));
      add(a + "v_proj.weight", {s.nkv * s.hd, s.H}, lin(s.H));
      add(a + "o_proj.weight", {s.H, s.nh * s.hd}, lin(s.nh * s.hd));
      if (s.bias) {
        add(a + "q_proj.bias", {s.nh * s.hd}, 0.2f);
        add(a + "k_proj.bias", {s.nkv * s.hd}, 0.2f);
        add(a + "v_proj.bias", {s.nkv * s.hd}, 0.2f);
      }
      if (s.qk_norm) {
        add(a + "q_norm.weight", {s.hd}, 0.1f, 1.0f);
        add(a + "k_norm.weight", {s.hd}, 0.1f, 1.0f);
      }
    }
    auto mlp = [&](const std::string& m, int64_t inter) {
      add(m + "gate_proj.weight", {inter, s.H}, lin(s.H));
      add(m + "up_proj.weight", {inter, s.H}, lin(s.H));
      add(m + "down_proj.weight", {s.H, inter}, lin(inter));
    };
    if (l == 0) {
      mlp(p + "mlp.", s.dense_I);
      continue;
    }
    add(p + "mlp.gate.weight", {s.E, s.H}, 2.0f * lin(s.H));
    add(p + "mlp.gate.e_score_correction_bias", {s.E}, 0.1f);
    for (int64_t e = 0; e < s.E; ++e) mlp(p + "mlp.experts." + std::to_string(e) + ".", s.I);
    mlp(p + "mlp.shared_experts.", s.I * s.n_shared);
    if (l >= s.L) {  // the extra modules of a multi-token-prediction layer
      add(p + "eh_proj.weight", {s.H, 2 * s.H}, lin(2 * s.H));
      add(p + "enorm.weight", {s.H}, 0.1f, 1.0f);
    }
  }
  add("model.norm.weight", {s.H}, 0.1f, 1.0f);
  add("lm_head.weight", {s.V, s.H}, lin(s.H));
  return r.weights;
}

std::string write_checkpoint(const Spec& s, const Weights& w, const nlohmann::json& config) {
  return arch_check::write_float32_checkpoint(w, config, s.name);
}

std::string write_checkpoint(const Spec& s, const Weights& w) { return write_checkpoint(s, w, config_json(s)); }

// ---------------------------------------------------------------------------
// float64 reference: one sequence, full recompute, HF semantics.
// ---------------------------------------------------------------------------
using Vec = std::vector<double>;

struct Ref64 {
  const Spec& s;
  std::map<std::string, Vec> w;
  Vec inv_freq;
  double cos_sin_factor = 1.0, softmax_scale = 0;

  Ref64(const Spec& spec, const Weights& ws) : s(spec) {
    for (const auto& [n, sv] : ws) w[n] = Vec(sv.second.begin(), sv.second.end());
    const int64_t d = s.rope_dim();
    for (int64_t i = 0; i < d / 2; ++i) inv_freq.push_back(std::pow(s.theta, -2.0 * i / d));
    const int64_t qk = s.latent() ? s.nope + s.rope : s.hd;
    softmax_scale = 1.0 / std::sqrt(static_cast<double>(qk));
    if (s.latent() && s.yarn) {
      // YaRN: linear ramp between the dims turning beta_fast and beta_slow
      // times over the original context, floored / ceiled.
      auto dim_of = [&](double rot) {
        return d * std::log(s.yarn_original / (rot * 2 * std::numbers::pi)) / (2 * std::log(s.theta));
      };
      const double low = std::max(0.0, std::floor(dim_of(32))), high = std::min(double(d - 1), std::ceil(dim_of(1)));
      for (int64_t i = 0; i < d / 2; ++i) {
        const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
        inv_freq[i] = inv_freq[i] * (1 - ramp) + inv_freq[i] / s.yarn_factor * ramp;
      }
      auto mscale = [&](double m) { return 0.1 * m * std::log(s.yarn_factor) + 1.0; };
      cos_sin_factor = mscale(s.mscale) / mscale(s.mscale_all_dim);
      softmax_scale *= mscale(s.mscale_all_dim) * mscale(s.mscale_all_dim);
    }
  }
  const Vec& at(const std::string& n) const { return w.at(n); }

  // y[out] = W[out, in] x (+ b)
  Vec matvec(const std::string& name, const Vec& x, int64_t out, const std::string& bias = "") const {
    const Vec& W = at(name);
    const int64_t in = static_cast<int64_t>(x.size());
    Vec y(out, 0.0);
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) y[o] += W[o * in + i] * x[i];
    if (!bias.empty())
      for (int64_t o = 0; o < out; ++o) y[o] += at(bias)[o];
    return y;
  }
  Vec rms(const Vec& x, const std::string& g, double eps, size_t off, size_t n) const {
    double ss = 0;
    for (size_t i = 0; i < n; ++i) ss += x[off + i] * x[off + i];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
    Vec y(n);
    for (size_t i = 0; i < n; ++i) y[i] = at(g)[i] * x[off + i] * inv;
    return y;
  }
  Vec mlp(const std::string& m, const Vec& x, int64_t inter) const {
    Vec g = matvec(m + "gate_proj.weight", x, inter), u = matvec(m + "up_proj.weight", x, inter);
    for (int64_t i = 0; i < inter; ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
    return matvec(m + "down_proj.weight", g, s.H);
  }
  // RoPE on v[off .. off + d): rotate-half, after regrouping pairs when interleaved.
  void rope(Vec& v, size_t off, int64_t pos) const {
    const int64_t d = s.rope_dim(), half = d / 2;
    Vec x(v.begin() + off, v.begin() + off + d);
    if (s.latent() && s.interleave)
      for (int64_t i = 0; i < half; ++i) x[i] = v[off + 2 * i], x[i + half] = v[off + 2 * i + 1];
    for (int64_t i = 0; i < half; ++i) {
      const double a = pos * inv_freq[i], c = std::cos(a) * cos_sin_factor, sn = std::sin(a) * cos_sin_factor;
      v[off + i] = x[i] * c - x[i + half] * sn;
      v[off + i + half] = x[i + half] * c + x[i] * sn;
    }
  }

  // Per token: queries [nh][qk], keys [nh or nkv][qk], values [..][vd].
  struct Heads {
    std::vector<Vec> q, k, v;
  };
  Heads project(const std::string& a, const Vec& x, int64_t pos) const {
    Heads h;
    if (s.latent()) {
      const int64_t qk = s.nope + s.rope;
      Vec q = s.q_lora > 0
                  ? matvec(a + "q_b_proj.weight",
                           rms(matvec(a + "q_a_proj.weight", x, s.q_lora, s.bias ? a + "q_a_proj.bias" : ""),
                               a + "q_a_layernorm.weight", 1e-6, 0, s.q_lora),
                           s.nh * qk)
                  : matvec(a + "q_proj.weight", x, s.nh * qk);
      Vec kva = matvec(a + "kv_a_proj_with_mqa.weight", x, s.kv_lora + s.rope,
                       s.bias ? a + "kv_a_proj_with_mqa.bias" : "");
      const Vec latent = rms(kva, a + "kv_a_layernorm.weight", 1e-6, 0, s.kv_lora);
      const Vec kv = matvec(a + "kv_b_proj.weight", latent, s.nh * (s.nope + s.v));
      rope(kva, s.kv_lora, pos);
      for (int64_t hh = 0; hh < s.nh; ++hh) {
        Vec qh(q.begin() + hh * qk, q.begin() + (hh + 1) * qk);
        rope(qh, s.nope, pos);
        h.q.push_back(qh);
        Vec kh(kv.begin() + hh * (s.nope + s.v), kv.begin() + hh * (s.nope + s.v) + s.nope);
        kh.insert(kh.end(), kva.begin() + s.kv_lora, kva.end());
        h.k.push_back(kh);
        h.v.push_back(Vec(kv.begin() + hh * (s.nope + s.v) + s.nope, kv.begin() + (hh + 1) * (s.nope + s.v)));
      }
      return h;
    }
    const Vec q = matvec(a + "q_proj.weight", x, s.nh * s.hd, s.bias ? a + "q_proj.bias" : "");
    const Vec k = matvec(a + "k_proj.weight", x, s.nkv * s.hd, s.bias ? a + "k_proj.bias" : "");
    const Vec v = matvec(a + "v_proj.weight", x, s.nkv * s.hd, s.bias ? a + "v_proj.bias" : "");
    auto head = [&](const Vec& all, int64_t hh, const std::string& norm) {
      Vec r = s.qk_norm ? rms(all, norm, s.eps, hh * s.hd, s.hd)
                        : Vec(all.begin() + hh * s.hd, all.begin() + (hh + 1) * s.hd);
      rope(r, 0, pos);
      return r;
    };
    for (int64_t hh = 0; hh < s.nh; ++hh) h.q.push_back(head(q, hh, a + "q_norm.weight"));
    for (int64_t hh = 0; hh < s.nkv; ++hh) {
      h.k.push_back(head(k, hh, a + "k_norm.weight"));
      h.v.push_back(Vec(v.begin() + hh * s.hd, v.begin() + (hh + 1) * s.hd));
    }
    return h;
  }

  Vec moe(const std::string& m, const Vec& x) const {
    const Vec logit = matvec(m + "gate.weight", x, s.E);
    Vec sig(s.E), choice(s.E);
    for (int64_t e = 0; e < s.E; ++e) {
      sig[e] = 1.0 / (1.0 + std::exp(-logit[e]));
      choice[e] = sig[e] + at(m + "gate.e_score_correction_bias")[e];
    }
    const int64_t per = s.E / s.groups;
    std::vector<std::pair<double, int64_t>> group_score;
    for (int64_t g = 0; g < s.groups; ++g) {
      Vec c(choice.begin() + g * per, choice.begin() + (g + 1) * per);
      std::sort(c.rbegin(), c.rend());
      group_score.push_back({-(c[0] + c[1]), g});
    }
    std::sort(group_score.begin(), group_score.end());
    for (int64_t j = s.topk_groups; j < s.groups; ++j)
      for (int64_t e = group_score[j].second * per; e < (group_score[j].second + 1) * per; ++e) choice[e] = 0.0;
    std::vector<int64_t> order(s.E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return choice[a] > choice[b]; });
    double sum = 0;
    for (int64_t j = 0; j < s.K; ++j) sum += sig[order[j]];
    Vec out = mlp(m + "shared_experts.", x, s.I * s.n_shared);
    for (int64_t j = 0; j < s.K; ++j) {
      const double wj = (s.renorm ? sig[order[j]] / sum : sig[order[j]]) * s.scaling;
      const Vec y = mlp(m + "experts." + std::to_string(order[j]) + ".", x, s.I);
      for (int64_t i = 0; i < s.H; ++i) out[i] += wj * y[i];
    }
    return out;
  }

  // logits [T][V]
  std::vector<Vec> run(const std::vector<int32_t>& tokens) const {
    const int64_t T = static_cast<int64_t>(tokens.size());
    std::vector<Vec> h(T);
    for (int64_t t = 0; t < T; ++t)
      h[t] = Vec(at("model.embed_tokens.weight").begin() + tokens[t] * s.H,
                 at("model.embed_tokens.weight").begin() + (tokens[t] + 1) * s.H);
    for (int64_t l = 0; l < s.L; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".", a = p + "self_attn.";
      std::vector<Heads> heads;
      for (int64_t t = 0; t < T; ++t)
        heads.push_back(project(a, rms(h[t], p + "input_layernorm.weight", s.eps, 0, s.H), t));
      const int64_t group = s.latent() ? 1 : s.nh / s.nkv;
      for (int64_t t = 0; t < T; ++t) {
        Vec ctx;
        for (int64_t hh = 0; hh < s.nh; ++hh) {
          const int64_t g = hh / group;
          Vec sc(t + 1);
          for (int64_t j = 0; j <= t; ++j)
            sc[j] = std::inner_product(heads[t].q[hh].begin(), heads[t].q[hh].end(), heads[j].k[g].begin(), 0.0) *
                    softmax_scale;
          const double mx = *std::max_element(sc.begin(), sc.end());
          double z = 0;
          for (auto& e : sc) z += (e = std::exp(e - mx));
          Vec o(heads[0].v[g].size(), 0.0);
          for (int64_t j = 0; j <= t; ++j)
            for (size_t i = 0; i < o.size(); ++i) o[i] += sc[j] / z * heads[j].v[g][i];
          ctx.insert(ctx.end(), o.begin(), o.end());
        }
        const bool o_bias = s.latent() && s.bias;
        const Vec o = matvec(a + "o_proj.weight", ctx, s.H, o_bias ? a + "o_proj.bias" : "");
        for (int64_t i = 0; i < s.H; ++i) h[t][i] += o[i];
      }
      for (int64_t t = 0; t < T; ++t) {
        const Vec x = rms(h[t], p + "post_attention_layernorm.weight", s.eps, 0, s.H);
        const Vec out = l == 0 ? mlp(p + "mlp.", x, s.dense_I) : moe(p + "mlp.", x);
        for (int64_t i = 0; i < s.H; ++i) h[t][i] += out[i];
      }
    }
    std::vector<Vec> logits(T);
    for (int64_t t = 0; t < T; ++t)
      logits[t] = matvec("lm_head.weight", rms(h[t], "model.norm.weight", s.eps, 0, s.H), s.V);
    return logits;
  }
};

class SigmoidRouterArchTest : public ::testing::TestWithParam<Spec> {};

TEST_P(SigmoidRouterArchTest, MatchesFloat64Reference) {
  const Spec s = GetParam();
  const Weights w = random_weights(s, 7);
  auto model = Model::open(write_checkpoint(s, w));
  const Ref64 ref(s, w);
  arch_check::expect_logits_match_float64(*model, s.V, [&](const std::vector<int32_t>& t) { return ref.run(t); },
                                          s.name);
}

// Decode steps and a chunk on a filled cache attend in the latent space
// (deepseek_v3) or to the cached keys (glm4_moe); one prefill attends to
// expanded keys.
TEST_P(SigmoidRouterArchTest, DecodeMatchesPrefillAndThreadsAgree) {
  const Spec s = GetParam();
  auto model = Model::open(write_checkpoint(s, random_weights(s, 3)));
  arch_check::expect_decode_matches_prefill_and_threads_agree(*model, s.V, 17, 9, 4, s.name);
}

INSTANTIATE_TEST_SUITE_P(Archs, SigmoidRouterArchTest, ::testing::Values(deepseek(), deepseek_plain(), glm4()),
                         [](const auto& info) { return info.param.name; });

// Which attention path a latent call takes, by its cost.
TEST(LatentAttention, ExpandsKeysForPrefillAndAttendsInLatentSpaceForDecode) {
  auto c = parse_config(config_json(deepseek()), "cfg.json");
  EXPECT_TRUE(expand_latent_keys(c, 21, 21));   // a prefill from position 0
  EXPECT_FALSE(expand_latent_keys(c, 1, 2));    // one decode step
  EXPECT_FALSE(expand_latent_keys(c, 4, 13));   // a short chunk on a longer cache
  // DeepSeek-V3's own widths on 4096 positions: expanding pays from 164 new
  // tokens on (131072 x 4096 / (768 x 4096 + 131072) = 163.8).
  c.kv_lora_rank = 512;
  c.qk_nope_head_dim = 128;
  c.v_head_dim = 128;
  EXPECT_FALSE(expand_latent_keys(c, 163, 4096));
  EXPECT_TRUE(expand_latent_keys(c, 164, 4096));
}

// Multi-token-prediction layers stored after the last are allowed only as
// many as num_nextn_predict_layers says, and never change the output.
TEST(MtpLayers, SkippedWhenDeclaredRefusedOtherwise) {
  const Spec s = deepseek();
  Weights w = random_weights(s, 9);
  auto with_mtp = Model::open(write_checkpoint(s, w));
  const std::vector<int32_t> tokens = arch_check::random_tokens(6, s.V, 1);
  KvCache c1 = with_mtp->new_cache(1, 6);
  const auto a = with_mtp->forward(tokens, 1, 6, c1);

  nlohmann::json cfg = config_json(s);
  cfg["num_nextn_predict_layers"] = 0;
  try {
    Model::open(write_checkpoint(s, w, cfg));
    FAIL() << "expected an error naming the extra layer";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("belongs to layer 3"), std::string::npos) << e.what();
  }

  for (auto it = w.begin(); it != w.end();)
    it = it->first.rfind("model.layers.3.", 0) == 0 ? w.erase(it) : std::next(it);
  auto without = Model::open(write_checkpoint(s, w, cfg));
  KvCache c2 = without->new_cache(1, 6);
  EXPECT_EQ(without->forward(tokens, 1, 6, c2), a);
}

// A tensor the config says does not exist is an error naming the field and
// the tensor: never silently ignored (q/k norms, shared experts) nor applied
// against the config (biases).
TEST(ConfigAgainstTensors, ATensorTheConfigRulesOutIsAnErrorNamingFieldAndTensor) {
  const Spec s = glm4();
  const Weights w = random_weights(s, 5);
  struct Case {
    const char* field;
    nlohmann::json value;
    std::string tensor;
  };
  const Case cases[] = {
      {"use_qk_norm", false, "model.layers.0.self_attn.q_norm.weight"},
      {"attention_bias", false, "model.layers.0.self_attn.q_proj.bias"},
      {"n_shared_experts", 0, "model.layers.1.mlp.shared_experts.gate_proj.weight"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.field);
    nlohmann::json cfg = config_json(s);
    cfg[k.field] = k.value;
    try {
      Model::open(write_checkpoint(s, w, cfg));
      ADD_FAILURE() << "expected an error naming " << k.field;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
      const std::string msg = e.what();
      EXPECT_NE(msg.find("tensor '" + k.tensor + "' is present, but config.json field '" + k.field + "'"),
                std::string::npos)
          << msg;
    }
  }
  // A tensor no config of the architecture has: named with the model_type.
  Weights extra = w;
  extra["model.layers.0.self_attn.sinks"] = {{s.nh}, std::vector<float>(static_cast<size_t>(s.nh), 0.0f)};
  try {
    Model::open(write_checkpoint(s, extra));
    ADD_FAILURE() << "expected an error naming the sinks";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'model.layers.0.self_attn.sinks' is present, but model_type "
                                         "'glm4_moe' has no such tensor"),
              std::string::npos)
        << e.what();
  }
  // The same checkpoint with its own config opens.
  EXPECT_NO_THROW(Model::open(write_checkpoint(s, w)));
}

}  // namespace
}  // namespace eq::model
