#include "profile/expert_output.h"

#include "model/kernels/float_kernels.h"

namespace eq::profile {

ExpertOutput expert_output(const model::MlpWeights& w, const float* gate, const float* up, const float* down,
                           const float* x, int64_t rows, int64_t hidden) {
  using ConstMap = Eigen::Map<const RowMatrix>;
  const int64_t I = w.intermediate;
  const ConstMap xm(x, rows, hidden);
  ExpertOutput o;
  o.mid = xm * ConstMap(gate, I, hidden).transpose();
  const RowMatrix u = xm * ConstMap(up, I, hidden).transpose();
  model::kernels::glu_rows(w.act, o.mid.data(), u.data(), rows, I, I, w.gate_bias ? w.gate_bias->data.data() : nullptr,
                           w.up_bias ? w.up_bias->data.data() : nullptr, o.mid.data());
  o.y = o.mid * ConstMap(down, hidden, I).transpose();
  if (w.down_bias) o.y.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(w.down_bias->data.data(), hidden);
  return o;
}

}  // namespace eq::profile
