// The small-batch entry point of the decode kernels (gemv.h): a format's
// multi-input kernel when it has one, else its single-input kernel per input
// (the same bits either way).
#include "quant/gemv.h"

namespace eq::quant {

void gemv_run_rows(const GemvKernel& kernel, const PackedMatrix& m, const GemvInput* const* xs, int n,
                   int64_t row_begin, int64_t row_end, float* const* ys) {
  if (kernel.run_rows) return kernel.run_rows(m, xs, n, row_begin, row_end, ys);
  for (int i = 0; i < n; ++i) kernel.run(m, *xs[i], row_begin, row_end, ys[i]);
}

}  // namespace eq::quant
