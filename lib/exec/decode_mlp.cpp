#include "exec/decode_mlp.h"

#include "exec/batch_mlp.h"

namespace eq::exec {

// Until the int8-activation kernels land, decode runs the batch kernel.
void run_decode_mlp(std::span<const ExpertBatch> batches) { run_batch_mlp(batches); }

}  // namespace eq::exec
