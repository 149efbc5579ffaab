#include "model/mlp.h"

#include "model/kernels/float_kernels.h"
#include "model/ops.h"
#include "model/projection.h"

namespace eq::model {
namespace {

const float* data_or_null(const Tensor32Ptr& t) { return t ? t->data.data() : nullptr; }

}  // namespace

void mlp_forward(const MlpWeights& w, const float* x, int64_t n, int64_t hidden, float* out) {
  const int64_t I = w.intermediate;
  FloatBuffer gate(n * I), up(n * I);
  const Projection gate_up[] = {{&w.gate, w.gate_op, I, nullptr, gate.data()}, {&w.up, w.up_op, I, nullptr, up.data()}};
  project_shared(x, n, hidden, gate_up);
  kernels::glu_rows(w.act, gate.data(), up.data(), n, I, I, data_or_null(w.gate_bias), data_or_null(w.up_bias),
                    gate.data());
  project(gate.data(), n, I, w.down, w.down_op, hidden, w.down_bias, out);
}

void mlp_forward_serial(const MlpWeights& w, const float* x, int64_t n, int64_t hidden, float* out,
                        FloatBuffer& scratch) {
  const int64_t I = w.intermediate;
  scratch.resize(2 * n * I);
  float* gate = scratch.data();
  float* up = gate + n * I;
  kernels::gemm_nt(n, I, hidden, x, hidden, w.gate->data.data(), hidden, gate, I);
  kernels::gemm_nt(n, I, hidden, x, hidden, w.up->data.data(), hidden, up, I);
  kernels::glu_rows(w.act, gate, up, n, I, I, data_or_null(w.gate_bias), data_or_null(w.up_bias), gate);
  kernels::gemm_nt(n, hidden, I, gate, I, w.down->data.data(), I, out, hidden);
  if (const float* b = data_or_null(w.down_bias))
    for (int64_t r = 0; r < n; ++r)
      for (int64_t h = 0; h < hidden; ++h) out[r * hidden + h] += b[h];
}

}  // namespace eq::model
