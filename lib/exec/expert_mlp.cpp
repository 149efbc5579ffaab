#include "exec/expert_mlp.h"

#include "exec/batch_mlp.h"
#include "exec/decode_mlp.h"
#include "quant/gemv.h"

namespace eq::exec {

void run_expert_batches(std::span<const ExpertBatch> batches, MlpKernel kernel, const BatchOptions& options) {
  switch (kernel) {
    case MlpKernel::kDecode: run_decode_mlp(batches, 1); return;
    case MlpKernel::kSmallBatch: run_decode_mlp(batches, quant::kMaxGemvRows); return;
    case MlpKernel::kBatch: run_batch_mlp(batches, options); return;
  }
}

}  // namespace eq::exec
