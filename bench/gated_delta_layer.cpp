// Cost of one gated-delta-net (linear-attention) layer at a real shape, float32
// weights: the default is Qwen3-Next-80B-A3B's (hidden 2048; 16 key heads and
// 32 value heads of 128; conv kernel 4; fused in_proj_qkvz / in_proj_ba).
// Prefill of --prefill tokens in one call (the chunked form) against the same
// tokens through the token-by-token recurrence (the form decode uses), and
// decode steps of one token after the prefill. For each: median ms of --runs
// timed runs after one warm-up, and the share of the time spent outside the
// projections (the rule itself, conv, norms), measured by timing the rule
// alone on the same inputs.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "model/config.h"
#include "model/kv_cache.h"
#include "model/linear_attention.h"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

eq::model::Tensor32Ptr random_tensor(std::vector<int64_t> shape, float scale, std::mt19937& rng) {
  auto t = std::make_shared<eq::model::Tensor32>();
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  t->shape = std::move(shape);
  t->data.resize(n);
  std::normal_distribution<float> nd(0.0f, scale);
  for (int64_t i = 0; i < n; ++i) t->data[i] = nd(rng);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench/gated_delta_layer: one linear-attention layer's prefill and decode cost"};
  int64_t hidden = 2048, key_heads = 16, value_heads = 32, head_dim = 128, conv = 4, prefill = 1024, decode = 64;
  int runs = 5, threads = 0;
  bool json_out = false, skip_stepwise = false;
  app.add_option("--hidden", hidden, "Hidden size (default 2048)");
  app.add_option("--key-heads", key_heads, "Key heads (default 16)");
  app.add_option("--value-heads", value_heads, "Value heads (default 32)");
  app.add_option("--head-dim", head_dim, "Key and value head dim (default 128)");
  app.add_option("--conv", conv, "Conv kernel (default 4)");
  app.add_option("--prefill", prefill, "Prefill tokens (default 1024)");
  app.add_option("--decode", decode, "Decode steps after the prefill (default 64)");
  app.add_option("--runs", runs, "Timed runs (median reported; default 5)");
  app.add_option("--threads", threads, "Worker threads (default: all cores)");
  app.add_flag("--json", json_out, "Print the figures as JSON");
  app.add_flag("--skip-stepwise", skip_stepwise, "Leave out the one-token-at-a-time prefill (for profiling the rest)");
  CLI11_PARSE(app, argc, argv);
  if (threads > 0) eq::set_num_threads(threads);

  using namespace eq::model;
  nlohmann::json cj = {{"model_type", "qwen3_next"},
                       {"vocab_size", 256},
                       {"hidden_size", hidden},
                       {"num_hidden_layers", 4},
                       {"num_attention_heads", 16},
                       {"num_key_value_heads", 2},
                       {"head_dim", 256},
                       {"num_experts", 8},
                       {"num_experts_per_tok", 2},
                       {"moe_intermediate_size", 64},
                       {"shared_expert_intermediate_size", 64},
                       {"rms_norm_eps", 1e-6},
                       {"rope_theta", 1e7},
                       {"partial_rotary_factor", 0.25},
                       {"linear_num_key_heads", key_heads},
                       {"linear_num_value_heads", value_heads},
                       {"linear_key_head_dim", head_dim},
                       {"linear_value_head_dim", head_dim},
                       {"linear_conv_kernel_dim", conv}};
  try {
    const ModelConfig c = parse_config(cj, "bench config");
    const LinearAttentionConfig& d = c.linear;
    std::mt19937 rng(1);
    const float ws = 1.0f / std::sqrt(static_cast<float>(hidden));
    LinearAttentionWeights w;
    w.qkvz = random_tensor({2 * d.key_dim() + 2 * d.value_dim(), hidden}, ws, rng);
    w.ba = random_tensor({2 * value_heads, hidden}, ws, rng);
    w.conv = random_tensor({d.conv_dim(), 1, conv}, 0.3f, rng);
    w.dt_bias = random_tensor({value_heads}, 0.5f, rng);
    w.a_log = random_tensor({value_heads}, 0.5f, rng);
    w.norm = random_tensor({head_dim}, 0.1f, rng);
    w.out = random_tensor({hidden, d.value_dim()}, 1.0f / std::sqrt(static_cast<float>(d.value_dim())), rng);
    const int64_t layer = 0;  // a linear layer (every 4th is full attention)
    std::vector<float> x(static_cast<size_t>((prefill + decode) * hidden)), out(x.size());
    std::normal_distribution<float> n01(0.0f, 1.0f);
    for (float& v : x) v = n01(rng);
    const uint64_t weight_bytes =
        4 * (w.qkvz->data.size() + w.ba->data.size() + w.out->data.size() + w.conv->data.size());

    std::vector<double> chunked_ms, stepwise_ms, decode_ms;
    for (int r = 0; r <= runs; ++r) {
      KvCache a(c, 1, prefill + decode);
      auto t = Clock::now();
      linear_attention_forward(c, w, layer, x.data(), 1, prefill, a, out.data());
      const double chunked = ms_since(t);
      a.advance(prefill);
      t = Clock::now();
      for (int64_t i = 0; i < decode; ++i) {
        linear_attention_forward(c, w, layer, x.data() + (prefill + i) * hidden, 1, 1, a, out.data());
        a.advance(1);
      }
      const double dec = ms_since(t) / static_cast<double>(decode);
      // The same prefill one token at a time (the recurrence, as decode runs it).
      KvCache b(c, 1, prefill + decode);
      t = Clock::now();
      for (int64_t i = 0; i < (skip_stepwise ? 0 : prefill); ++i) {
        linear_attention_forward(c, w, layer, x.data() + i * hidden, 1, 1, b, out.data());
        b.advance(1);
      }
      const double stepwise = ms_since(t);
      if (r == 0) continue;
      chunked_ms.push_back(chunked);
      stepwise_ms.push_back(stepwise);
      decode_ms.push_back(dec);
    }

    // The rule alone over the prefill, each form, all value heads (normalized
    // random q/k like the layer's).
    const int64_t dk = head_dim, dv = head_dim, T = prefill;
    std::vector<float> q(T * dk), k(T * dk), v(T * dv), g(T), beta(T), o(T * dv);
    for (int64_t t = 0; t < T; ++t) {
      double sq = 0, sk = 0;
      for (int64_t i = 0; i < dk; ++i) {
        q[t * dk + i] = n01(rng);
        k[t * dk + i] = n01(rng);
        sq += q[t * dk + i] * q[t * dk + i];
        sk += k[t * dk + i] * k[t * dk + i];
      }
      for (int64_t i = 0; i < dk; ++i) {
        q[t * dk + i] = static_cast<float>(q[t * dk + i] / std::sqrt(sq * dk));
        k[t * dk + i] = static_cast<float>(k[t * dk + i] / std::sqrt(sk));
      }
      for (int64_t i = 0; i < dv; ++i) v[t * dv + i] = n01(rng);
      g[t] = -0.05f;
      beta[t] = 0.5f;
    }
    std::vector<double> rule_chunked_ms, rule_step_ms;
    std::vector<float> state(dk * dv);
    for (int r = 0; r <= runs; ++r) {
      auto t = Clock::now();
      for (int64_t h = 0; h < value_heads; ++h) {
        std::fill(state.begin(), state.end(), 0.0f);
        gated_delta_rule_chunked(q.data(), k.data(), dk, v.data(), dv, g.data(), beta.data(), 1, T, dk, dv,
                                 state.data(), o.data(), dv);
      }
      const double chunked = ms_since(t);
      t = Clock::now();
      for (int64_t h = 0; h < value_heads; ++h) {
        std::fill(state.begin(), state.end(), 0.0f);
        gated_delta_rule(q.data(), k.data(), dk, v.data(), dv, g.data(), beta.data(), 1, T, dk, dv, state.data(),
                         o.data(), dv);
      }
      const double step = ms_since(t);
      if (r == 0) continue;
      rule_chunked_ms.push_back(chunked);
      rule_step_ms.push_back(step);
    }

    const double pc = median(chunked_ms), ps = median(stepwise_ms), dm = median(decode_ms);
    const double rc = median(rule_chunked_ms), rs = median(rule_step_ms);
    nlohmann::ordered_json j;
    j["cpu"] = std::string(eq::cpu_model_name());
    j["isa"] = std::string(eq::isa_name(eq::active_isa()));
    j["threads"] = eq::default_pool().size();
    j["shape"] = {{"hidden", hidden}, {"key_heads", key_heads}, {"value_heads", value_heads},
                  {"head_dim", head_dim}, {"conv", conv}};
    j["weight_bytes"] = weight_bytes;
    j["prefill_tokens"] = prefill;
    j["prefill_chunked_ms"] = pc;
    j["prefill_chunked_tokens_per_s"] = 1e3 * static_cast<double>(prefill) / pc;
    j["prefill_stepwise_ms"] = ps;
    j["prefill_stepwise_tokens_per_s"] = 1e3 * static_cast<double>(prefill) / ps;
    j["decode_ms_per_token"] = dm;
    j["decode_weight_gb_per_s"] = static_cast<double>(weight_bytes) / (dm * 1e6);
    j["rule_single_thread_chunked_ms"] = rc;
    j["rule_single_thread_recurrent_ms"] = rs;
    j["runs"] = runs;
    if (json_out) {
      std::printf("%s\n", j.dump(2).c_str());
      return 0;
    }
    std::printf("gated delta layer: hidden %lld, %lld key / %lld value heads x %lld, conv %lld; %d threads, %s, %s\n",
                (long long)hidden, (long long)key_heads, (long long)value_heads, (long long)head_dim, (long long)conv,
                eq::default_pool().size(), j["isa"].get<std::string>().c_str(), j["cpu"].get<std::string>().c_str());
    std::printf("prefill %lld tokens, chunked form     %9.2f ms  (%8.0f tokens/s)\n", (long long)prefill, pc,
                j["prefill_chunked_tokens_per_s"].get<double>());
    std::printf("prefill %lld tokens, one at a time    %9.2f ms  (%8.0f tokens/s; chunked %.2fx faster)\n",
                (long long)prefill, ps, j["prefill_stepwise_tokens_per_s"].get<double>(), ps / pc);
    std::printf("decode, per token                  %9.3f ms  (weights %.1f MiB: %.1f GB/s)\n", dm,
                static_cast<double>(weight_bytes) / (1 << 20), j["decode_weight_gb_per_s"].get<double>());
    std::printf("rule alone, %lld heads x %lld tokens, one thread: chunked %.2f ms, recurrence %.2f ms (%.2fx)\n",
                (long long)value_heads, (long long)T, rc, rs, rs / rc);
    std::printf("medians of %d runs after one warm-up\n", runs);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench/gated_delta_layer: %s\n", e.what());
    return 1;
  }
  return 0;
}
