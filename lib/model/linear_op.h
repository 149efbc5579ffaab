// A weight matrix the forward pass applies through its own kernel instead of
// a float32 tensor of the checkpoint: the packed executor's quantized
// attention projections and lm_head (`pack --attn-format`), which run through
// the format registry's matmul on the packed bytes, and the dense matrices
// that run on a GPU (`--device cuda`, exec/cuda/device_linear.h).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>

namespace eq::model {

class LinearOp {
 public:
  virtual ~LinearOp() = default;
  virtual int64_t rows() const = 0;  // output features (N of W [N, K])
  virtual int64_t cols() const = 0;  // input features (K)
  // y[n, rows] = x[n, cols] · Wᵀ (no bias; the caller adds it). Called from the
  // forward's own thread, never from inside a pool task.
  virtual void apply(const float* x, int64_t n, float* y) const = 0;
  // ys[i][n, ops[i]->rows()] = x · W_iᵀ for ops[0] (this op) and the others,
  // all taking x[n, cols()], in one go where the op knows how (GPU ops: one
  // copy of x to the GPU, one of the results back), each result equal to its
  // apply()'s. Returns false, having done nothing, where it does not.
  virtual bool apply_shared(std::span<const LinearOp* const> /*ops*/, const float* /*x*/, int64_t /*n*/,
                            float* const* /*ys*/) const {
    return false;
  }
  // Whether the op stands in for a tensor the checkpoint does not hold as
  // floats (a quantized matrix), or runs the stored tensor elsewhere (a GPU
  // copy of it), so the checkpoint must still hold it as the config says.
  virtual bool replaces_tensor() const { return true; }
};

// Keyed by the name of the checkpoint tensor each replaces
// ("model.layers.0.self_attn.q_proj.weight", "lm_head.weight").
using LinearOps = std::map<std::string, std::shared_ptr<const LinearOp>>;

}  // namespace eq::model
