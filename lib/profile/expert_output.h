// One routed expert on a block of rows, as the profile measures it: its
// projections through Eigen, then the expert's own activation and biases
// (model::MlpWeights: SwiGLU, or gpt-oss's clamped SwiGLU with gate/up/down
// biases) through the reference forward's activation kernel.
#pragma once

#include <cstdint>

#include <Eigen/Core>

#include "model/weights.h"

namespace eq::profile {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct ExpertOutput {
  RowMatrix mid;  // [rows, I]: act(gate x + b_gate, up x + b_up), the input of down
  RowMatrix y;    // [rows, H]: down · mid + b_down
};

// x: [rows, H] row-major. gate/up/down: the expert's float32 matrices (which
// may be quantized round trips of w's); biases and activation from w.
ExpertOutput expert_output(const model::MlpWeights& w, const float* gate, const float* up, const float* down,
                           const float* x, int64_t rows, int64_t hidden);
inline ExpertOutput expert_output(const model::MlpWeights& w, const float* x, int64_t rows, int64_t hidden) {
  return expert_output(w, w.gate->data.data(), w.up->data.data(), w.down->data.data(), x, rows, hidden);
}

}  // namespace eq::profile
