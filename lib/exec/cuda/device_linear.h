// The model's dense matrices on the GPU (`--device cuda`, issue #41's third
// slice): every attention projection, dense MLP, shared expert and the
// logits' matrix that the packed folder stores as floats runs as a
// model::LinearOp whose float32 copy lives on the GPU. Each apply copies x to
// the GPU, runs cuBLAS's float32 product (no TF32) and copies y back (the
// products of one x, as q, k and v, share the copies: apply_shared), so the
// forward around it (norms, RoPE, the attention scores, the router) is the
// CPU's and the results differ from the CPU's only by the products' order of
// summation.
//
// A matrix is read through the model's WeightStore and copied to the GPU on
// its first use, then kept for the model's life (the float32 copy in host
// memory is the store's, released with its layer as before). A matrix that
// does not fit beside gpu_headroom_bytes() of free GPU memory stays on the
// CPU, its op then the CPU's product, and is counted apart.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "exec/cuda/device_exec.h"
#include "model/config.h"
#include "model/linear_op.h"
#include "model/weights.h"

namespace eq::model {
class WeightStore;
}

namespace eq::exec::cuda {

// Where the ops find their weights: set once the model they belong to is
// built (the ops are handed to it before it exists).
struct DenseWeights {
  const model::WeightStore* store = nullptr;
};

struct DeviceDenseOps {
  model::LinearOps ops;                    // by tensor name
  std::shared_ptr<DenseWeights> weights;   // bind: weights->store = &model.weights()
};

// A GPU op for each of model::linear_matrices(c) that `stored(name)` says the
// checkpoint holds and `skip` does not (the quantized ones already have ops).
// Throws eq::Error (unsupported) in a build without CUDA.
DeviceDenseOps device_dense_ops(const model::ModelConfig& c, const std::function<bool(const std::string&)>& stored,
                                const model::LinearOps& skip);

// The GPU copy of an op of device_dense_ops ([rows, cols] float32,
// row-major), copied there first if it was not yet; null for any other op
// and for one whose matrix stays on the CPU for want of room.
const float* device_matrix(const model::LinearOp* op);

// A small float tensor (a norm's weight, a bias) copied to the GPU; empty for
// null.
DeviceBuffer device_copy(const model::Tensor32Ptr& t);

// Bytes of float32 weights copied to the GPU by every such op so far, and
// those kept on the CPU for want of GPU memory.
uint64_t device_dense_bytes();
uint64_t device_dense_cpu_bytes();

}  // namespace eq::exec::cuda
