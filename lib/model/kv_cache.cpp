#include "model/kv_cache.h"

#include "core/error.h"

namespace eq::model {

KvCache::KvCache(const ModelConfig& c, int64_t batch, int64_t capacity, const std::vector<bool>& elsewhere)
    : batch_(batch), capacity_(capacity) {
  if (batch <= 0 || capacity <= 0)
    invalid("KV cache: batch and capacity must be positive (got " + std::to_string(batch) + ", " +
            std::to_string(capacity) + ")");
  if (c.attention == AttentionKind::kLatent) {
    key_dim_ = c.kv_lora_rank + c.qk_rope_head_dim;
    value_dim_ = 0;
  } else {
    key_dim_ = value_dim_ = c.num_kv_heads * c.head_dim;
  }
  const size_t rows = static_cast<size_t>(batch) * static_cast<size_t>(capacity);
  k_.assign(c.num_layers, FloatBuffer());
  v_.assign(c.num_layers, FloatBuffer());
  conv_.assign(c.num_layers, FloatBuffer());
  recurrent_.assign(c.num_layers, FloatBuffer());
  const LinearAttentionConfig& a = c.linear;
  conv_dim_ = (a.conv_kernel - 1) * a.conv_dim();
  recurrent_dim_ = a.num_value_heads * a.key_head_dim * a.value_head_dim;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    if (static_cast<size_t>(l) < elsewhere.size() && elsewhere[static_cast<size_t>(l)]) continue;
    if (c.layer_linear(l)) {
      conv_[l].assign(static_cast<size_t>(batch * conv_dim_), 0.0f);
      recurrent_[l].assign(static_cast<size_t>(batch * recurrent_dim_), 0.0f);
    } else {
      k_[l].assign(rows * key_dim_, 0.0f);
      v_[l].assign(rows * value_dim_, 0.0f);
    }
  }
}

void KvCache::advance(int64_t n) {
  EQ_CHECK(length_ + n <= capacity_, "KV cache overflow");
  length_ += n;
}

uint64_t KvCache::bytes() const {
  uint64_t b = 0;
  for (const auto& l : k_) b += l.size() * sizeof(float);
  for (const auto& l : v_) b += l.size() * sizeof(float);
  for (const auto& l : conv_) b += l.size() * sizeof(float);
  for (const auto& l : recurrent_) b += l.size() * sizeof(float);
  return b;
}

}  // namespace eq::model
