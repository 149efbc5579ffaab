// What a dispatch strategy reads from memory for one MoE call, counted from
// the routing (not measured): the packed weight bytes it streams and the
// activation bytes it moves. Reported beside the latency sweep, because the
// mask-combine cost is mostly this traffic multiplied by groups.
//   sorted        each routed expert's weights once; gather + scatter of the rows
//   per-token     each pair streams its expert's weights; its row in and out
//   mask-combine  per group: its routed experts (after remapping) once, every
//                 pair's rows gathered and scattered, and the masked add of
//                 every pair's output (read group result, read + write output)
#pragma once

#include <cstdint>

#include "exec/dispatch.h"

namespace eq::exec {

struct BytesRead {
  uint64_t weights = 0, activations = 0;
  uint64_t total() const { return weights + activations; }
};

// Packed bytes of one expert's three matrices.
uint64_t expert_bytes(const ExpertWeights& w);

BytesRead estimate_bytes_read(const Dispatch& dispatch, const PackedLayer& layer, const int32_t* expert_ids,
                              int64_t tokens, int64_t top_k, int64_t hidden);

}  // namespace eq::exec
