// The parts of a MoE block that do not depend on how the experts are run:
// combining the slots' expert outputs with their gate weights, the (gated)
// shared expert, and reporting to the observer. The reference block and
// the packed executor's block both use them, so they stay the same function.
#pragma once

#include <cstdint>

#include "model/config.h"
#include "model/float_buffer.h"
#include "model/moe_block.h"
#include "model/routing.h"
#include "model/weights.h"

namespace eq::model {

// out[t] = Σ_j weights[t, j] · slot_out[t, j], summed in slot order (so the
// result does not depend on which thread or strategy produced slot_out).
void combine_slots(const Routing& routing, const float* slot_out, int64_t tokens, int64_t top_k, int64_t hidden,
                   float* out);

// Adds g · shared_mlp(x) to out, g = sigmoid(x · shared_gateᵀ) when the
// architecture gates it, else 1, and returns that term ([tokens, hidden]);
// empty, with out untouched, when the architecture has no shared expert.
FloatBuffer add_shared_expert(const ModelConfig& c, const WeightStore& w, int64_t layer, const float* x,
                              int64_t tokens, float* out);

// Reports a finished block to call.observer (no-op without one).
void report_moe_block(const MoeCall& call, const ModelConfig& c, const float* x, const float* router_logits,
                      const Routing& routing, const float* slot_out, const FloatBuffer& shared, const float* out);

}  // namespace eq::model
