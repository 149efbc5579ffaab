// One routed expert on a batch of rows through its format's kernels:
//   y = down(silu(gate x) ⊙ up x)
// This is the seam the optimized kernels slot into (int8-activation decode,
// fused gate+up and SwiGLU+down, batch-size thresholds): every dispatch
// strategy reaches the weights only through run_expert / run_expert_batches.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "exec/bit_group.h"
#include "exec/mlp_kernel.h"
#include "model/float_buffer.h"

namespace eq::exec {

// x: [rows, H] contiguous; y: [rows, H] contiguous, overwritten. Single
// threaded unless the format's matmul parallelizes itself (see below).
// `scratch` grows to 2 * rows * I floats.
void run_expert(const ExpertWeights& w, const float* x, int64_t rows, float* y, model::FloatBuffer& scratch);

// One contiguous batch of rows for one expert.
struct ExpertBatch {
  const ExpertWeights* weights = nullptr;
  const quant::FormatTraits* format = nullptr;
  const float* x = nullptr;  // [rows, H]
  float* y = nullptr;        // [rows, H]
  int64_t rows = 0;
};

// Runs all batches through the kernel family `kernel` (chosen per MoE call
// from its token count, mlp_kernel.h); batches write disjoint outputs, so the
// result does not depend on the order or thread. Work is split into chunks
// so both cores stay busy even when one expert dominates.
void run_expert_batches(std::span<const ExpertBatch> batches, MlpKernel kernel);

// Whether a format's matmul already runs on eq::default_pool(): such batches
// must run on the calling thread (the pool is not reentrant).
bool matmul_uses_pool(const quant::FormatTraits& format);

}  // namespace eq::exec
