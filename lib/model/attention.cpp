#include "model/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/thread_pool.h"
#include "model/kernels/float_kernels.h"
#include "model/ops.h"

namespace eq::model {
namespace {

// Query rows per block: a block needs keys up to its last row only, which
// skips most of the masked upper triangle while keeping matmuls large.
constexpr int64_t kQueryBlock = 64;

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

// y = x · Wᵀ + bias through the float32 weights or the LinearOp.
void project(const float* x, int64_t n, int64_t in, const Tensor32Ptr& w, const LinearOp* op, int64_t out,
             const Tensor32Ptr& bias, float* y) {
  if (!op) {
    linear(x, n, in, w->data.data(), out, bias ? bias->data.data() : nullptr, y);
    return;
  }
  op->apply(x, n, y);
  if (!bias) return;
  const float* b = bias->data.data();
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < out; ++i) y[r * out + i] += b[i];
}

}  // namespace

void attention_forward(const ModelConfig& c, const AttentionWeights& w, const RopeTable& rope, int64_t layer,
                       const float* x, int64_t batch, int64_t seq_len, KvCache& cache, float* out) {
  const int64_t H = c.hidden_size, hd = c.head_dim, nh = c.num_heads, nkv = c.num_kv_heads;
  const int64_t qd = nh * hd, kvd = nkv * hd, n = batch * seq_len, start = cache.length();

  FloatBuffer q(n * qd), k(n * kvd), v(n * kvd);
  project(x, n, H, w.q, w.q_op, qd, w.q_bias, q.data());
  project(x, n, H, w.k, w.k_op, kvd, w.k_bias, k.data());
  project(x, n, H, w.v, w.v_op, kvd, w.v_bias, v.data());
  norm_qk(c, w, q.data(), k.data(), n);
  if (c.clip_qkv > 0) {  // clamped after the norms, as the reference does
    const float lim = static_cast<float>(c.clip_qkv);
    for (auto* buf : {&q, &k, &v})
      for (float& f : *buf) f = std::clamp(f, -lim, lim);
  }

  // RoPE, then append keys/values to the cache.
  default_pool().parallel_for(static_cast<size_t>(n), 64, [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r) {
      const int64_t b = static_cast<int64_t>(r) / seq_len, pos = start + static_cast<int64_t>(r) % seq_len;
      rope.apply(q.data() + r * qd, nh, pos);
      rope.apply(k.data() + r * kvd, nkv, pos);
      std::memcpy(cache.keys(layer, b, pos), k.data() + r * kvd, kvd * sizeof(float));
      std::memcpy(cache.values(layer, b, pos), v.data() + r * kvd, kvd * sizeof(float));
    }
  });

  // One task per (sequence, head): scores = q kᵀ / sqrt(hd), causal softmax, · v.
  FloatBuffer ctx(n * qd);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  const int64_t group = nh / nkv;
  default_pool().run(static_cast<size_t>(batch * nh), [&](size_t task) {
    const int64_t b = static_cast<int64_t>(task) / nh, h = static_cast<int64_t>(task) % nh, g = h / group;
    const float* kb = cache.keys(layer, b, 0) + g * hd;
    const float* vb = cache.values(layer, b, 0) + g * hd;
    FloatBuffer scores;
    for (int64_t t0 = 0; t0 < seq_len; t0 += kQueryBlock) {
      const int64_t t1 = std::min(seq_len, t0 + kQueryBlock), rows = t1 - t0;
      const int64_t keys = start + t1;  // keys visible to the block's last row
      scores.resize(rows * keys);
      const float* qb = q.data() + (b * seq_len + t0) * qd + h * hd;
      kernels::gemm_nt(rows, keys, hd, qb, qd, kb, kvd, scores.data(), keys);
      for (int64_t r = 0; r < rows; ++r) {
        float* s = scores.data() + r * keys;
        const int64_t visible = start + t0 + r + 1;
        for (int64_t j = 0; j < visible; ++j) s[j] *= scale;
        kernels::softmax_row(s, visible);
        std::fill(s + visible, s + keys, 0.0f);
      }
      kernels::gemm_nn(rows, hd, keys, scores.data(), keys, vb, kvd, ctx.data() + (b * seq_len + t0) * qd + h * hd,
                       qd);
    }
  });

  project(ctx.data(), n, qd, w.o, w.o_op, H, w.o_bias, out);
}

}  // namespace eq::model
