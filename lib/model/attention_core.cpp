#include "model/attention_core.h"

#include <algorithm>

#include "model/kernels/float_kernels.h"
#include "model/ops.h"

namespace eq::model {
namespace {

// Query rows per block: a block needs keys up to its last row only, which
// skips most of the masked upper triangle while keeping matmuls large.
constexpr int64_t kQueryBlock = 64;

}  // namespace

void project(const float* x, int64_t n, int64_t in, const Tensor32Ptr& w, const LinearOp* op, int64_t out,
             const Tensor32Ptr& bias, float* y) {
  if (!op) {
    linear(x, n, in, w->data.data(), out, bias ? bias->data.data() : nullptr, y);
    return;
  }
  op->apply(x, n, y);
  if (!bias) return;
  const float* b = bias->data.data();
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < out; ++i) y[r * out + i] += b[i];
}

void attend_causal(int64_t rows, int64_t start, const QkPart* parts, int n_parts, const float* v, int64_t ldv,
                   int64_t dv, float scale, float* out, int64_t ldo, FloatBuffer& scores) {
  for (int64_t t0 = 0; t0 < rows; t0 += kQueryBlock) {
    const int64_t t1 = std::min(rows, t0 + kQueryBlock), block = t1 - t0;
    const int64_t keys = start + t1;  // keys visible to the block's last row
    scores.resize(block * keys);
    for (int p = 0; p < n_parts; ++p)
      kernels::gemm_nt(block, keys, parts[p].dim, parts[p].q + t0 * parts[p].ldq, parts[p].ldq, parts[p].k,
                       parts[p].ldk, scores.data(), keys, /*accumulate=*/p > 0);
    for (int64_t r = 0; r < block; ++r) {
      float* s = scores.data() + r * keys;
      const int64_t visible = start + t0 + r + 1;
      for (int64_t j = 0; j < visible; ++j) s[j] *= scale;
      kernels::softmax_row(s, visible);
      std::fill(s + visible, s + keys, 0.0f);
    }
    kernels::gemm_nn(block, dv, keys, scores.data(), keys, v, ldv, out + t0 * ldo, ldo);
  }
}

}  // namespace eq::model
