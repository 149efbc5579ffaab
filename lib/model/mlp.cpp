#include "model/mlp.h"

#include "model/kernels/float_kernels.h"
#include "model/ops.h"

namespace eq::model {

void mlp_forward(const MlpWeights& w, const float* x, int64_t n, int64_t hidden, float* out) {
  const int64_t I = w.intermediate;
  FloatBuffer gate(n * I), up(n * I);
  linear(x, n, hidden, w.gate->data.data(), I, nullptr, gate.data());
  linear(x, n, hidden, w.up->data.data(), I, nullptr, up.data());
  kernels::glu({}, gate.data(), up.data(), n * I, gate.data());
  linear(gate.data(), n, I, w.down->data.data(), hidden, nullptr, out);
}

void mlp_forward_serial(const MlpWeights& w, const float* x, int64_t n, int64_t hidden, float* out,
                        FloatBuffer& scratch) {
  const int64_t I = w.intermediate;
  scratch.resize(2 * n * I);
  float* gate = scratch.data();
  float* up = gate + n * I;
  kernels::gemm_nt(n, I, hidden, x, hidden, w.gate->data.data(), hidden, gate, I);
  kernels::gemm_nt(n, I, hidden, x, hidden, w.up->data.data(), hidden, up, I);
  kernels::glu({}, gate, up, n * I, gate);
  kernels::gemm_nt(n, hidden, I, gate, I, w.down->data.data(), I, out, hidden);
}

}  // namespace eq::model
