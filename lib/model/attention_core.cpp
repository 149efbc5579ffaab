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

void attend_causal(int64_t rows, int64_t start, const QkPart* parts, int n_parts, const float* v, int64_t ldv,
                   int64_t dv, float scale, float* out, int64_t ldo, FloatBuffer& scores, int64_t window,
                   const float* sink) {
  // The first key position a query at `pos` sees.
  const auto first_key = [&](int64_t pos) { return window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0; };
  for (int64_t t0 = 0; t0 < rows; t0 += kQueryBlock) {
    const int64_t t1 = std::min(rows, t0 + kQueryBlock), block = t1 - t0;
    // Keys the block's rows see: from its first row's first key to its last row.
    const int64_t k0 = first_key(start + t0), keys = start + t1 - k0;
    // A sink takes one more column of the row (the scores' stride grows by one).
    const int64_t ld = keys + (sink ? 1 : 0);
    scores.resize(block * ld);
    for (int p = 0; p < n_parts; ++p)
      kernels::gemm_nt(block, keys, parts[p].dim, parts[p].q + t0 * parts[p].ldq, parts[p].ldq,
                       parts[p].k + k0 * parts[p].ldk, parts[p].ldk, scores.data(), ld, /*accumulate=*/p > 0);
    for (int64_t r = 0; r < block; ++r) {
      float* s = scores.data() + r * ld;
      const int64_t pos = start + t0 + r, lo = first_key(pos) - k0, hi = pos + 1 - k0;  // visible: [lo, hi)
      for (int64_t j = lo; j < hi; ++j) s[j] *= scale;
      // A sink's logit goes right after the last visible key (a masked key's
      // column, or the extra one) and its probability is dropped with the zeros.
      if (sink) s[hi] = *sink;
      kernels::softmax_row(s + lo, hi - lo + (sink ? 1 : 0));
      std::fill(s, s + lo, 0.0f);
      std::fill(s + hi, s + keys, 0.0f);
    }
    kernels::gemm_nn(block, dv, keys, scores.data(), ld, v + k0 * ldv, ldv, out + t0 * ldo, ldo);
  }
}

}  // namespace eq::model
