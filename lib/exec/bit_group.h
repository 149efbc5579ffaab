// The packed experts of one MoE layer as the executor sees them: experts
// grouped by format into BitGroups (one stacked tensor per projection and
// part, a slot per expert), an expert-id -> (group, slot) map, and the pruned
// experts, which the router never selects. Everything points into the mmap'd
// shards of the packed folder; nothing is copied.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "model/activation.h"
#include "quant/format.h"

namespace eq::exec {

// One expert's three projections, gate, up [I, H] and down [H, I], and its
// MLP's shape: y = down(act(gate x + gate_bias, up x + up_bias)) + down_bias.
// The biases are float32 ([I], [I], [H]) in memory the packed layer owns;
// null = none (SwiGLU without biases is every checkpoint before gpt-oss).
struct ExpertWeights {
  quant::PackedMatrix gate, up, down;
  const float* gate_bias = nullptr;
  const float* up_bias = nullptr;
  const float* down_bias = nullptr;
  model::Activation act{};  // braces: aggregate inits naming only the matrices stay warning-free
};

struct BitGroup {
  int id = 0;
  const quant::FormatTraits* format = nullptr;
  std::vector<int64_t> expert_ids;    // slot -> expert id
  std::vector<ExpertWeights> slots;   // slot -> weights
  uint64_t bytes = 0;                 // packed bytes of all its experts
};

struct ExpertLocation {
  int group = -1, slot = -1;  // -1: pruned
};

// A process-wide serial for each PackedLayer made: what the GPU's copy of a
// layer is keyed by (exec/cuda/cuda_dispatch.cu), since an address can be
// another layer's once the first is freed, and moves change it.
inline uint64_t next_packed_layer_serial() {
  static std::atomic<uint64_t> next{1};
  return next++;
}

struct PackedLayer {
  uint64_t serial = next_packed_layer_serial();
  int64_t layer = 0;
  int64_t num_experts = 0;
  std::vector<BitGroup> groups;
  std::vector<ExpertLocation> experts;  // index = expert id
  // Ascending ids of the experts that were not pruned; routing picks among
  // these only (empty pruned set: every expert).
  std::vector<int32_t> survivors;
  // Per projection (gate, up, down) the routed experts' biases, [E * out]
  // expert-major, or empty when the model has none; the slots' bias pointers
  // point into them (a moved PackedLayer keeps its buffers).
  std::vector<float> expert_bias[3];
  bool any_pruned() const { return static_cast<int64_t>(survivors.size()) != num_experts; }

  const ExpertWeights& expert(int32_t e) const {
    const ExpertLocation& at = experts[static_cast<size_t>(e)];
    return groups[static_cast<size_t>(at.group)].slots[static_cast<size_t>(at.slot)];
  }
  const quant::FormatTraits& format_of(int32_t e) const {
    return *groups[static_cast<size_t>(experts[static_cast<size_t>(e)].group)].format;
  }
};

}  // namespace eq::exec
