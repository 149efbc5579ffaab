// Which expert-MLP kernel family runs a MoE call, chosen once per call from
// M = the tokens in that call (seed 004: decode, small-batch and large-batch
// variants). The choice depends on M only, never on the dispatch strategy or
// on how many rows one expert receives, so mask-combine, sorted and auto run
// every row of a call through the same kernel and stay numerically equal.
#pragma once

#include <cstdint>
#include <string_view>

namespace eq::exec {

enum class MlpKernel {
  kDecode,  // few tokens: int8 activations, fused gate/up + SwiGLU + down (lib/exec/decode_mlp.*)
  kBatch,   // many tokens: dequantized panels x contiguous rows (lib/exec/batch_mlp.*)
};

// Thresholds measured by `expertquant tune` and stored in configs/runtime.json.
struct MlpKernelThresholds {
  // Calls with M <= decode_max_tokens use kDecode.
  int64_t decode_max_tokens = 0;
};

inline MlpKernel select_mlp_kernel(int64_t tokens, const MlpKernelThresholds& t) {
  return tokens <= t.decode_max_tokens ? MlpKernel::kDecode : MlpKernel::kBatch;
}

inline std::string_view mlp_kernel_name(MlpKernel k) { return k == MlpKernel::kDecode ? "decode" : "batch"; }

}  // namespace eq::exec
