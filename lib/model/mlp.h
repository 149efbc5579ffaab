// Gated MLP: down(act(gate x + b_gate, up x + b_up)) + b_down, SwiGLU without
// biases unless MlpWeights says otherwise. Used by dense layers, the shared
// expert, and (single-threaded, on a row block) by each routed expert.
#pragma once

#include <cstdint>
#include <vector>

#include "model/float_buffer.h"
#include "model/weights.h"

namespace eq::model {

// x: [n, H] -> out: [n, H]; parallel over rows on the default pool.
void mlp_forward(const MlpWeights& w, const float* x, int64_t n, int64_t hidden, float* out);

// Single-threaded variant for a task that already runs on the pool. `scratch`
// is resized as needed (2 * n * intermediate floats).
void mlp_forward_serial(const MlpWeights& w, const float* x, int64_t n, int64_t hidden, float* out,
                        FloatBuffer& scratch);

}  // namespace eq::model
