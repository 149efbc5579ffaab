#include "model/latent_attention.h"

#include <cstring>

#include "core/thread_pool.h"
#include "model/attention.h"
#include "model/attention_core.h"
#include "model/kernels/float_kernels.h"
#include "model/ops.h"
#include "model/projection.h"

namespace eq::model {
namespace {

// Rows of the latent expansion per task.
constexpr size_t kExpandRows = 32;

// Per head, the rows of kv_b_proj [nh * (nope + v), kv_lora]: first the
// head's nope key rows, then its value rows.
struct LatentDims {
  int64_t nh, nope, rope, v, lora, hd;
  int64_t kv_row() const { return lora + rope; }  // cache row
  int64_t kv_b_rows() const { return nope + v; }  // kv_b_proj rows of one head
};

// The queries [n, nh * hd], each head [nope | rope], and the latent rows
// kv_a [n, kv_row] of x: q (or q_a) and kv_a are products of one input and
// share their round trip where the ops run elsewhere (project_shared).
FloatBuffer latent_queries(const ModelConfig& c, const LatentDims& d, const AttentionWeights& w, const float* x,
                           int64_t n, float* kv_a) {
  const int64_t H = c.hidden_size, qd = c.num_heads * c.head_dim;
  FloatBuffer q(n * qd);
  if (c.q_lora_rank == 0) {
    const Projection ps[] = {{&w.q, w.q_op, qd, nullptr, q.data()},
                             {&w.kv_a, w.kv_a_op, d.kv_row(), &w.kv_a_bias, kv_a}};
    project_shared(x, n, H, ps);
    return q;
  }
  const int64_t r = c.q_lora_rank;
  FloatBuffer qa(n * r);
  const Projection ps[] = {{&w.q_a, w.q_a_op, r, &w.q_a_bias, qa.data()},
                           {&w.kv_a, w.kv_a_op, d.kv_row(), &w.kv_a_bias, kv_a}};
  project_shared(x, n, H, ps);
  default_pool().parallel_for(static_cast<size_t>(n), 64, [&](size_t r0, size_t r1) {
    rms_norm_rows(qa.data() + r0 * r, static_cast<int64_t>(r1 - r0), r, w.q_a_norm->data.data(), c.latent_norm_eps,
                  qa.data() + r0 * r);
  });
  project(qa.data(), n, r, w.q_b, w.q_b_op, qd, nullptr, q.data());
  return q;
}

// Every head attends to keys [k_nope | k_rope] and values expanded from the
// cached latents of positions 0 .. context-1. ctx: [n, nh * v].
void attend_expanded(const LatentDims& d, const ModelConfig& c, const float* kv_b, int64_t layer, const float* q,
                     int64_t batch, int64_t seq_len, const KvCache& cache, float* ctx) {
  const int64_t start = cache.length(), context = start + seq_len, width = d.nh * d.kv_b_rows();
  FloatBuffer kv(batch * context * width);  // per position: every head's [k_nope | v]
  for (int64_t b = 0; b < batch; ++b)
    default_pool().parallel_for(static_cast<size_t>(context), kExpandRows, [&](size_t r0, size_t r1) {
      kernels::gemm_nt(static_cast<int64_t>(r1 - r0), width, d.lora, cache.keys(layer, b, static_cast<int64_t>(r0)),
                       d.kv_row(), kv_b, d.lora, kv.data() + (b * context + static_cast<int64_t>(r0)) * width, width);
    });
  const float scale = attention_scale(c);
  const int64_t qd = d.nh * d.hd, od = d.nh * d.v;
  default_pool().run(static_cast<size_t>(batch * d.nh), [&](size_t task) {
    const int64_t b = static_cast<int64_t>(task) / d.nh, h = static_cast<int64_t>(task) % d.nh;
    const float* qh = q + b * seq_len * qd + h * d.hd;
    const float* kvh = kv.data() + b * context * width + h * d.kv_b_rows();
    const float* cached = cache.keys(layer, b, 0);
    const QkPart parts[2] = {{qh, qd, kvh, width, d.nope}, {qh + d.nope, qd, cached + d.lora, d.kv_row(), d.rope}};
    FloatBuffer scores;
    attend_causal(seq_len, start, parts, 2, kvh + d.nope, width, d.v, scale, ctx + b * seq_len * od + h * d.v, od,
                  scores);
  });
}

// The same in the latent space: every head's query becomes
// [W_kᵀ q_nope | q_rope] against the cached rows [c | k_rope], its context
// Σ p_j c_j, and its value W_v of that context.
void attend_latent(const LatentDims& d, const ModelConfig& c, const float* kv_b, int64_t layer, const float* q,
                   int64_t batch, int64_t seq_len, const KvCache& cache, float* ctx) {
  const int64_t n = batch * seq_len, start = cache.length(), qd = d.nh * d.hd, od = d.nh * d.v;
  const int64_t aw = d.nh * d.kv_row(), lw = d.nh * d.lora;  // absorbed query and latent context widths
  FloatBuffer qa(n * aw), lat(n * lw);
  default_pool().run(static_cast<size_t>(d.nh), [&](size_t task) {
    const int64_t h = static_cast<int64_t>(task);
    kernels::gemm_nn(n, d.lora, d.nope, q + h * d.hd, qd, kv_b + h * d.kv_b_rows() * d.lora, d.lora,
                     qa.data() + h * d.kv_row(), aw);
    for (int64_t t = 0; t < n; ++t)
      std::memcpy(qa.data() + t * aw + h * d.kv_row() + d.lora, q + t * qd + h * d.hd + d.nope, d.rope * sizeof(float));
  });
  const float scale = attention_scale(c);
  default_pool().run(static_cast<size_t>(batch * d.nh), [&](size_t task) {
    const int64_t b = static_cast<int64_t>(task) / d.nh, h = static_cast<int64_t>(task) % d.nh;
    const float* cached = cache.keys(layer, b, 0);
    const QkPart part{qa.data() + b * seq_len * aw + h * d.kv_row(), aw, cached, d.kv_row(), d.kv_row()};
    FloatBuffer scores;
    attend_causal(seq_len, start, &part, 1, cached, d.kv_row(), d.lora, scale,
                  lat.data() + b * seq_len * lw + h * d.lora, lw, scores);
  });
  default_pool().run(static_cast<size_t>(d.nh), [&](size_t task) {
    const int64_t h = static_cast<int64_t>(task);
    kernels::gemm_nt(n, d.v, d.lora, lat.data() + h * d.lora, lw, kv_b + (h * d.kv_b_rows() + d.nope) * d.lora, d.lora,
                     ctx + h * d.v, od);
  });
}

}  // namespace

bool expand_latent_keys(const ModelConfig& c, int64_t new_tokens, int64_t context) {
  const double lora = static_cast<double>(c.kv_lora_rank), nv = static_cast<double>(c.qk_nope_head_dim + c.v_head_dim);
  return lora * nv * static_cast<double>(context - new_tokens) <=
         static_cast<double>(new_tokens) * static_cast<double>(context) * (2 * lora - nv);
}

void latent_attention(const ModelConfig& c, const AttentionWeights& w, const RopeTable& rope, int64_t layer,
                      const float* x, int64_t batch, int64_t seq_len, KvCache& cache, float* out) {
  const LatentDims d{c.num_heads, c.qk_nope_head_dim, c.qk_rope_head_dim, c.v_head_dim, c.kv_lora_rank, c.head_dim};
  const int64_t H = c.hidden_size, n = batch * seq_len, start = cache.length(), qd = d.nh * d.hd;

  FloatBuffer kv_a(n * d.kv_row());
  FloatBuffer q = latent_queries(c, d, w, x, n, kv_a.data());

  // Latent norm and RoPE, then the rows go to the cache.
  default_pool().parallel_for(static_cast<size_t>(n), 64, [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r) {
      const int64_t b = static_cast<int64_t>(r) / seq_len, pos = start + static_cast<int64_t>(r) % seq_len;
      float* row = kv_a.data() + r * d.kv_row();
      rms_norm_rows(row, 1, d.lora, w.kv_a_norm->data.data(), c.latent_norm_eps, row);
      rope.apply(row + d.lora, 1, d.rope, pos);
      rope.apply(q.data() + r * qd + d.nope, d.nh, d.hd, pos);
      std::memcpy(cache.keys(layer, b, pos), row, d.kv_row() * sizeof(float));
    }
  });

  FloatBuffer ctx(n * d.nh * d.v);
  const float* kv_b = w.kv_b->data.data();
  if (expand_latent_keys(c, seq_len, start + seq_len))
    attend_expanded(d, c, kv_b, layer, q.data(), batch, seq_len, cache, ctx.data());
  else
    attend_latent(d, c, kv_b, layer, q.data(), batch, seq_len, cache, ctx.data());
  project(ctx.data(), n, d.nh * d.v, w.o, w.o_op, H, w.o_bias, out);
}

}  // namespace eq::model
