// The batch expert-MLP kernel (MlpKernel::kBatch): each expert's contiguous
// rows times its format's matmul: gate and up, the gated activation (with the
// expert's biases), down.
#pragma once

#include <span>

#include "exec/expert_mlp.h"

namespace eq::exec {

void run_batch_mlp(std::span<const ExpertBatch> batches, const BatchOptions& options = {});

}  // namespace eq::exec
