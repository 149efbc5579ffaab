// The attention of each query over its visible keys on the GPU (causal,
// sliding window, sink logit), grouped-query or latent (device_layers.cu's
// layers call it): an online softmax, a block a (row, head), the keys split
// into parts at a decode step's few rows.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "exec/cuda/device_exec.h"

namespace eq::exec::cuda {

// Widths the kernel takes: a head's values (and keys) at most kMaxHeadDim, a
// score's (latent attention: kv_lora + rope) at most kMaxScoreDim.
inline constexpr int kMaxHeadDim = 512;
// Where a head's query, keys, values and output lie: grouped-query attention
// (keys and values of dim head_dim, a group of query heads a key head) and
// latent attention in the latent space (queries [W_kᵀ q_nope | q_rope] of
// dim kv_lora + rope against the cached rows, values their first kv_lora
// values, every head on the one cached row).
struct AttentionShape {
  int heads = 0, group = 1;   // query heads; query heads a key head serves
  int q_dim = 0, v_dim = 0;   // the score's and the value's widths
  int64_t q_row = 0, q_head = 0;      // strides of q between rows and heads
  int64_t kv_row = 0;                 // cache floats a position
  int64_t k_group = 0, v_group = 0;   // offset of a key head's keys / values in a position
  int64_t out_row = 0, out_head = 0;  // strides of the output
};

inline constexpr int kMaxScoreDim = 1024;

// out[r, head] = softmax(scale q·k_j over the visible keys j [, sink]) · v_j
// for the n rows (row r = b * seq_len + t at position *start + t; window 0:
// every earlier key) against the caches ([batch][capacity][kv_row], one
// buffer or two), on stream `st`; `parts` and `done` hold the key parts'
// partials and counts (grown here, kept between calls).
void launch_attention(const float* q, const float* keys, const float* values, float* out, const AttentionShape& a,
                      int64_t n, int64_t seq_len, const int64_t* start, int64_t capacity, float scale,
                      int64_t window, const float* sinks, DeviceBuffer& parts, DeviceBuffer& done, cudaStream_t st);

}  // namespace eq::exec::cuda
