// A non-expert weight matrix stored quantized in a packed folder (`pack
// --attn-format`: attention projections and lm_head), applied by the forward
// pass through its format's matmul on the mapped bytes (model::LinearOp).
#pragma once

#include "model/linear_op.h"
#include "quant/format.h"

namespace eq::exec {

class PackedLinear : public model::LinearOp {
 public:
  // `m` views the folder's mapped parts; they must outlive this object.
  explicit PackedLinear(quant::PackedMatrix m) : m_(std::move(m)) {}
  int64_t rows() const override { return m_.rows; }
  int64_t cols() const override { return m_.cols; }
  // Fixed chunks of rows on eq::default_pool() (results do not depend on the
  // thread count); formats whose matmul uses the pool itself run whole.
  void apply(const float* x, int64_t n, float* y) const override;
  const quant::PackedMatrix& matrix() const { return m_; }

 private:
  quant::PackedMatrix m_;
};

}  // namespace eq::exec
