// One routed expert on a batch of rows through its format's kernels:
//   y = down(act(gate x + gate_bias, up x + up_bias)) + down_bias
// (ExpertWeights; SwiGLU without biases for every checkpoint before gpt-oss).
// Every kernel adds the gate/up biases where it applies the activation
// (model::kernels::glu_rows, outside the GEMM loops) and the down bias once
// per row after its down matmul (add_bias_rows), so a row's result still
// depends only on (expert, x row) and the dispatch strategies keep equal bits.
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

// Choices of the batch kernel made once per MoE call, from quantities every
// dispatch strategy shares (never from one expert's row count, which
// mask-combine changes), so all strategies keep the same bits.
struct BatchOptions {
  // Experts of rotated-basis formats (trellis) through int8 codes and
  // vpdpbusd (batch_mlp.cpp run_rotated) instead of fp32 panels: faster from
  // about 8 rows per expert, slower below (the code conversion costs more
  // than the GEMM saves).
  bool rotated_int8 = true;
};
// The options for a call of `tokens` tokens routed top_k of num_experts:
// rotated_int8 when the mean rows per expert is at least kRotatedInt8MinRows.
inline constexpr int64_t kRotatedInt8MinRows = 8;
inline BatchOptions batch_options_for(int64_t tokens, int64_t top_k, int64_t num_experts) {
  return {.rotated_int8 = tokens * top_k >= kRotatedInt8MinRows * num_experts};
}

// Runs all batches through the kernel family `kernel` (chosen per MoE call
// from its token count, mlp_kernel.h); batches write disjoint outputs, so the
// result does not depend on the order or thread. Work is split into chunks
// so both cores stay busy even when one expert dominates.
void run_expert_batches(std::span<const ExpertBatch> batches, MlpKernel kernel, const BatchOptions& options = {});

// y[r * ldy + c] += bias[c] for r < rows, c < n; nothing when bias is null.
void add_bias_rows(const float* bias, int64_t n, float* y, int64_t rows, int64_t ldy);

}  // namespace eq::exec
