// Real MoE layer inputs for timing: the post-attention-normalized hidden
// states each MoE layer receives while the packed model reads evaluation
// text, so the latency sweep and tune route tokens the way real text does.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "model/float_buffer.h"

namespace eq::exec {

class PackedModel;

struct MoeInputs {
  int64_t rows = 0, hidden = 0;
  std::map<int64_t, model::FloatBuffer> by_layer;  // MoE layer -> [rows, hidden]
};

// Runs `tokens` (cut into windows of `ctx`) through the packed model and
// keeps the first `rows` inputs of every MoE layer (fewer if the text is
// shorter; then the rows are repeated to reach `rows`).
MoeInputs capture_moe_inputs(PackedModel& pm, std::span<const int32_t> tokens, int64_t rows, int64_t ctx);

}  // namespace eq::exec
