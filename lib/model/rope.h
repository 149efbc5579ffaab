// Rotary position embedding, "rotate-half" convention, on the first `dim`
// values of a vector (the caller points at a head's RoPE part): for i < d/2,
// with a = pos * inv_freq[i] and f the attention factor,
//   x'[i]       = x[i] f cos a - x[i + d/2] f sin a
//   x'[i + d/2] = x[i + d/2] f cos a + x[i] f sin a
// With ModelConfig::rope_interleave the input pairs are (x[2i], x[2i+1]),
// regrouped to (x[i], x[i + d/2]) first, so the output is in the regrouped
// order (queries and keys alike, which leaves their dot products unchanged).
// inv_freq[i] = theta^(-2i/d), or its YaRN blend (rope_inv_freq). Angles are
// computed in double and rounded once to float (the reference computes them
// in float32; the difference is < 1e-4 rad at position 4096).
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"

namespace eq::model {

// The inverse frequencies of c's RoPE: rope_dim / 2 values.
//   plain: inv_freq[i] = theta^(-2i/d)
//   YaRN:  with low/high the dims where a frequency turns beta_fast/beta_slow
//          times over original_max_position_embeddings (floor/ceil when
//          truncate, clamped to [0, d-1]), ramp[i] = clamp((i - low) /
//          (high - low), 0, 1):  inv_freq[i] = theta^(-2i/d) (ramp[i] / factor + 1 - ramp[i])
std::vector<double> rope_inv_freq(const ModelConfig& c);

class RopeTable {
 public:
  explicit RopeTable(const ModelConfig& c);
  // Precomputes positions [0, n); apply() is read-only (thread-safe) below n.
  void reserve(int64_t n) const { ensure(n - 1); }
  // Turns `count` vectors of dim() floats starting at x, x + stride, ... at
  // `pos` (which must be below the reserved count).
  void apply(float* x, int64_t count, int64_t stride, int64_t pos) const;
  int64_t dim() const { return dim_; }
  bool interleaved() const { return interleaved_; }
  // The dim()/2 cos and sin values of position `pos` (below the reserved
  // count), the attention factor applied: what apply() turns by.
  const float* cos_row(int64_t pos) const { return cos_.data() + pos * (dim_ / 2); }
  const float* sin_row(int64_t pos) const { return sin_.data() + pos * (dim_ / 2); }

 private:
  void ensure(int64_t pos) const;
  int64_t dim_;
  bool interleaved_;
  double factor_;  // cos and sin are multiplied by it (YaRN's attention factor)
  std::vector<double> inv_freq_;
  // cos/sin rows per position, grown by reserve() before any parallel use.
  mutable std::vector<float> cos_, sin_;
  mutable int64_t positions_ = 0;
};

}  // namespace eq::model
