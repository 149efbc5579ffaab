// The decode and small-batch expert-MLP kernels (MlpKernel::kDecode,
// kSmallBatch), for calls with few tokens, where reading the weights is the
// limit: rows_per_pass = 1 reads an expert's weights once per row; up to
// quant::kMaxGemvRows reads them once per that many rows of the expert, with
// the same bits for every row.
#pragma once

#include <span>

#include "exec/expert_mlp.h"

namespace eq::exec {

void run_decode_mlp(std::span<const ExpertBatch> batches, int rows_per_pass = 1);

}  // namespace eq::exec
