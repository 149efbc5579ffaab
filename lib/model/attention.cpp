#include "model/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/thread_pool.h"
#include "model/attention_core.h"
#include "model/latent_attention.h"
#include "model/ops.h"
#include "model/projection.h"

namespace eq::model {
namespace {

void norm_qk(const ModelConfig& c, const AttentionWeights& w, float* q, float* k, int64_t n) {
  const int64_t qd = c.num_heads * c.head_dim, kvd = c.num_kv_heads * c.head_dim;
  if (!w.q_norm) return;
  const bool whole = c.qk_norm == QkNorm::kWhole;
  default_pool().parallel_for(static_cast<size_t>(n), 64, [&](size_t r0, size_t r1) {
    const int64_t rows = static_cast<int64_t>(r1 - r0);
    float* qr = q + static_cast<int64_t>(r0) * qd;
    float* kr = k + static_cast<int64_t>(r0) * kvd;
    if (whole) {  // one RMSNorm over the whole projection
      rms_norm_rows(qr, rows, qd, w.q_norm->data.data(), c.rms_norm_eps, qr);
      rms_norm_rows(kr, rows, kvd, w.k_norm->data.data(), c.rms_norm_eps, kr);
    } else {  // per head
      rms_norm_rows(qr, rows * c.num_heads, c.head_dim, w.q_norm->data.data(), c.rms_norm_eps, qr);
      rms_norm_rows(kr, rows * c.num_kv_heads, c.head_dim, w.k_norm->data.data(), c.rms_norm_eps, kr);
    }
  });
}

void grouped_attention(const ModelConfig& c, const AttentionWeights& w, const RopeTable& rope, int64_t layer,
                       const float* x, int64_t batch, int64_t seq_len, KvCache& cache, float* out) {
  const int64_t H = c.hidden_size, hd = c.head_dim, nh = c.num_heads, nkv = c.num_kv_heads;
  const int64_t qd = nh * hd, kvd = nkv * hd, n = batch * seq_len, start = cache.length();

  FloatBuffer q(n * qd), k(n * kvd), v(n * kvd), gate, qg;
  if (c.attention_output_gate) qg = FloatBuffer(n * 2 * qd);  // per head [query | gate]
  const Projection qkv[] = {
      {&w.q, w.q_op, c.attention_output_gate ? 2 * qd : qd, &w.q_bias, c.attention_output_gate ? qg.data() : q.data()},
      {&w.k, w.k_op, kvd, &w.k_bias, k.data()},
      {&w.v, w.v_op, kvd, &w.v_bias, v.data()}};
  project_shared(x, n, H, qkv);
  if (c.attention_output_gate) {
    gate = FloatBuffer(n * qd);
    for (int64_t r = 0; r < n * nh; ++r) {
      std::memcpy(q.data() + r * hd, qg.data() + r * 2 * hd, hd * sizeof(float));
      std::memcpy(gate.data() + r * hd, qg.data() + r * 2 * hd + hd, hd * sizeof(float));
    }
  }
  norm_qk(c, w, q.data(), k.data(), n);
  if (c.clip_qkv > 0) {  // clamped after the norms, as the reference does
    const float lim = static_cast<float>(c.clip_qkv);
    for (auto* buf : {&q, &k, &v})
      for (float& f : *buf) f = std::clamp(f, -lim, lim);
  }

  // RoPE (on the first rope_dim dims of each head), then append keys/values to the cache.
  default_pool().parallel_for(static_cast<size_t>(n), 64, [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r) {
      const int64_t b = static_cast<int64_t>(r) / seq_len, pos = start + static_cast<int64_t>(r) % seq_len;
      rope.apply(q.data() + r * qd, nh, hd, pos);
      rope.apply(k.data() + r * kvd, nkv, hd, pos);
      std::memcpy(cache.keys(layer, b, pos), k.data() + r * kvd, kvd * sizeof(float));
      std::memcpy(cache.values(layer, b, pos), v.data() + r * kvd, kvd * sizeof(float));
    }
  });

  // One task per (sequence, head): its query group's keys and values in the cache.
  FloatBuffer ctx(n * qd);
  const float scale = attention_scale(c);
  const int64_t group = nh / nkv, window = c.layer_attention_window(layer);
  default_pool().run(static_cast<size_t>(batch * nh), [&](size_t task) {
    const int64_t b = static_cast<int64_t>(task) / nh, h = static_cast<int64_t>(task) % nh, g = h / group;
    const QkPart qk{q.data() + b * seq_len * qd + h * hd, qd, cache.keys(layer, b, 0) + g * hd, kvd, hd};
    FloatBuffer scores;
    attend_causal(seq_len, start, &qk, 1, cache.values(layer, b, 0) + g * hd, kvd, hd, scale,
                  ctx.data() + b * seq_len * qd + h * hd, qd, scores, window,
                  w.sinks ? w.sinks->data.data() + h : nullptr);
  });

  if (c.attention_output_gate)
    for (int64_t i = 0; i < n * qd; ++i) ctx[i] *= 1.0f / (1.0f + std::exp(-gate[i]));
  project(ctx.data(), n, qd, w.o, w.o_op, H, w.o_bias, out);
}

}  // namespace

float attention_scale(const ModelConfig& c) {
  return static_cast<float>(c.attention_scale_factor / std::sqrt(static_cast<double>(c.head_dim)));
}

void attention_forward(const ModelConfig& c, const AttentionWeights& w, const RopeTable& rope, int64_t layer,
                       const float* x, int64_t batch, int64_t seq_len, KvCache& cache, float* out) {
  if (c.attention == AttentionKind::kLatent)
    latent_attention(c, w, rope, layer, x, batch, seq_len, cache, out);
  else
    grouped_attention(c, w, rope, layer, x, batch, seq_len, cache, out);
}

}  // namespace eq::model
