// Keys and values of past positions, per layer, for a batch of sequences that
// advance together (prefill appends T positions to every sequence, decode 1).
// Layout per layer: [batch][capacity][row]. Grouped-query attention stores
// keys (after RoPE) and values, kv_heads * head_dim floats each. Latent
// attention stores one key row only: the normed latent (kv_lora_rank) and the
// shared RoPE key after RoPE (qk_rope_head_dim); heads' keys and values are
// expanded from it when attended to. A linear-attention layer (gated delta
// net) stores no rows: per sequence its conv state (the last conv_kernel - 1
// conv inputs, [conv_kernel - 1][conv_dim]) and its recurrent state
// ([value heads][key_head_dim][value_head_dim]), both zero at position 0.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/config.h"
#include "model/float_buffer.h"

namespace eq::model {

class KvCache {
 public:
  // Layers marked in `elsewhere` keep their rows or states with a
  // LayerRunner (attachment()): none are allocated here.
  KvCache(const ModelConfig& c, int64_t batch, int64_t capacity, const std::vector<bool>& elsewhere = {});

  int64_t batch() const { return batch_; }
  int64_t capacity() const { return capacity_; }
  // Positions already stored (the next token's position).
  int64_t length() const { return length_; }
  void clear() { length_ = 0; }
  // Marks `n` more positions as stored (forward() calls this after the last layer).
  void advance(int64_t n);

  // Floats per position of a key row and of a value row (0: no values stored).
  int64_t key_dim() const { return key_dim_; }
  int64_t value_dim() const { return value_dim_; }
  float* keys(int64_t layer, int64_t seq, int64_t pos) { return at(k_, key_dim_, layer, seq, pos); }
  float* values(int64_t layer, int64_t seq, int64_t pos) { return at(v_, value_dim_, layer, seq, pos); }
  const float* keys(int64_t layer, int64_t seq, int64_t pos) const { return at(k_, key_dim_, layer, seq, pos); }
  const float* values(int64_t layer, int64_t seq, int64_t pos) const { return at(v_, value_dim_, layer, seq, pos); }
  uint64_t bytes() const;

  // Linear-attention layers only (ModelConfig::layer_is_linear).
  int64_t conv_state_dim() const { return conv_dim_; }
  int64_t recurrent_state_dim() const { return recurrent_dim_; }
  float* conv_state(int64_t layer, int64_t seq) { return conv_[layer].data() + seq * conv_dim_; }
  float* recurrent_state(int64_t layer, int64_t seq) { return recurrent_[layer].data() + seq * recurrent_dim_; }

  // What a LayerRunner keeps for the layers it runs (the GPU's keys and
  // values), released with the cache. clear() leaves it: the positions it
  // holds are overwritten as they are again.
  struct Attachment {
    virtual ~Attachment() = default;
  };
  std::unique_ptr<Attachment>& attachment() { return attachment_; }

 private:
  float* at(std::vector<FloatBuffer>& s, int64_t dim, int64_t layer, int64_t seq, int64_t pos) {
    return s[layer].data() + (seq * capacity_ + pos) * dim;
  }
  const float* at(const std::vector<FloatBuffer>& s, int64_t dim, int64_t layer, int64_t seq, int64_t pos) const {
    return s[layer].data() + (seq * capacity_ + pos) * dim;
  }
  int64_t batch_, capacity_, key_dim_, value_dim_, length_ = 0;
  std::vector<FloatBuffer> k_, v_;
  int64_t conv_dim_ = 0, recurrent_dim_ = 0;
  std::vector<FloatBuffer> conv_, recurrent_;
  std::unique_ptr<Attachment> attachment_;
};

}  // namespace eq::model
