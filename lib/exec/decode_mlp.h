// The decode expert-MLP kernel (MlpKernel::kDecode), for calls with few
// tokens, where the weights are read once per row and bandwidth is the limit.
#pragma once

#include <span>

#include "exec/expert_mlp.h"

namespace eq::exec {

void run_decode_mlp(std::span<const ExpertBatch> batches);

}  // namespace eq::exec
