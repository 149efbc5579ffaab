// Causal grouped-query self-attention with RoPE and the per-architecture
// extras: q/k RMSNorm per head or over the whole projection (ModelConfig::qk_norm),
// q/k/v (and o) biases when the checkpoint has them.
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

}  // namespace eq::model
