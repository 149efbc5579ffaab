// Keys and values of past positions, per layer, for a batch of sequences that
// advance together (prefill appends T positions to every sequence, decode 1).
// Layout per layer: [batch][capacity][kv_heads * head_dim], keys after RoPE.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/float_buffer.h"

namespace eq::model {

class KvCache {
 public:
  KvCache(const ModelConfig& c, int64_t batch, int64_t capacity);

  int64_t batch() const { return batch_; }
  int64_t capacity() const { return capacity_; }
  // Positions already stored (the next token's position).
  int64_t length() const { return length_; }
  void clear() { length_ = 0; }
  // Marks `n` more positions as stored (forward() calls this after the last layer).
  void advance(int64_t n);

  float* keys(int64_t layer, int64_t seq, int64_t pos) { return at(k_, layer, seq, pos); }
  float* values(int64_t layer, int64_t seq, int64_t pos) { return at(v_, layer, seq, pos); }
  const float* keys(int64_t layer, int64_t seq, int64_t pos) const { return at(k_, layer, seq, pos); }
  const float* values(int64_t layer, int64_t seq, int64_t pos) const { return at(v_, layer, seq, pos); }
  uint64_t bytes() const;

 private:
  float* at(std::vector<FloatBuffer>& s, int64_t layer, int64_t seq, int64_t pos) {
    return s[layer].data() + (seq * capacity_ + pos) * kv_dim_;
  }
  const float* at(const std::vector<FloatBuffer>& s, int64_t layer, int64_t seq, int64_t pos) const {
    return s[layer].data() + (seq * capacity_ + pos) * kv_dim_;
  }
  int64_t batch_, capacity_, kv_dim_, length_ = 0;
  std::vector<FloatBuffer> k_, v_;
};

}  // namespace eq::model
