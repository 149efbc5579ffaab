// Which expert-MLP kernel family runs a MoE call, chosen once per call from
// M = the tokens in that call: decode (a few tokens, one row per weight pass:
// reading the weights sets the time), small-batch (up to 4 rows of an expert
// share one weight pass) and batch (decoded panels times many contiguous rows,
// a GEMM); docs/design.md, "Kernel selection by M: decode, small-batch,
// batch". The choice depends on M only, never on the dispatch strategy or
// on how many rows one expert receives, so mask-combine, sorted and auto run
// every row of a call through the same kernel and stay numerically equal.
#pragma once

#include <cstdint>
#include <string_view>

namespace eq::exec {

enum class MlpKernel {
  kDecode,      // few tokens: int8 activations, fused gate/up + SwiGLU + down, one row per weight pass (lib/exec/decode_mlp.*)
  kSmallBatch,  // the decode kernels on up to 4 rows of an expert per weight pass (same bits per row as kDecode)
  kBatch,       // many tokens: decoded panels x contiguous rows, register-blocked GEMM (lib/exec/batch_mlp.*)
};

// Thresholds measured by `expertquant tune` and stored in the runtime config (runtime_config.h).
struct MlpKernelThresholds {
  // Calls with M <= decode_max_tokens use kDecode.
  int64_t decode_max_tokens = 0;
  // Calls with decode_max_tokens < M <= small_batch_max_tokens use kSmallBatch.
  int64_t small_batch_max_tokens = 0;
};

inline MlpKernel select_mlp_kernel(int64_t tokens, const MlpKernelThresholds& t) {
  if (tokens <= t.decode_max_tokens) return MlpKernel::kDecode;
  if (tokens <= t.small_batch_max_tokens) return MlpKernel::kSmallBatch;
  return MlpKernel::kBatch;
}


// For messages and test labels.
inline std::string_view mlp_kernel_name(MlpKernel k) {
  switch (k) {
    case MlpKernel::kDecode: return "decode";
    case MlpKernel::kSmallBatch: return "small-batch";
    case MlpKernel::kBatch: return "batch";
  }
  return "?";
}

}  // namespace eq::exec
