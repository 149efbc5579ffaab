// Importance weighting in the rotated basis.
//
// The quantizer must minimize sum_n sum_k imp[k] (W - W^)[n,k]^2 in the
// original basis. With W = S_v H_N W' H_K S_u (W' the rotated weights) that
// error equals sum_n d_n G d_n^T over the rows d_n of W' - W'^, with
// G = H_K diag(imp) H_K — not diagonal (its diagonal is just the mean
// importance of each Hadamard block). We handle the full G as QTIP's BlockLDLQ
// does: per Hadamard block, G = M D M^T with M unit upper block-triangular in
// 16x16 blocks (from a Cholesky factor of G with rows and columns reversed) and
// D block-diagonal. Quantizing column tiles left to right with the target
//   t_j = W'_j + sum_{i<j} (W'_i - W'^_i) M_ij
// makes the error exactly sum_j e_j D_j e_j^T with e_j = t_j - W'^_j; the
// Viterbi search minimizes it with the diagonal of D_j as per-column weights.
#pragma once

#include <cstdint>
#include <vector>

namespace eq::quant::trellis {

class ImportanceFeedback {
 public:
  // importance: [cols] >= 0, or nullptr (then G = I and nothing is fed back).
  // It is normalized to mean 1; an all-zero vector counts as uniform.
  ImportanceFeedback(const float* importance, int64_t cols);

  bool active() const { return active_; }
  int64_t block() const { return block_; }
  // Viterbi weight of column c (diagonal of D for its column tile).
  float column_weight(int64_t col) const { return active_ ? column_weight_[col] : 1.0f; }
  // M(a, c) for columns a < c of the same Hadamard block (row-major block x block).
  const float* feedback_block(int64_t hadamard_block) const { return &feedback_[hadamard_block * block_ * block_]; }
  // out = G v for one row (length cols).
  void apply_g(const float* v, double* out) const;

 private:
  bool active_ = false;
  int64_t cols_ = 0, block_ = 1;
  std::vector<float> normalized_;     // [cols]
  std::vector<float> column_weight_;  // [cols]
  std::vector<float> feedback_;       // [cols / block][block][block]
};

}  // namespace eq::quant::trellis
