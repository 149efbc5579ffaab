// A dense float32 matrix on the GPU as a model::LinearOp (device_linear.h).
#include <cuda_runtime.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "core/env_switch.h"
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

// EXPERTQUANT_GPU_SHARED_PROJECTIONS=0 runs every product alone (for
// measurement). Read once.
bool sharing_enabled() {
  static const bool enabled = env_switch("EXPERTQUANT_GPU_SHARED_PROJECTIONS", true);
  return enabled;
}

// The results of a shared apply on the host, before they go to their
// outputs (under Operands::mu).
std::vector<float>& shared_results() {
  static std::vector<float> v;
  return v;
}

class DeviceLinear final : public model::LinearOp {
 public:
  DeviceLinear(std::string name, int64_t rows, int64_t cols, std::shared_ptr<const DenseWeights> weights)
      : name_(std::move(name)), rows_(rows), cols_(cols), weights_(std::move(weights)) {}

  int64_t rows() const override { return rows_; }
  int64_t cols() const override { return cols_; }
  bool replaces_tensor() const override { return false; }

  // The GPU copy, placed first if it was not; null when it stays on the CPU.
  const float* on_gpu() const {
    std::lock_guard<std::mutex> lock(mu_);
    if (!placed_) place_weights();
    return host_ ? nullptr : w_.floats();
  }

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
    const DeviceLinear* self = this;
    run_on_gpu({&self, 1}, x, n, &y);
  }

  // Every op a DeviceLinear of this x whose matrix is on the GPU: one round
  // trip for all (run_on_gpu). Each product is the same cuBLAS call as its
  // apply()'s, so each result is the same.
  bool apply_shared(std::span<const model::LinearOp* const> ops, const float* x, int64_t n,
                    float* const* ys) const override {
    if (!sharing_enabled()) return false;
    std::vector<const DeviceLinear*> mine;
    for (const model::LinearOp* op : ops) {
      const auto* d = dynamic_cast<const DeviceLinear*>(op);
      if (d == nullptr || d->cols_ != cols_) return false;
      mine.push_back(d);
    }
    for (const DeviceLinear* d : mine) {
      std::lock_guard<std::mutex> lock(d->mu_);
      if (!d->placed_) d->place_weights();
      if (d->host_) return false;
    }
    if (n > 0) run_on_gpu(mine, x, n, ys);
    return true;
  }

 private:
  // ys[i] = x ops[i]^T for ops of one width whose matrices are on the GPU: x
  // goes over once, the products run one after another into one buffer, and
  // the results come back in one copy (straight into ys[0] for one op).
  static void run_on_gpu(std::span<const DeviceLinear* const> ops, const float* x, int64_t n, float* const* ys) {
    const int64_t cols = ops[0]->cols_;
    size_t out_floats = 0;
    for (const DeviceLinear* d : ops) out_floats += static_cast<size_t>(n * d->rows_);
    Operands& o = operands();
    std::lock_guard<std::mutex> lock(o.mu);
    grow(o.x, static_cast<size_t>(n * cols) * sizeof(float));
    grow(o.y, out_floats * sizeof(float));
    copy_to_device(o.x.data(), x, static_cast<size_t>(n * cols) * sizeof(float), o.x_staging);
    size_t at = 0;
    for (const DeviceLinear* d : ops) {
      quant::cuda::f32_gemm(o.x.floats(), d->w_.floats(), o.y.floats() + at, n, d->rows_, cols,
                            quant::cuda::stream_of(nullptr));
      at += static_cast<size_t>(n * d->rows_);
    }
    if (ops.size() == 1) {
      copy_from_device(ys[0], o.y.data(), out_floats * sizeof(float), o.y_staging);
      return;
    }
    std::vector<float>& all = shared_results();
    all.resize(out_floats);
    copy_from_device(all.data(), o.y.data(), out_floats * sizeof(float), o.y_staging);
    at = 0;
    for (size_t i = 0; i < ops.size(); ++i) {
      const size_t count = static_cast<size_t>(n * ops[i]->rows_);
      std::memcpy(ys[i], all.data() + at, count * sizeof(float));
      at += count;
    }
  }

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

const float* device_matrix(const model::LinearOp* op) {
  const auto* d = dynamic_cast<const DeviceLinear*>(op);
  return d ? d->on_gpu() : nullptr;
}

DeviceBuffer device_copy(const model::Tensor32Ptr& t) {
  if (!t) return {};
  DeviceBuffer d(t->data.size() * sizeof(float));
  d.upload(t->data.data(), t->data.size() * sizeof(float));
  return d;
}

uint64_t device_dense_bytes() { return g_dense_bytes.load(); }
uint64_t device_dense_cpu_bytes() { return g_dense_cpu_bytes.load(); }

}  // namespace eq::exec::cuda
