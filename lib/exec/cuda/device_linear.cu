// A dense float32 matrix on the GPU as a model::LinearOp (device_linear.h).
#include <cuda_runtime.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <string>

#include "core/error.h"
#include "exec/cuda/device_exec.h"
#include "exec/cuda/device_linear.h"
#include "model/ops.h"
#include "model/weights.h"
#include "quant/cuda/cuda_common.cuh"
#include "quant/cuda/gemm_dense.cuh"
#include "quant/cuda/gemv_common.cuh"

namespace eq::exec::cuda {

namespace {

std::atomic<uint64_t> g_dense_bytes{0}, g_dense_cpu_bytes{0};

// The operands' device and page-locked host buffers, one set for every op of
// the process (a model has hundreds of ops; each its own set would hold a
// prefill's rows hundreds of times); the ops take turns.
struct Operands {
  std::mutex mu;
  DeviceBuffer x, y;
  PinnedBuffer x_staging, y_staging;
};
Operands& operands() {
  static Operands o;
  return o;
}

class DeviceLinear final : public model::LinearOp {
 public:
  DeviceLinear(std::string name, int64_t rows, int64_t cols, std::shared_ptr<const DenseWeights> weights)
      : name_(std::move(name)), rows_(rows), cols_(cols), weights_(std::move(weights)) {}

  int64_t rows() const override { return rows_; }
  int64_t cols() const override { return cols_; }
  bool replaces_tensor() const override { return false; }

  void apply(const float* x, int64_t n, float* y) const override {
    if (n <= 0) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!placed_) place_weights();
    }
    if (host_) {  // no room on the GPU: the CPU's product, as without --device cuda
      model::linear(x, n, cols_, host_->data.data(), rows_, nullptr, y);
      return;
    }
    const size_t in_bytes = static_cast<size_t>(n * cols_) * sizeof(float),
                 out_bytes = static_cast<size_t>(n * rows_) * sizeof(float);
    Operands& o = operands();
    std::lock_guard<std::mutex> lock(o.mu);
    grow(o.x, in_bytes);
    grow(o.y, out_bytes);
    copy_to_device(o.x.data(), x, in_bytes, o.x_staging);
    quant::cuda::f32_gemm(o.x.floats(), w_.floats(), o.y.floats(), n, rows_, cols_, quant::cuda::stream_of(nullptr));
    copy_from_device(y, o.y.data(), out_bytes, o.y_staging);
  }

 private:
  // Copies the matrix to the GPU when it fits beside gpu_headroom_bytes() of
  // free memory; otherwise keeps the host tensor and the op runs on the CPU.
  void place_weights() const {
    EQ_CHECK(weights_->store != nullptr, "GPU product of " + name_ + " before its model was built");
    const model::Tensor32Ptr t = weights_->store->get(name_, {rows_, cols_});
    const size_t bytes = static_cast<size_t>(rows_ * cols_) * sizeof(float);
    placed_ = true;
    if (gpu_free_bytes() < bytes + gpu_headroom_bytes()) {
      host_ = t;
      g_dense_cpu_bytes += bytes;
      return;
    }
    w_ = DeviceBuffer(bytes);
    w_.upload(t->data.data(), bytes);
    g_dense_bytes += bytes;
  }

  std::string name_;
  int64_t rows_, cols_;
  std::shared_ptr<const DenseWeights> weights_;
  mutable std::mutex mu_;
  mutable bool placed_ = false;
  mutable DeviceBuffer w_;          // on the GPU, or
  mutable model::Tensor32Ptr host_;  // on the CPU
};

}  // namespace

DeviceDenseOps device_dense_ops(const model::ModelConfig& c, const std::function<bool(const std::string&)>& stored,
                                const model::LinearOps& skip) {
  const std::string why = unavailable_reason();
  if (!why.empty()) unsupported("--device cuda: " + why);
  DeviceDenseOps d;
  d.weights = std::make_shared<DenseWeights>();
  for (const auto& [name, shape] : model::linear_matrices(c))
    if (!skip.count(name) && stored(name))
      d.ops[name] = std::make_shared<DeviceLinear>(name, shape[0], shape[1], d.weights);
  return d;
}

uint64_t device_dense_bytes() { return g_dense_bytes.load(); }
uint64_t device_dense_cpu_bytes() { return g_dense_cpu_bytes.load(); }

}  // namespace eq::exec::cuda
