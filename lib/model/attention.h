// Causal self-attention with RoPE, of either kind (ModelConfig::attention):
// grouped-query attention with the per-architecture extras (q/k RMSNorm per
// head or over the whole projection, q/k/v clamping, q/k/v (and o) biases
// when the checkpoint has them, RoPE on part of each head, a learned sink
// logit per head, a sliding window on some layers), or multi-head latent
// attention (latent_attention.h).
#pragma once

#include <cstdint>

#include "model/config.h"
#include "model/kv_cache.h"
#include "model/rope.h"
#include "model/weights.h"

namespace eq::model {

// x: [batch*seq_len, H] input-normalized hidden states of tokens at positions
// cache.length() .. cache.length()+seq_len-1 of each sequence. Writes their
// keys/values into `cache` (layer `layer`; the caller advances it) and the
// attention output (after o_proj) to out [batch*seq_len, H].
// `rope` must be reserved up to cache.length() + seq_len.
void attention_forward(const ModelConfig& c, const AttentionWeights& w, const RopeTable& rope, int64_t layer,
                       const float* x, int64_t batch, int64_t seq_len, KvCache& cache, float* out);

// The softmax scale: head_dim^-0.5 x attention_scale_factor.
float attention_scale(const ModelConfig& c);

}  // namespace eq::model
