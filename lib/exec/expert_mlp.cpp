#include "exec/expert_mlp.h"

#include "exec/batch_mlp.h"
#include "exec/decode_mlp.h"
#include "quant/gemv.h"

namespace eq::exec {

void add_bias_rows(const float* bias, int64_t n, float* y, int64_t rows, int64_t ldy) {
  if (!bias) return;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < n; ++c) y[r * ldy + c] += bias[c];
}

void run_expert_batches(std::span<const ExpertBatch> batches, MlpKernel kernel, const BatchOptions& options) {
  switch (kernel) {
    case MlpKernel::kDecode: run_decode_mlp(batches, 1); return;
    case MlpKernel::kSmallBatch: run_decode_mlp(batches, quant::kMaxGemvRows); return;
    case MlpKernel::kBatch: run_batch_mlp(batches, options); return;
  }
}

}  // namespace eq::exec
