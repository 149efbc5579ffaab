#include "exec/expert_mlp.h"

#include "exec/batch_mlp.h"
#include "exec/decode_mlp.h"

namespace eq::exec {

void run_expert_batches(std::span<const ExpertBatch> batches, MlpKernel kernel) {
  switch (kernel) {
    case MlpKernel::kDecode: run_decode_mlp(batches); return;
    case MlpKernel::kBatch: run_batch_mlp(batches); return;
  }
}

}  // namespace eq::exec
