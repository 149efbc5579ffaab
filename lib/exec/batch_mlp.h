// The batch expert-MLP kernel (MlpKernel::kBatch): each expert's contiguous
// rows times its format's matmul: gate and up, the gated activation (with the
// expert's biases), down.
#pragma once

#include <span>

#include "exec/expert_mlp.h"

namespace eq::exec {

void run_batch_mlp(std::span<const ExpertBatch> batches, const BatchOptions& options = {});

// The kernel run_batch_mlp runs an expert through, from its format's row and
// the active ISA: a row without the hook a path needs (or whose shape the
// path does not take) falls back to the next one down.
enum class BatchPath {
  kRotated,       // FormatTraits::rotated: activations rotated into the codes' basis
  kInt8Panels,    // FormatTraits::int8_panels, an integer GEMM on this ISA, H and I in whole 32-k units
  kFloatPanels,   // FormatTraits::dequantize_block: fp32 panels
  kFormatMatmul,  // the format's own matmul (run_expert)
};
BatchPath batch_path_of(const ExpertWeights& w);

}  // namespace eq::exec
