// Rotary position embedding, "rotate-half" convention (HF apply_rotary_pos_emb):
// for i < d/2, with a = pos * theta^(-2i/d):
//   x'[i]       = x[i] cos a - x[i + d/2] sin a
//   x'[i + d/2] = x[i + d/2] cos a + x[i] sin a
// Angles are computed in double and rounded once to float (HF computes them in
// float32; the difference is < 1e-4 rad at position 4096).
#pragma once

#include <cstdint>
#include <vector>

namespace eq::model {

class RopeTable {
 public:
  RopeTable(int64_t head_dim, double theta);
  // Precomputes positions [0, n); apply() is read-only (thread-safe) below n.
  void reserve(int64_t n) const { ensure(n - 1); }
  // Rotates `count` heads of head_dim floats, laid out back to back, at `pos`
  // (which must be below the reserved count).
  void apply(float* heads, int64_t count, int64_t pos) const;
  int64_t head_dim() const { return head_dim_; }

 private:
  void ensure(int64_t pos) const;
  int64_t head_dim_;
  std::vector<double> inv_freq_;
  // cos/sin rows per position, grown by reserve() before any parallel use.
  mutable std::vector<float> cos_, sin_;
  mutable int64_t positions_ = 0;
};

}  // namespace eq::model
