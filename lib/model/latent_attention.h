// Multi-head latent attention (AttentionKind::kLatent), per token:
//   q      = q_b_proj(rms_norm(q_a_proj(x), q_a_layernorm))   (or q_proj(x))
//          = per head [q_nope (qk_nope_head_dim) | q_rope (qk_rope_head_dim)]
//   kv_a   = kv_a_proj_with_mqa(x) = [latent (kv_lora_rank) | k_rope (qk_rope_head_dim)]
//   c      = rms_norm(latent, kv_a_layernorm)
//   kv_b_proj(c) = per head [k_nope | v (v_head_dim)]
//   RoPE on q_rope and k_rope (one k_rope shared by all heads)
//   score(head h, position j) = (q_nope·k_nope_j + q_rope·k_rope_j) x head_dim^-0.5 x attention_scale_factor
// and the heads' softmax-weighted values go through o_proj. The cache keeps
// [c | k_rope] per position (kv_cache.h). A call attends to the expanded keys
// and values (kv_b_proj applied to every visible position), or, when that
// costs more (few new tokens on a long cache), in the latent space:
// q_nope·k_nope_j = (W_kᵀ q_nope)·c_j and the value sum is W_v (Σ p_j c_j),
// W_k and W_v being the head's rows of kv_b_proj: the same products
// regrouped.
#pragma once

#include <cstdint>

#include "model/config.h"
#include "model/kv_cache.h"
#include "model/rope.h"
#include "model/weights.h"

namespace eq::model {

// As attention_forward (attention.h), for c.attention == kLatent.
void latent_attention(const ModelConfig& c, const AttentionWeights& w, const RopeTable& rope, int64_t layer,
                      const float* x, int64_t batch, int64_t seq_len, KvCache& cache, float* out);

// Whether a call of `new_tokens` tokens over `context` positions (new ones
// included) attends to expanded keys and values: when expanding every
// position costs no more than the wider latent-space products,
//   kv_lora (nope + v) (context - new) <= new x context x (2 kv_lora - nope - v).
bool expand_latent_keys(const ModelConfig& c, int64_t new_tokens, int64_t context);

}  // namespace eq::model
