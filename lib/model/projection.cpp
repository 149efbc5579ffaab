#include "model/projection.h"

#include <vector>

#include "model/ops.h"

namespace eq::model {

namespace {

void add_bias(const Tensor32Ptr& bias, int64_t n, int64_t out, float* y) {
  if (!bias) return;
  const float* b = bias->data.data();
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < out; ++i) y[r * out + i] += b[i];
}

}  // namespace

void project(const float* x, int64_t n, int64_t in, const Tensor32Ptr& w, const LinearOp* op, int64_t out,
             const Tensor32Ptr& bias, float* y) {
  if (!op) {
    linear(x, n, in, w->data.data(), out, bias ? bias->data.data() : nullptr, y);
    return;
  }
  op->apply(x, n, y);
  add_bias(bias, n, out, y);
}

void project_shared(const float* x, int64_t n, int64_t in, std::span<const Projection> ps) {
  static const Tensor32Ptr kNone;
  std::vector<const LinearOp*> ops;
  std::vector<float*> ys;
  for (const Projection& p : ps)
    if (p.op) ops.push_back(p.op), ys.push_back(p.y);
  const bool together = ops.size() >= 2 && ops[0]->apply_shared(ops, x, n, ys.data());
  for (const Projection& p : ps) {
    const Tensor32Ptr& bias = p.bias ? *p.bias : kNone;
    if (together && p.op)
      add_bias(bias, n, p.out, p.y);
    else
      project(x, n, in, p.w ? *p.w : kNone, p.op, p.out, bias, p.y);
  }
}

}  // namespace eq::model
