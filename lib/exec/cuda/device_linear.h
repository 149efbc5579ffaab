// The model's dense matrices on the GPU (`--device cuda`, issue #41's third
// slice): every attention projection, dense MLP, shared expert and the
// logits' matrix that the packed folder stores as floats runs as a
// model::LinearOp whose copy lives on the GPU. Each apply copies x to the
// GPU, runs the float32 product (dense_product; no TF32) and copies y back (the
// products of one x, as q, k and v, share the copies: apply_shared), so the
// forward around it (norms, RoPE, the attention scores, the router) is the
// CPU's and the results differ from the CPU's only by the products' order of
// summation.
//
// A matrix is read through the model's WeightStore and copied to the GPU on
// its first use (as bf16 when that holds its values exactly: device_matrix),
// then kept for the model's life (the float32 copy in host
// memory is the store's, released with its layer as before). A matrix that
// does not fit beside gpu_headroom_bytes() of free GPU memory stays on the
// CPU, its op then the CPU's product, and is counted apart.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
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

// A dense matrix on the GPU, [rows, cols] row-major: float32, or bfloat16
// when every value of the store's float32 matrix is one (a checkpoint stored
// in bf16): the same values in half the bytes.
struct DenseMatrix {
  const void* w = nullptr;
  int64_t rows = 0, cols = 0;
  bool bf16 = false;
  explicit operator bool() const { return w != nullptr; }
};

// The GPU copy of an op of device_dense_ops, copied there first if it was not
// yet; empty for any other op and for one whose matrix stays on the CPU for
// want of room. EXPERTQUANT_GPU_DENSE_BF16=0 (read at each copy) keeps every
// copy float32, for measurement.
DenseMatrix device_matrix(const model::LinearOp* op);

// y [n, rows] = x [n, cols] W^T (device arrays; x 16-byte aligned, as a
// DeviceBuffer's start is, its rows cols floats apart) on `stream` (a cudaStream_t;
// null: the thread's default stream), in float32 arithmetic on W's values: a
// bf16 W at most kDenseRowsMax rows of x through a kernel of its own that
// reads the bf16 values (decode: half the bytes of float32), else cuBLAS's
// float32 product (a bf16 W widened to float32 a chunk of rows at a time into
// `scratch`, grown to at most 32 MiB).
inline constexpr int64_t kDenseRowsMax = 8;
void dense_product(const DenseMatrix& w, const float* x, float* y, int64_t n, void* stream, DeviceBuffer& scratch);

// ys[i] = x W_i^T for matrices of one width (q, k and v of one x): the same
// values as a dense_product each, kMaxDenseLaunch matrices a launch when every
// W is bf16 and x has at most kDenseRowsMax rows (a launch each costs a decode
// step more than its bytes).
inline constexpr int kMaxDenseLaunch = 4;
void dense_products(std::span<const DenseMatrix> ws, const float* x, float* const* ys, int64_t n, void* stream,
                    DeviceBuffer& scratch);

// A small float tensor (a norm's weight, a bias) copied to the GPU; empty for
// null.
DeviceBuffer device_copy(const model::Tensor32Ptr& t);

// `t` [rows, cols] copied into `storage` as a DenseMatrix, bf16 when every
// value is one, as device_matrix's (EXPERTQUANT_GPU_DENSE_BF16=0: float32):
// for a matrix that is no op of device_dense_ops (a MoE layer's router).
DenseMatrix device_dense_copy(const model::Tensor32Ptr& t, int64_t rows, int64_t cols, DeviceBuffer& storage);

// Bytes of weights copied to the GPU by every such op so far (bf16 or
// float32 as stored there), and float32 bytes kept on the CPU for want of
// GPU memory.
uint64_t device_dense_bytes();
uint64_t device_dense_cpu_bytes();

}  // namespace eq::exec::cuda
