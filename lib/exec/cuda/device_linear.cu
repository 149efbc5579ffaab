// A dense matrix on the GPU as a model::LinearOp (device_linear.h).
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "core/env_switch.h"
#include "core/error.h"
#include "core/numeric.h"
#include "exec/cuda/device_exec.h"
#include "exec/cuda/device_linear.h"
#include "exec/cuda/row_kernels.cuh"
#include "model/ops.h"
#include "model/weights.h"
#include "quant/cuda/cuda_common.cuh"
#include "quant/cuda/gemm_dense.cuh"
#include "quant/cuda/gemv_common.cuh"

namespace eq::exec::cuda {

namespace {

std::atomic<uint64_t> g_dense_bytes{0}, g_dense_cpu_bytes{0};

using quant::cuda::check_launch;
using quant::cuda::stream_of;

// A bf16 value as float: its bits in the high half (exact).
__device__ inline float widened(uint16_t b) { return __uint_as_float(static_cast<uint32_t>(b) << 16); }

// Up to kMaxDenseLaunch bf16 matrices of one width, each with its output:
// one launch of bf16_rows_kernel, matrix i taking blocks [first[i], first[i+1]).
struct Bf16Rows {
  const uint16_t* w[kMaxDenseLaunch];
  float* y[kMaxDenseLaunch];
  int64_t rows[kMaxDenseLaunch];
  unsigned first[kMaxDenseLaunch + 1];
  int count = 0;
};

// y[t, row] = sum_c x[t, c] w[row, c] for kM rows t of x: a warp a row of W
// (8 a block), each lane 8 consecutive bf16 at a time (cols a multiple of 8)
// or one (else), in float32; the lanes' sums joined by a butterfly.
constexpr int kDenseWarps = 8;
template <int kM>
__global__ void __launch_bounds__(32 * kDenseWarps) bf16_rows_kernel(const Bf16Rows m, const float* x, int64_t cols) {
  quant::cuda::start_after_previous_grid();
  int i = 0;
  while (i + 1 < m.count && blockIdx.x >= m.first[i + 1]) ++i;
  const int64_t rows = m.rows[i];
  const int64_t row = static_cast<int64_t>(blockIdx.x - m.first[i]) * kDenseWarps + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (row >= rows) return;
  float* y = m.y[i];
  const uint16_t* wr = m.w[i] + row * cols;
  float acc[kM];
#pragma unroll
  for (int t = 0; t < kM; ++t) acc[t] = 0.0f;
  if (cols % 8 == 0) {
#pragma unroll 4
    for (int64_t c = 8 * lane; c < cols; c += 256) {
      const uint4 packed = *reinterpret_cast<const uint4*>(wr + c);
      const uint32_t words[4] = {packed.x, packed.y, packed.z, packed.w};
      float wf[8];
#pragma unroll
      for (int i = 0; i < 4; ++i) {  // the lower bf16 of each word first, as stored
        wf[2 * i] = widened(static_cast<uint16_t>(words[i]));
        wf[2 * i + 1] = widened(static_cast<uint16_t>(words[i] >> 16));
      }
#pragma unroll
      for (int t = 0; t < kM; ++t) {
        const float4 a = *reinterpret_cast<const float4*>(x + t * cols + c);
        const float4 b = *reinterpret_cast<const float4*>(x + t * cols + c + 4);
        acc[t] += wf[0] * a.x + wf[1] * a.y + wf[2] * a.z + wf[3] * a.w + wf[4] * b.x + wf[5] * b.y + wf[6] * b.z +
                  wf[7] * b.w;
      }
    }
  } else {
    for (int64_t c = lane; c < cols; c += 32) {
      const float wf = widened(wr[c]);
#pragma unroll
      for (int t = 0; t < kM; ++t) acc[t] += wf * x[t * cols + c];
    }
  }
#pragma unroll
  for (int t = 0; t < kM; ++t) {
    float v = acc[t];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) y[t * rows + row] = v;
  }
}

__global__ void widen_kernel(const uint16_t* w, float* out, int64_t count) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = widened(w[i]);
}

template <int kM>
void launch_bf16_rows(const Bf16Rows& m, const float* x, int64_t cols, cudaStream_t s) {
  quant::cuda::launch_kernel("bf16 rows kernel", bf16_rows_kernel<kM>, dim3(m.first[m.count]), dim3(32 * kDenseWarps),
                             0, s, m, x, cols);
}

// ys[i] = x W_i^T through one launch of bf16_rows_kernel for n rows of x.
void bf16_rows(std::span<const DenseMatrix> ws, const float* x, float* const* ys, int64_t n, cudaStream_t s) {
  Bf16Rows m;
  m.count = static_cast<int>(ws.size());
  m.first[0] = 0;
  for (int i = 0; i < m.count; ++i) {
    m.w[i] = static_cast<const uint16_t*>(ws[i].w);
    m.y[i] = ys[i];
    m.rows[i] = ws[i].rows;
    m.first[i + 1] = m.first[i] + static_cast<unsigned>((ws[i].rows + kDenseWarps - 1) / kDenseWarps);
  }
  const int64_t cols = ws[0].cols;
  switch (n) {
    case 1: return launch_bf16_rows<1>(m, x, cols, s);
    case 2: return launch_bf16_rows<2>(m, x, cols, s);
    case 3: return launch_bf16_rows<3>(m, x, cols, s);
    case 4: return launch_bf16_rows<4>(m, x, cols, s);
    case 5: return launch_bf16_rows<5>(m, x, cols, s);
    case 6: return launch_bf16_rows<6>(m, x, cols, s);
    case 7: return launch_bf16_rows<7>(m, x, cols, s);
    case 8: return launch_bf16_rows<8>(m, x, cols, s);
    default: break;
  }
  static_assert(kDenseRowsMax == 8, "the switch above covers 1 .. kDenseRowsMax rows");
  EQ_CHECK(false, "bf16 rows kernel: " + std::to_string(n) + " rows of x, more than " + std::to_string(kDenseRowsMax));
}

// The bf16 values of `t` when each of its floats is one (a checkpoint stored
// in bf16), else none.
std::vector<uint16_t> exact_bf16(const model::FloatBuffer& t) {
  std::vector<uint16_t> half(t.size());
  convert_f32_to_bf16(t.data(), half.data(), half.size());
  for (size_t i = 0; i < half.size(); ++i)
    if (std::bit_cast<uint32_t>(bf16_to_f32(half[i])) != std::bit_cast<uint32_t>(t[i])) return {};
  return half;
}

// `t` copied into `storage`: bf16 when exact_bf16 gives its values and
// EXPERTQUANT_GPU_DENSE_BF16 is not 0 (read at each copy), else float32.
// Returns whether the copy is bf16.
bool upload_dense(const model::FloatBuffer& t, DeviceBuffer& storage) {
  const std::vector<uint16_t> half =
      env_switch("EXPERTQUANT_GPU_DENSE_BF16", true) ? exact_bf16(t) : std::vector<uint16_t>{};
  if (half.empty()) {
    storage = DeviceBuffer(t.size() * sizeof(float));
    storage.upload(t.data(), t.size() * sizeof(float));
    return false;
  }
  storage = DeviceBuffer(half.size() * sizeof(uint16_t));
  storage.upload(half.data(), half.size() * sizeof(uint16_t));
  return true;
}

// The operands' device and page-locked host buffers, one set for every op of
// the process (a model has hundreds of ops; each its own set would hold a
// prefill's rows hundreds of times); the ops take turns.
struct Operands {
  std::mutex mu;
  DeviceBuffer x, y, wide;  // wide: dense_product's scratch
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

  // The GPU copy, placed first if it was not; empty when it stays on the CPU.
  DenseMatrix on_gpu() const {
    std::lock_guard<std::mutex> lock(mu_);
    if (!placed_) place_weights();
    return host_ ? DenseMatrix{} : matrix();
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
  // trip for all (run_on_gpu). Each product gives the values of its apply()'s
  // (dense_products), so each result is the same.
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
    std::vector<DenseMatrix> ws;
    std::vector<float*> outs;
    for (const DeviceLinear* d : ops) {
      ws.push_back(d->matrix());
      outs.push_back(o.y.floats() + at);
      at += static_cast<size_t>(n * d->rows_);
    }
    dense_products(ws, o.x.floats(), outs.data(), n, nullptr, o.wide);
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
    bf16_ = upload_dense(t->data, w_);
    g_dense_bytes += w_.size();
  }

  DenseMatrix matrix() const { return {w_.data(), rows_, cols_, bf16_}; }

  std::string name_;
  int64_t rows_, cols_;
  std::shared_ptr<const DenseWeights> weights_;
  mutable std::mutex mu_;
  mutable bool placed_ = false;
  mutable DeviceBuffer w_;          // on the GPU (bf16 when bf16_), or
  mutable bool bf16_ = false;
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

DenseMatrix device_matrix(const model::LinearOp* op) {
  const auto* d = dynamic_cast<const DeviceLinear*>(op);
  return d ? d->on_gpu() : DenseMatrix{};
}

void dense_product(const DenseMatrix& w, const float* x, float* y, int64_t n, void* stream, DeviceBuffer& scratch) {
  const cudaStream_t s = stream_of(stream);
  if (n <= 0) return;
  if (!w.bf16) {
    quant::cuda::f32_gemm(x, static_cast<const float*>(w.w), y, n, w.rows, w.cols, s);
    return;
  }
  if (n <= kDenseRowsMax) return bf16_rows({&w, 1}, x, &y, n, s);
  // Widened a chunk of rows at a time: the product of the same float32 values.
  constexpr int64_t kChunkBytes = int64_t{32} << 20;
  const int64_t chunk = std::clamp<int64_t>(kChunkBytes / (w.cols * 4), 1, w.rows);
  grow(scratch, static_cast<size_t>(chunk * w.cols) * sizeof(float), stream);
  const auto* bits = static_cast<const uint16_t*>(w.w);
  for (int64_t r0 = 0; r0 < w.rows; r0 += chunk) {
    const int64_t rc = std::min(chunk, w.rows - r0);
    widen_kernel<<<elementwise_blocks(rc * w.cols), 256, 0, s>>>(bits + r0 * w.cols, scratch.floats(), rc * w.cols);
    check_launch("widen bf16 rows");
    quant::cuda::f32_gemm(x, scratch.floats(), y + r0, n, rc, w.cols, s, w.rows);
  }
}

DeviceBuffer device_copy(const model::Tensor32Ptr& t) {
  if (!t) return {};
  DeviceBuffer d(t->data.size() * sizeof(float));
  d.upload(t->data.data(), t->data.size() * sizeof(float));
  return d;
}

DenseMatrix device_dense_copy(const model::Tensor32Ptr& t, int64_t rows, int64_t cols, DeviceBuffer& storage) {
  EQ_CHECK(t != nullptr && static_cast<int64_t>(t->data.size()) == rows * cols,
           "GPU copy of a [" + std::to_string(rows) + ", " + std::to_string(cols) + "] matrix: " +
               (t ? std::to_string(t->data.size()) + " values" : std::string("none")));
  const bool bf16 = upload_dense(t->data, storage);
  return {storage.data(), rows, cols, bf16};
}

void dense_products(std::span<const DenseMatrix> ws, const float* x, float* const* ys, int64_t n, void* stream,
                    DeviceBuffer& scratch) {
  bool shared = n >= 1 && n <= kDenseRowsMax;
  for (const DenseMatrix& w : ws) shared = shared && w.bf16 && w.cols == ws[0].cols;
  if (!shared) {
    for (size_t i = 0; i < ws.size(); ++i) dense_product(ws[i], x, ys[i], n, stream, scratch);
    return;
  }
  for (size_t i = 0; i < ws.size(); i += kMaxDenseLaunch)  // a launch takes kMaxDenseLaunch
    bf16_rows(ws.subspan(i, std::min<size_t>(kMaxDenseLaunch, ws.size() - i)), x, ys + i, n, stream_of(stream));
}

uint64_t device_dense_bytes() { return g_dense_bytes.load(); }
uint64_t device_dense_cpu_bytes() { return g_dense_cpu_bytes.load(); }

}  // namespace eq::exec::cuda
