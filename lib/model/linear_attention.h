// The gated delta net of a linear-attention layer (ModelConfig::linear):
//   q, k, v  = SiLU(causal depthwise conv1d(in_proj x))  (conv state carried in the cache)
//   z, b, a  = in_proj x;  beta = sigmoid(b);  g = -exp(A_log) softplus(a + dt_bias)
//   per value head h (key head h / (nv / nk)), with q, k L2-normalized and q
//   scaled by key_head_dim^-0.5, a state S [dk, dv]:
//     S = exp(g) S;  S += k ⊗ beta (v - Sᵀk);  o = Sᵀq
//   out = out_proj(RMSNorm(o) w_norm SiLU(z))  (per value head; plain weight)
// Decode (one token) runs the recurrence; a prefill runs the chunked form,
// which computes the same outputs and state as matrix products over chunks
// of kDeltaChunk positions, so a prefill equals the same tokens decoded one
// at a time to rounding.
#pragma once

#include <cstdint>

#include "model/config.h"
#include "model/kv_cache.h"
#include "model/linear_op.h"
#include "model/weights.h"

namespace eq::model {

struct LinearAttentionWeights {
  Tensor32Ptr input_norm;       // [H] (as applied, load_norm)
  Tensor32Ptr qkvz, ba;         // fused: [2 dk nk + 2 dv nv, H], [2 nv, H], rows grouped per key head
  Tensor32Ptr qkv, z, b, a;     // separate: [conv_dim, H], [dv nv, H], [nv, H], [nv, H]
  Tensor32Ptr conv;             // [conv_dim, 1, kernel]
  Tensor32Ptr dt_bias, a_log;   // [nv]
  Tensor32Ptr norm;             // [dv]
  Tensor32Ptr out;              // [H, dv nv]
  // Set instead of the tensor when the projection is quantized (pack
  // --attn-format); b, a and ba (2 nv rows feeding exponentials) never are.
  const LinearOp *qkvz_op = nullptr, *qkv_op = nullptr, *z_op = nullptr, *out_op = nullptr;
};

// Positions per chunk of the chunked form.
inline constexpr int64_t kDeltaChunk = 64;

LinearAttentionWeights load_linear_attention(const WeightStore& w, const ModelConfig& c, int64_t layer);

// As attention_forward (attention.h) for a layer of c.layer_is_linear: x
// [batch*seq_len, H] normed hidden states at positions cache.length() ..;
// reads and updates the layer's conv and recurrent states (reset when
// cache.length() is 0); out [batch*seq_len, H].
void linear_attention_forward(const ModelConfig& c, const LinearAttentionWeights& w, int64_t layer, const float* x,
                              int64_t batch, int64_t seq_len, KvCache& cache, float* out);

// The gated delta rule of one head over `steps` tokens: q, k [steps, dk]
// (already normalized and scaled), v [steps, dv], g and beta [steps];
// `state` [dk, dv] is read and left at the last step; out [steps, dv].
// Rows of q/k/v/out are ld* floats apart. Token by token (the recurrence).
void gated_delta_rule(const float* q, const float* k, int64_t ldqk, const float* v, int64_t ldv, const float* g,
                      const float* beta, int64_t ldgb, int64_t steps, int64_t dk, int64_t dv, float* state, float* out,
                      int64_t ldo);

// The same rule in chunks of `chunk` positions: with G the cumulative decay
// inside a chunk and D[i][j] = exp(G_i - G_j) (j <= i), solve
//   (I + strictly-lower(diag(beta) K Kᵀ ∘ D)) [U_v | U_k] = [beta v | beta k exp(G)]
// then v_new = U_v - U_k S, out = (q exp(G)) S + lower(Q Kᵀ ∘ D) v_new,
// S = exp(G_last) S + (K exp(G_last - G))ᵀ v_new.
void gated_delta_rule_chunked(const float* q, const float* k, int64_t ldqk, const float* v, int64_t ldv,
                              const float* g, const float* beta, int64_t ldgb, int64_t steps, int64_t dk, int64_t dv,
                              float* state, float* out, int64_t ldo, int64_t chunk = kDeltaChunk);

}  // namespace eq::model
