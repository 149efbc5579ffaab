#include "quant/trellis/importance.h"

#include <Eigen/Dense>
#include <cmath>

#include "core/error.h"
#include "quant/hadamard.h"
#include "quant/trellis/codebook.h"

namespace eq::quant::trellis {

namespace {

// H_B (orthonormal, Sylvester order) as a dense matrix.
Eigen::MatrixXd hadamard_matrix(int64_t b) {
  Eigen::MatrixXd h(b, b);
  const double norm = 1.0 / std::sqrt(static_cast<double>(b));
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < b; ++j) h(i, j) = (__builtin_popcountll(static_cast<uint64_t>(i & j)) & 1) ? -norm : norm;
  return h;
}

}  // namespace

ImportanceFeedback::ImportanceFeedback(const float* importance, int64_t cols) : cols_(cols) {
  block_ = hadamard_block_size(cols);
  if (importance == nullptr) return;
  double sum = 0;
  for (int64_t k = 0; k < cols; ++k) sum += importance[k];
  if (!(sum > 0)) return;
  const double mean = sum / static_cast<double>(cols);
  normalized_.resize(cols);
  for (int64_t k = 0; k < cols; ++k) normalized_[k] = static_cast<float>(importance[k] / mean);
  active_ = true;

  column_weight_.resize(cols);
  feedback_.assign(static_cast<size_t>(cols * block_), 0.0f);
  const Eigen::MatrixXd h = hadamard_matrix(block_);
  const int64_t tiles = block_ / kTileDim;
  for (int64_t hb = 0; hb < cols / block_; ++hb) {
    Eigen::VectorXd imp(block_);
    for (int64_t k = 0; k < block_; ++k) imp(k) = normalized_[hb * block_ + k];
    Eigen::MatrixXd g = h * imp.asDiagonal() * h;
    // Damping keeps the factorization defined when some channels have zero importance.
    g.diagonal().array() += 1e-3 * g.diagonal().mean();
    // G = R R^T with R upper triangular: Cholesky of G with reversed index order.
    Eigen::MatrixXd reversed = g.reverse();
    Eigen::LLT<Eigen::MatrixXd> llt(reversed);
    EQ_CHECK(llt.info() == Eigen::Success, "importance Gram matrix not positive definite");
    Eigen::MatrixXd r = Eigen::MatrixXd(llt.matrixL()).reverse();
    for (int64_t j = 0; j < tiles; ++j) {
      Eigen::MatrixXd rjj = r.block(j * kTileDim, j * kTileDim, kTileDim, kTileDim);
      Eigen::MatrixXd d = rjj * rjj.transpose();
      for (int c = 0; c < kTileDim; ++c) column_weight_[hb * block_ + j * kTileDim + c] = static_cast<float>(d(c, c));
      Eigen::MatrixXd rjj_inv = rjj.inverse();
      for (int64_t i = 0; i < j; ++i) {
        Eigen::MatrixXd mij = r.block(i * kTileDim, j * kTileDim, kTileDim, kTileDim) * rjj_inv;
        for (int a = 0; a < kTileDim; ++a)
          for (int c = 0; c < kTileDim; ++c)
            feedback_[(hb * block_ + i * kTileDim + a) * block_ + j * kTileDim + c] = static_cast<float>(mij(a, c));
      }
    }
  }
}

void ImportanceFeedback::apply_g(const float* v, double* out) const {
  std::vector<double> tmp(v, v + cols_);
  if (active_) {
    hadamard_f64(tmp.data(), cols_);
    for (int64_t k = 0; k < cols_; ++k) tmp[k] *= normalized_[k];
    hadamard_f64(tmp.data(), cols_);
  }
  for (int64_t k = 0; k < cols_; ++k) out[k] = tmp[k];
}

}  // namespace eq::quant::trellis
