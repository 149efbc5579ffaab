// A dense float32 matrix on the GPU as a model::LinearOp (device_linear.h).
#include <cuda_runtime.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <string>

#include "core/error.h"
#include "exec/cuda/device_exec.h"
#include "exec/cuda/device_linear.h"
#include "model/weights.h"
#include "quant/cuda/cuda_common.cuh"
#include "quant/cuda/gemm_dense.cuh"
#include "quant/cuda/gemv_common.cuh"

namespace eq::exec::cuda {

namespace {

std::atomic<uint64_t> g_dense_bytes{0};

class DeviceLinear final : public model::LinearOp {
 public:
  DeviceLinear(std::string name, int64_t rows, int64_t cols, std::shared_ptr<const DenseWeights> weights)
      : name_(std::move(name)), rows_(rows), cols_(cols), weights_(std::move(weights)) {}

  int64_t rows() const override { return rows_; }
  int64_t cols() const override { return cols_; }
  bool replaces_tensor() const override { return false; }

  void apply(const float* x, int64_t n, float* y) const override {
    if (n <= 0) return;
    std::lock_guard<std::mutex> lock(mu_);
    const size_t in_bytes = static_cast<size_t>(n * cols_) * sizeof(float),
                 out_bytes = static_cast<size_t>(n * rows_) * sizeof(float);
    if (w_.size() == 0) upload_weights();
    grow(x_, in_bytes);
    grow(y_, out_bytes);
    const cudaStream_t s = quant::cuda::stream_of(nullptr);
    quant::cuda::check(cudaMemcpyAsync(x_.data(), x, in_bytes, cudaMemcpyHostToDevice, s), "copy x to the GPU");
    quant::cuda::f32_gemm(x_.floats(), w_.floats(), y_.floats(), n, rows_, cols_, s);
    quant::cuda::check(cudaMemcpyAsync(y, y_.data(), out_bytes, cudaMemcpyDeviceToHost, s), "copy y from the GPU");
    quant::cuda::check(cudaStreamSynchronize(s), "GPU product");
  }

 private:
  void upload_weights() const {
    EQ_CHECK(weights_->store != nullptr, "GPU product of " + name_ + " before its model was built");
    const model::Tensor32Ptr t = weights_->store->get(name_, {rows_, cols_});
    const size_t bytes = static_cast<size_t>(rows_ * cols_) * sizeof(float);
    w_ = DeviceBuffer(bytes);
    w_.upload(t->data.data(), bytes);
    g_dense_bytes += bytes;
  }

  std::string name_;
  int64_t rows_, cols_;
  std::shared_ptr<const DenseWeights> weights_;
  mutable std::mutex mu_;
  mutable DeviceBuffer w_, x_, y_;
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

}  // namespace eq::exec::cuda
