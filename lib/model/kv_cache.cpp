#include "model/kv_cache.h"

#include "core/error.h"

namespace eq::model {

KvCache::KvCache(const ModelConfig& c, int64_t batch, int64_t capacity)
    : batch_(batch), capacity_(capacity), kv_dim_(c.num_kv_heads * c.head_dim) {
  if (batch <= 0 || capacity <= 0)
    invalid("KV cache: batch and capacity must be positive (got " + std::to_string(batch) + ", " +
            std::to_string(capacity) + ")");
  const size_t per_layer = static_cast<size_t>(batch) * capacity * kv_dim_;
  k_.assign(c.num_layers, FloatBuffer(per_layer));
  v_.assign(c.num_layers, FloatBuffer(per_layer));
}

void KvCache::advance(int64_t n) {
  EQ_CHECK(length_ + n <= capacity_, "KV cache overflow");
  length_ += n;
}

uint64_t KvCache::bytes() const {
  uint64_t b = 0;
  for (const auto& l : k_) b += l.size() * sizeof(float);
  return 2 * b;
}

}  // namespace eq::model
