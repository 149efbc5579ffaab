// The decoder layers on the GPU (device_layers.h).
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/env_switch.h"
#include "core/error.h"
#include "exec/cuda/cuda_dispatch.h"
#include "exec/cuda/device_attention.h"
#include "exec/cuda/device_delta_net.h"
#include "exec/cuda/device_exec.h"
#include "exec/cuda/device_layers.h"
#include "exec/cuda/device_linear.h"
#include "exec/cuda/device_routing.h"
#include "exec/cuda/row_kernels.cuh"
#include "exec/cuda/step_graph.h"
#include "exec/packed_moe_block.h"
#include "model/attention.h"
#include "model/forward.h"
#include "model/mlp.h"
#include "model/routing.h"
#include "model/weights.h"
#include "quant/cuda/cuda_common.cuh"
#include "quant/cuda/gemm_dense.cuh"
#include "quant/cuda/gemv_common.cuh"

namespace eq::exec::cuda {

using quant::cuda::check_launch;
using quant::cuda::stream_of;

namespace {

std::atomic<int64_t> g_layers_run{0}, g_feed_forward_on_cpu{0}, g_moe_routed{0}, g_graph_captures{0},
    g_graph_replays{0};

constexpr int kNormThreads = 256;
// Threads of the per-row kernels (RoPE, RMSNorm of a latent row).
constexpr int kRowThreads = 128;

// y[r] = w * (x[r] / sqrt(mean(x[r]^2) + eps)) for `rows` rows of `dim`, a
// block a row, the sum of squares in double (model::rms_norm_rows). In place
// is fine. A thread's values and weights (i = tid + j * blockDim) are all
// read before the first is used, so their reads are in flight together: read
// one after another, a row of 2,048 took 5.5 us, its latency. Each thread
// sums its values in the order of i, as the loop it replaced. kRegs values a
// thread are held (the launch picks the fewest that hold the row: 1 for a
// head, 8 for a hidden row of 2,048); the rest of a longer row is read again.
template <int kRegs>
__global__ void rms_norm_kernel(const float* x, int64_t rows, int64_t dim, const float* w, double eps, float* y) {
  quant::cuda::start_after_previous_grid();
  __shared__ double red[kNormThreads / 32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * dim;
    float v[kRegs], wv[kRegs];
#pragma unroll
    for (int j = 0; j < kRegs; ++j) {
      const int64_t i = threadIdx.x + static_cast<int64_t>(j) * blockDim.x;
      v[j] = i < dim ? xr[i] : 0.0f;
      wv[j] = i < dim ? w[i] : 0.0f;
    }
    double ss = 0;
#pragma unroll
    for (int j = 0; j < kRegs; ++j) ss += static_cast<double>(v[j]) * v[j];
    const int64_t held = static_cast<int64_t>(kRegs) * blockDim.x;
    for (int64_t i = threadIdx.x + held; i < dim; i += blockDim.x) ss += static_cast<double>(xr[i]) * xr[i];
    ss = block_sum(ss, red);  // its barriers: every thread has read its values before any writes (in place)
    const float inv = static_cast<float>(1.0 / sqrt(ss / static_cast<double>(dim) + eps));
    for (int64_t i = threadIdx.x + held; i < dim; i += blockDim.x) y[r * dim + i] = w[i] * (xr[i] * inv);
#pragma unroll
    for (int j = 0; j < kRegs; ++j) {
      const int64_t i = threadIdx.x + static_cast<int64_t>(j) * blockDim.x;
      if (i < dim) y[r * dim + i] = wv[j] * (v[j] * inv);
    }
  }
}

// q_proj's output with an output gate, [n][heads][query hd | gate hd], split
// into q [n][heads][hd] and gate [n][heads][hd].
__global__ void split_gate_kernel(const float* qg, int64_t rows, int64_t hd, float* q, float* gate) {
  const int64_t total = rows * hd;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / hd, d = i % hd;
    q[i] = qg[r * 2 * hd + d];
    gate[i] = qg[r * 2 * hd + hd + d];
  }
}

// One head's vector v after RoPE at dim d (model/rope.h): the first rope_dim
// values turned (pairs (i, i + half), or (2i, 2i + 1) regrouped first), the
// rest as they are.
__device__ float roped(const float* v, int d, int rope_dim, bool interleaved, const float* cs, const float* sn) {
  const int half = rope_dim / 2;
  if (d >= rope_dim) return v[d];
  const int i = d < half ? d : d - half;
  const float x1 = interleaved ? v[2 * i] : v[i];
  const float x2 = interleaved ? v[2 * i + 1] : v[i + half];
  return d < half ? x1 * cs[i] - x2 * sn[i] : x2 * cs[i] + x1 * sn[i];
}

// What rope_store_kernel does to each head before turning it, in the order
// of the layer's own kernels: the per-head RMSNorm of q and k heads (null
// weights: none; the sum of squares in double, as rms_norm_kernel), then the
// clamp of q, k and v to [-clamp, clamp] (0: none). Done there, they cost no
// launches of their own.
struct HeadPrep {
  const float *q_norm = nullptr, *k_norm = nullptr;
  double eps = 0;
  float clamp = 0.0f;
};

// Row r = b * seq_len + t is position *start + t of sequence b: its q heads
// turned into q_out, its k heads turned and its v stored at that position of
// the layer's cache ([batch][capacity][kvd]), each head first prepared
// (HeadPrep). A block a (row, head): query heads first, then key heads (each
// with its value head).
__global__ void rope_store_kernel(const float* q, const float* k, const float* v, int64_t seq_len,
                                  const int64_t* start, int nh, int nkv, int hd, int rope_dim, bool interleaved,
                                  const float* cos_table, const float* sin_table, float* q_out, float* k_cache,
                                  float* v_cache, int64_t capacity, HeadPrep prep) {
  quant::cuda::start_after_previous_grid();
  __shared__ float prepared[kMaxHeadDim];
  __shared__ double red[kRowThreads / 32];
  const int64_t r = blockIdx.x, b = r / seq_len, pos = *start + r % seq_len;
  const int head = static_cast<int>(blockIdx.y);
  const int half = rope_dim / 2;
  const float* cs = cos_table + pos * half;
  const float* sn = sin_table + pos * half;
  const int64_t qd = static_cast<int64_t>(nh) * hd, kvd = static_cast<int64_t>(nkv) * hd;
  const int64_t at = static_cast<int64_t>(head < nh ? head : head - nh) * hd;
  const float* in = head < nh ? q + r * qd + at : k + r * kvd + at;
  const float* norm = head < nh ? prep.q_norm : prep.k_norm;
  if (norm != nullptr || prep.clamp > 0.0f) {  // the same for the whole block
    float inv = 1.0f;
    if (norm != nullptr) {
      double ss = 0;
      for (int d = threadIdx.x; d < hd; d += blockDim.x) ss += static_cast<double>(in[d]) * in[d];
      ss = block_sum(ss, red);
      inv = static_cast<float>(1.0 / sqrt(ss / static_cast<double>(hd) + prep.eps));
    }
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
      float x = norm != nullptr ? norm[d] * (in[d] * inv) : in[d];
      if (prep.clamp > 0.0f) x = fminf(fmaxf(x, -prep.clamp), prep.clamp);
      prepared[d] = x;
    }
    __syncthreads();
    in = prepared;
  }
  if (head < nh) {
    float* o = q_out + r * qd + at;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) o[d] = roped(in, d, rope_dim, interleaved, cs, sn);
    return;
  }
  float* kc = k_cache + (b * capacity + pos) * kvd + at;
  float* vc = v_cache + (b * capacity + pos) * kvd + at;
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    kc[d] = roped(in, d, rope_dim, interleaved, cs, sn);
    const float x = v[r * kvd + at + d];
    vc[d] = prep.clamp > 0.0f ? fminf(fmaxf(x, -prep.clamp), prep.clamp) : x;
  }
}

// Latent attention's rows (model/latent_attention.cpp): row r's kv_a [latent
// (lora) | k_rope (rope)] becomes its cache row [RMSNorm(latent) | RoPE(k_rope)]
// at its position (blockIdx.y 0), and each head's query [nope | rope] gets its
// rope part turned into q_out (blockIdx.y 1 + head).
__global__ void latent_rope_store_kernel(const float* kv_a, const float* q, const float* kv_norm, double eps,
                                         int64_t seq_len, const int64_t* start, int nh, int hd, int nope, int lora,
                                         int rope, bool interleaved, const float* cos_table, const float* sin_table,
                                         float* q_out, float* cache, int64_t capacity) {
  __shared__ double red[kRowThreads / 32];
  const int64_t r = blockIdx.x, b = r / seq_len, pos = *start + r % seq_len;
  const int half = rope / 2;
  const float* cs = cos_table + pos * half;
  const float* sn = sin_table + pos * half;
  if (blockIdx.y > 0) {
    const int64_t at = r * nh * hd + static_cast<int64_t>(blockIdx.y - 1) * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x)
      q_out[at + d] = d < nope ? q[at + d] : roped(q + at + nope, d - nope, rope, interleaved, cs, sn);
    return;
  }
  const int64_t row = lora + rope;
  const float* in = kv_a + r * row;
  float* c = cache + (b * capacity + pos) * row;
  double ss = 0;
  for (int i = threadIdx.x; i < lora; i += blockDim.x) ss += static_cast<double>(in[i]) * in[i];
  ss = block_sum(ss, red);
  const float inv = static_cast<float>(1.0 / sqrt(ss / static_cast<double>(lora) + eps));
  for (int i = threadIdx.x; i < lora; i += blockDim.x) c[i] = kv_norm[i] * (in[i] * inv);
  for (int i = threadIdx.x; i < rope; i += blockDim.x) c[lora + i] = roped(in + lora, i, rope, interleaved, cs, sn);
}

// The absorbed query of each (row, head): [q_nope · W_k (lora) | q_rope],
// W_k the head's nope rows of kv_b [nh * (nope + v), lora]. A block a (row,
// head), threads over the lora columns.
__global__ void absorb_query_kernel(const float* q, const float* kv_b, int nh, int hd, int nope, int v, int lora,
                                    int rope, float* qa) {
  const int64_t r = blockIdx.x / nh;
  const int h = static_cast<int>(blockIdx.x % nh);
  const float* qh = q + (r * nh + h) * hd;
  const float* wk = kv_b + static_cast<int64_t>(h) * (nope + v) * lora;
  float* out = qa + (r * nh + h) * (lora + rope);
  for (int j = threadIdx.x; j < lora; j += blockDim.x) {
    float s = 0.0f;
    for (int i = 0; i < nope; ++i) s += qh[i] * wk[static_cast<int64_t>(i) * lora + j];
    out[j] = s;
  }
  for (int i = threadIdx.x; i < rope; i += blockDim.x) out[lora + i] = qh[nope + i];
}

// ctx[r, head] (v values) = W_v · lat[r, head] (lora values), W_v the head's
// value rows of kv_b. A block a (row, head), a warp an output value.
__global__ void latent_values_kernel(const float* lat, const float* kv_b, int nh, int nope, int v, int lora,
                                     float* ctx) {
  const int64_t r = blockIdx.x / nh;
  const int h = static_cast<int>(blockIdx.x % nh);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  const float* x = lat + (r * nh + h) * lora;
  for (int j = warp; j < v; j += warps) {
    const float* w = kv_b + (static_cast<int64_t>(h) * (nope + v) + nope + j) * lora;
    float s = 0.0f;
    for (int i = lane; i < lora; i += 32) s += x[i] * w[i];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) ctx[(r * nh + h) * v + j] = s;
  }
}

// x *= sigmoid(gate), elementwise.
__global__ void sigmoid_gate_kernel(float* x, const float* gate, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    x[i] *= 1.0f / (1.0f + expf(-gate[i]));
}

__global__ void add_into_kernel(float* h, const float* d, int64_t n) {
  quant::cuda::start_after_previous_grid();
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    h[i] += d[i];
}

// out[t] = Σ_j weights[t, j] slot_out[t, j] in slot order (model::combine_slots);
// `residual`: out[t] += that sum instead (the residual's add, the same bits as
// add_into_kernel after a combine into a buffer of its own).
__global__ void combine_kernel(const float* slot_out, const float* weights, int64_t tokens, int64_t top_k,
                               int64_t hidden, float* out, bool residual) {
  quant::cuda::start_after_previous_grid();
  const int64_t n = tokens * hidden;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / hidden, c = i % hidden;
    float o = 0.0f;
    for (int64_t j = 0; j < top_k; ++j) o += weights[t * top_k + j] * slot_out[(t * top_k + j) * hidden + c];
    out[i] = residual ? out[i] + o : o;
  }
}

// out[t] += g_t shared[t], g_t = sigmoid(gate_logit[t]) (null: 1) (model::add_shared_expert).
__global__ void add_shared_kernel(float* out, const float* shared, const float* gate_logit, int64_t tokens,
                                  int64_t hidden) {
  quant::cuda::start_after_previous_grid();
  const int64_t n = tokens * hidden;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = gate_logit ? 1.0f / (1.0f + expf(-gate_logit[i / hidden])) : 1.0f;
    out[i] += shared[i] * g;
  }
}

const float* or_null(const DeviceBuffer& b) { return b.size() ? b.floats() : nullptr; }

// A gated MLP whose three matrices are on the GPU (a dense MLP or a shared expert).
struct DeviceMlp {
  DenseMatrix gate, up, down;
  int64_t inter = 0;
  model::Activation act;
  // All three of `w`'s ops are GPU matrices (device_matrix).
  bool take(const model::MlpWeights& w) {
    gate = device_matrix(w.gate_op);
    up = device_matrix(w.up_op);
    down = device_matrix(w.down_op);
    inter = w.intermediate;
    act = w.act;
    return gate && up && down && !w.gate_bias && !w.up_bias && !w.down_bias;
  }
};

// What a layer run here needs on the GPU.
struct LayerState {
  // attention (grouped-query: wq, wk, wv, wo; latent: wq or wq_a and wq_b, wkv_a, wo, and kv_b)
  DenseMatrix wq, wk, wv, wo;
  DeviceBuffer input_norm, q_bias, k_bias, v_bias, o_bias, q_norm, k_norm, sinks;
  DenseMatrix wq_a, wq_b, wkv_a;
  DeviceBuffer q_a_norm, q_a_bias, kv_a_norm, kv_a_bias, kv_b;
  DeltaNetWeights delta;  // a linear-attention layer's (its input norm included)
  // feed-forward
  DeviceBuffer post_norm;
  bool moe = false;
  model::LayerRouter router;  // on the host for the routing: its correction bias (the weight is dropped)
  DeviceBuffer router_storage, router_bias;
  DenseMatrix router_weight;  // in router_storage: bf16 when its values are (a decode step's logits in one kernel)
  mutable std::unique_ptr<DeviceRouter> device_router;  // made on the first routed decode step
  bool mlp_here = false;  // the dense MLP, or the shared expert when there is one, is on the GPU
  DeviceMlp mlp;
  DeviceBuffer shared_gate;  // [hidden] when the shared expert is gated
};

// The GPU rows of caches that were released, kept for the next ones: a
// decode run or a measurement makes a cache after another, and allocating
// and freeing their rows each time costs tens of microseconds a buffer
// (cudaFree waits for the whole GPU). Shared by a runner and its caches'
// attachments, so a cache may outlive its runner.
class KvPool {
 public:
  explicit KvPool(size_t keep) : keep_(keep) {}
  // A kept buffer of exactly `bytes`, or an empty one.
  DeviceBuffer take(size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (it->size() == bytes) {
        DeviceBuffer b = std::move(*it);
        free_.erase(it);
        return b;
      }
    return {};
  }
  // Keeps `b`, the oldest kept buffer freed past `keep` of them.
  void give(DeviceBuffer b) {
    if (!b.size()) return;
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(std::move(b));
    if (free_.size() > keep_) free_.erase(free_.begin());
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    free_.clear();
  }

 private:
  size_t keep_;
  std::mutex mu_;
  std::vector<DeviceBuffer> free_;
};

// The GPU's keys and values of the layers run here, beside a KvCache.
struct DeviceKv final : model::KvCache::Attachment {
  uint64_t owner = 0;   // the runner's id (an address could be a later runner's)
  uint64_t serial = 0;  // this cache's id among every runner's (for StepGraphs)
  int64_t batch = 0, capacity = 0;
  std::vector<DeviceBuffer> k, v;  // per layer, empty for layers not run here (v: grouped-query only)
  std::vector<DeltaNetState> delta;  // per layer, for the linear-attention layers run here
  std::shared_ptr<KvPool> pool;
  ~DeviceKv() override {
    for (auto* rows : {&k, &v})
      for (DeviceBuffer& b : *rows) pool->give(std::move(b));
    for (DeltaNetState& d : delta) {
      pool->give(std::move(d.conv));
      pool->give(std::move(d.recurrent));
    }
  }
};

std::atomic<uint64_t> g_next_runner{1}, g_next_cache{1};

class DeviceLayers final : public model::LayerRunner {
 public:
  explicit DeviceLayers(model::Model& m)
      : m_(m),
        c_(m.config()),
        id_(g_next_runner++),
        pool_(std::make_shared<KvPool>(static_cast<size_t>(4 * c_.num_layers))),  // two caches' keys and values
        states_(static_cast<size_t>(c_.num_layers)) {
    decided_.assign(static_cast<size_t>(c_.num_layers), -1);
  }

  bool runs(int64_t l) const override {
    int8_t& d = decided_[static_cast<size_t>(l)];
    if (d < 0) d = decide(l) ? 1 : 0;
    return d == 1;
  }

  void forward_layers(int64_t first, int64_t last, float* h, int64_t batch, int64_t seq_len,
                      model::KvCache& cache) override {
    const int64_t n = batch * seq_len, H = c_.hidden_size, start = cache.length();
    DeviceKv& kv = kv_of(cache);
    grow_rows(n);
    copy_to_device(h_.data(), h, static_cast<size_t>(n * H) * sizeof(float), h_staging_);
    // The kernels read the position here: a step's graph replays with the next one.
    copy_to_device(start_.data(), &start, sizeof(start), start_staging_);
    auto step = [&] { return layers(first, last, kv, batch, seq_len, start); };
    int64_t routed = 0;
    std::vector<uint64_t>& state = graph_state_;
    if (graph_step(first, last, batch, seq_len, start, kv, &state)) {
      const StepGraphs::Ran ran = graphs_.run(first, last, batch, state, nullptr, step, &routed);
      g_graph_captures += ran == StepGraphs::Ran::kCaptured;
      g_graph_replays += ran == StepGraphs::Ran::kReplayed;
    } else {
      routed = step();
    }
    g_moe_routed += routed;
    g_layers_run += last - first;
    copy_from_device(h, h_.data(), static_cast<size_t>(n * H) * sizeof(float), h_staging_);
  }

 private:
  static cudaStream_t st() { return stream_of(nullptr); }

  const int64_t* start_at() const { return static_cast<const int64_t*>(start_.data()); }

  // Layers [first, last) on h_ at positions start..: how many MoE layers routed on the GPU.
  int64_t layers(int64_t first, int64_t last, DeviceKv& kv, int64_t batch, int64_t seq_len, int64_t start) {
    int64_t routed = 0;
    for (int64_t l = first; l < last; ++l) {
      const LayerState& s = states_[static_cast<size_t>(l)];
      if (c_.layer_linear(l))
        delta_net(l, s, kv, batch, seq_len, start);
      else if (c_.attention == model::AttentionKind::kLatent)
        latent_attention(l, s, kv, batch, seq_len);
      else
        attention(l, s, kv, batch, seq_len);
      routed += feed_forward(l, s, batch, seq_len, start) ? 1 : 0;
    }
    return routed;
  }

  // Whether the step runs through graphs_: a decode step past the first
  // position (the gated delta net clears its states at 0), every feed-forward
  // part on the GPU and every MoE layer routed there, so that nothing in it
  // waits for the host. *state: the ids of its cache and its MoE layers'
  // expert weights (PackedLayer::serial: a block set anew is another layer).
  bool graph_step(int64_t first, int64_t last, int64_t batch, int64_t seq_len, int64_t start, const DeviceKv& kv,
                  std::vector<uint64_t>* state) const {
    if (!graphs_.on() || seq_len != 1 || start == 0) return false;
    state->assign(1, kv.serial);
    for (int64_t l = first; l < last; ++l) {
      const LayerState& s = states_[static_cast<size_t>(l)];
      if (!s.moe) {
        if (!s.mlp_here) return false;
        continue;
      }
      const PackedMoeBlock* block = moe_here(l, s);
      if (block == nullptr || !routes_on_device(block->dispatch(), block->layer(), batch, c_.top_k)) return false;
      state->push_back(block->layer().serial);
    }
    return true;
  }

  // Layer l's MoE block when it runs here (its dispatch the GPU's, no
  // observer: an observer sees MoE blocks only, so it sends those to the CPU,
  // not dense MLPs), else null.
  PackedMoeBlock* moe_here(int64_t l, const LayerState& s) const {
    auto* block = dynamic_cast<PackedMoeBlock*>(&m_.moe_block(l));
    const bool here = s.mlp_here && m_.observer() == nullptr && block != nullptr && is_cuda_dispatch(block->dispatch());
    return here ? block : nullptr;
  }

  // Whether layer l runs here (its attention or gated delta net's projections
  // on the GPU, its widths within the kernels'), uploading what it needs when
  // it does.
  bool decide(int64_t l) const {
    const model::WeightStore& w = m_.weights();
    LayerState& s = states_[static_cast<size_t>(l)];
    if (c_.layer_linear(l) ? !load_device_delta_net(w, c_, l, s.delta) : !decide_attention(l, s)) return false;
    s.post_norm = device_copy(model::load_post_attention_norm(w, c_, l));
    s.moe = c_.layer_is_moe.at(static_cast<size_t>(l));
    if (s.moe) {
      s.router = model::load_router(c_, w, l);
      s.router_weight = device_dense_copy(s.router.weight, c_.num_experts, c_.hidden_size, s.router_storage);
      s.router_bias = device_copy(s.router.bias);
      s.router.weight = nullptr;
      s.mlp_here = true;
      if (c_.shared_expert_intermediate_size > 0) {
        model::MlpWeights se;
        se.intermediate = c_.shared_expert_intermediate_size;
        se.act = c_.expert_activation;
        se.gate_op = w.op(model::shared_expert_name(c_, l, model::Proj::kGate));
        se.up_op = w.op(model::shared_expert_name(c_, l, model::Proj::kUp));
        se.down_op = w.op(model::shared_expert_name(c_, l, model::Proj::kDown));
        s.mlp_here = s.mlp.take(se);
        if (c_.shared_expert_gated)
          s.shared_gate = device_copy(w.get(model::shared_expert_gate_name(c_, l), {1, c_.hidden_size}));
      }
    } else {
      s.mlp_here = s.mlp.take(model::load_dense_mlp(w, c_, l));
    }
    return true;
  }

  // The attention part of decide: grouped-query or latent.
  bool decide_attention(int64_t l, LayerState& s) const {
    const bool latent = c_.attention == model::AttentionKind::kLatent;
    if (latent ? c_.kv_lora_rank > kMaxHeadDim || c_.kv_lora_rank + c_.qk_rope_head_dim > kMaxScoreDim
               : c_.head_dim > kMaxHeadDim)
      return false;
    const model::AttentionWeights a = model::load_attention(m_.weights(), c_, l, &m_.linear_ops());
    s.wo = device_matrix(a.o_op);
    if (latent) {
      if (c_.q_lora_rank > 0) {
        s.wq_a = device_matrix(a.q_a_op);
        s.wq_b = device_matrix(a.q_b_op);
        if (!s.wq_a || !s.wq_b) return false;
      } else {
        s.wq = device_matrix(a.q_op);
        if (!s.wq) return false;
      }
      s.wkv_a = device_matrix(a.kv_a_op);
      if (!s.wkv_a || !s.wo) return false;
      s.q_a_norm = device_copy(a.q_a_norm);
      s.q_a_bias = device_copy(a.q_a_bias);
      s.kv_a_norm = device_copy(a.kv_a_norm);
      s.kv_a_bias = device_copy(a.kv_a_bias);
      s.kv_b = device_copy(a.kv_b);
    } else {
      s.wq = device_matrix(a.q_op);
      s.wk = device_matrix(a.k_op);
      s.wv = device_matrix(a.v_op);
      if (!s.wq || !s.wk || !s.wv || !s.wo) return false;
      s.q_bias = device_copy(a.q_bias);
      s.k_bias = device_copy(a.k_bias);
      s.v_bias = device_copy(a.v_bias);
      s.q_norm = device_copy(a.q_norm);
      s.k_norm = device_copy(a.k_norm);
      s.sinks = device_copy(a.sinks);
    }
    s.input_norm = device_copy(a.input_norm);
    s.o_bias = device_copy(a.o_bias);
    return true;
  }

  // The cache's GPU rows: attached on its first call here, when it holds no
  // position yet (positions stored without this runner are not on the GPU).
  DeviceKv& kv_of(model::KvCache& cache) {
    auto* kv = dynamic_cast<DeviceKv*>(cache.attachment().get());
    if (kv != nullptr && kv->owner == id_) return *kv;
    if (cache.length() > 0)
      invalid("GPU decoder layers: a KV cache holding " + std::to_string(cache.length()) +
              " positions stored without them (a cache runs with one model from its first position)");
    auto made = std::make_unique<DeviceKv>();
    kv = made.get();
    kv->owner = id_;
    kv->serial = g_next_cache++;
    kv->pool = pool_;
    kv->batch = cache.batch();
    kv->capacity = cache.capacity();
    kv->k.resize(static_cast<size_t>(c_.num_layers));
    kv->v.resize(static_cast<size_t>(c_.num_layers));
    kv->delta.resize(static_cast<size_t>(c_.num_layers));
    cache.attachment() = std::move(made);
    return *kv;
  }

  // Layer l's rows of the GPU cache (keys, and values unless latent), on its
  // first use.
  void attach_layer(DeviceKv& kv, int64_t l, int64_t key_dim, int64_t value_dim) {
    DeviceBuffer& kc = kv.k[static_cast<size_t>(l)];
    if (kc.size()) return;
    const size_t rows = static_cast<size_t>(kv.batch * kv.capacity);
    attach(kv, l, {{&kc, rows * static_cast<size_t>(key_dim) * sizeof(float)},
                   {&kv.v[static_cast<size_t>(l)], rows * static_cast<size_t>(value_dim) * sizeof(float)}});
  }

  // A linear-attention layer's states, on its first use.
  DeltaNetState& attach_delta_net(DeviceKv& kv, int64_t l) {
    DeltaNetState& d = kv.delta[static_cast<size_t>(l)];
    if (!d.conv.size())
      attach(kv, l, {{&d.conv, delta_net_conv_bytes(c_, kv.batch)},
                     {&d.recurrent, delta_net_recurrent_bytes(c_, kv.batch)}});
    return d;
  }

  // Buffers of the given sizes (0: none) for layer l of a cache: kept ones of
  // released caches, else new ones, or a clear error when the GPU lacks the room.
  static void attach(DeviceKv& kv, int64_t l, std::initializer_list<std::pair<DeviceBuffer*, size_t>> buffers) {
    bool all = true;
    size_t total = 0;
    for (const auto& [b, bytes] : buffers)
      if (bytes) {
        *b = kv.pool->take(bytes);
        all = all && b->size() > 0;
        total += bytes;
      }
    if (all) return;
    for (const auto& [b, bytes] : buffers) *b = DeviceBuffer();  // freed, with every kept buffer: room for new ones
    kv.pool->clear();
    if (total + gpu_headroom_bytes() > gpu_free_bytes())
      unsupported("GPU decoder layers: layer " + std::to_string(l) + "'s cache for " + std::to_string(kv.batch) +
                  " x " + std::to_string(kv.capacity) + " positions needs " + std::to_string(total >> 20) +
                  " MiB, more than the GPU has free beside its headroom (EXPERTQUANT_GPU_LAYERS=0 keeps it on "
                  "the CPU)");
    for (const auto& [b, bytes] : buffers)
      if (bytes) *b = DeviceBuffer(bytes);
  }

  void grow_rows(int64_t n) {
    const int64_t H = c_.hidden_size;
    const size_t rows = static_cast<size_t>(n) * sizeof(float);
    grow(h_, rows * H);
    grow(xn_, rows * H);
    grow(delta_, rows * H);
  }

  static void grow_to(DeviceBuffer& b, size_t floats) { grow(b, floats * sizeof(float)); }

  // y [n, rows] = x [n, cols] W^T (+ bias, when it has any).
  void gemm(const float* x, const float* w, float* y, int64_t n, int64_t rows, int64_t cols) {
    quant::cuda::f32_gemm(x, w, y, n, rows, cols, st());
  }
  void gemm(const float* x, const DenseMatrix& w, float* y, int64_t n, int64_t rows, int64_t cols) {
    EQ_CHECK(w.rows == rows && w.cols == cols, "GPU layer: a [" + std::to_string(w.rows) + ", " +
                                                   std::to_string(w.cols) + "] matrix taken as [" +
                                                   std::to_string(rows) + ", " + std::to_string(cols) + "]");
    dense_product(w, x, y, n, nullptr, wide_);
  }
  template <typename W>
  void gemm(const float* x, const W& w, float* y, int64_t n, int64_t rows, int64_t cols, const DeviceBuffer& bias) {
    gemm(x, w, y, n, rows, cols);
    add_bias(y, n, rows, bias);
  }
  void add_bias(float* y, int64_t n, int64_t rows, const DeviceBuffer& bias) {
    if (!bias.size()) return;
    add_bias_rows_kernel<<<elementwise_blocks(n * rows), 256, 0, st()>>>(y, n, rows, bias.floats());
    check_launch("bias kernel");
  }
  // ys[i] = x W_i^T for matrices of x's width (the products of one x): one
  // launch where dense_products takes them together.
  void gemms(const float* x, std::initializer_list<DenseMatrix> ws, std::initializer_list<float*> ys, int64_t n) {
    dense_products({ws.begin(), ws.size()}, x, ys.begin(), n, nullptr, wide_);
  }

  // h += delta: the residual add after attention, a delta net or a dense MLP.
  void add_residual(int64_t n) {
    quant::cuda::launch_kernel("residual kernel", add_into_kernel, dim3(elementwise_blocks(n)), dim3(256), 0, st(),
                               h_.floats(), delta_.floats(), n);
  }

  void rms_norm(const float* x, int64_t rows, int64_t dim, const DeviceBuffer& w, float* y) {
    rms_norm(x, rows, dim, w, y, c_.rms_norm_eps);
  }
  void rms_norm(const float* x, int64_t rows, int64_t dim, const DeviceBuffer& w, float* y, double eps) {
    const unsigned blocks = static_cast<unsigned>(std::clamp<int64_t>(rows, 1, 65535));
    const float* wf = w.floats();
    const auto kernel = dim <= kNormThreads       ? rms_norm_kernel<1>
                        : dim <= 8 * kNormThreads ? rms_norm_kernel<8>
                                                  : rms_norm_kernel<32>;
    quant::cuda::launch_kernel("RMSNorm kernel", kernel, dim3(blocks), dim3(kNormThreads), 0, st(), x, rows, dim, wf,
                               eps, y);
  }

  // The cos and sin rows of positions [0, positions) on the GPU (the model's
  // table, reserved that far first).
  void reserve_rope(int64_t positions) {
    if (positions <= rope_positions_) return;
    const model::RopeTable& t = m_.rope();
    const int64_t half = t.dim() / 2;
    t.reserve(positions);
    if (positions > rope_capacity_) {  // a larger table: every row again, once queued work is done with the old
      synchronize(nullptr);
      int64_t cap = std::max<int64_t>(rope_capacity_, 256);
      while (cap < positions) cap *= 2;
      cos_ = DeviceBuffer(static_cast<size_t>(cap * half) * sizeof(float));
      sin_ = DeviceBuffer(static_cast<size_t>(cap * half) * sizeof(float));
      rope_capacity_ = cap;
      rope_positions_ = 0;
    }
    const int64_t from = rope_positions_;
    const size_t bytes = static_cast<size_t>((positions - from) * half) * sizeof(float);
    const size_t at = static_cast<size_t>(from * half) * sizeof(float);
    cos_.upload(t.cos_row(from), bytes, at);
    sin_.upload(t.sin_row(from), bytes, at);
    rope_positions_ = positions;
  }

  void attention(int64_t l, const LayerState& s, DeviceKv& kv, int64_t batch, int64_t seq_len) {
    const int64_t H = c_.hidden_size, n = batch * seq_len, hd = c_.head_dim, nh = c_.num_heads,
                  nkv = c_.num_kv_heads, qd = nh * hd, kvd = nkv * hd;
    const bool gated = c_.attention_output_gate;
    attach_layer(kv, l, kvd, kvd);
    const DeviceBuffer& kc = kv.k[static_cast<size_t>(l)];
    const DeviceBuffer& vc = kv.v[static_cast<size_t>(l)];
    reserve_rope(kv.capacity);  // once a cache: no step copies rows
    grow_to(q_, static_cast<size_t>(n * qd * (gated ? 2 : 1)));
    if (gated) {
      grow_to(q_split_, static_cast<size_t>(n * qd));
      grow_to(gate_, static_cast<size_t>(n * qd));
    }
    grow_to(q_rot_, static_cast<size_t>(n * qd));
    grow_to(k_, static_cast<size_t>(n * kvd));
    grow_to(v_, static_cast<size_t>(n * kvd));
    grow_to(ctx_, static_cast<size_t>(n * qd));
    rms_norm(h_.floats(), n, H, s.input_norm, xn_.floats());
    float* q = q_.floats();
    EQ_CHECK(s.wq.rows == (gated ? 2 : 1) * qd && s.wk.rows == kvd && s.wv.rows == kvd && s.wq.cols == H,
             "GPU layer " + std::to_string(l) + ": q, k, v matrices of other shapes than the config's");
    gemms(xn_.floats(), {s.wq, s.wk, s.wv}, {q, k_.floats(), v_.floats()}, n);
    add_bias(q, n, s.wq.rows, s.q_bias);
    add_bias(k_.floats(), n, kvd, s.k_bias);
    add_bias(v_.floats(), n, kvd, s.v_bias);
    if (gated) {  // [query | gate] per head
      split_gate_kernel<<<elementwise_blocks(n * qd), 256, 0, st()>>>(q, n * nh, hd, q_split_.floats(),
                                                                     gate_.floats());
      check_launch("output gate split kernel");
      q = q_split_.floats();
    }
    // Per-head q/k norms and the clamp in the RoPE kernel; a norm over the
    // whole row first, on its own.
    HeadPrep prep;
    prep.eps = c_.rms_norm_eps;
    prep.clamp = c_.clip_qkv > 0 ? static_cast<float>(c_.clip_qkv) : 0.0f;
    if (s.q_norm.size() && c_.qk_norm == model::QkNorm::kWhole) {
      rms_norm(q, n, qd, s.q_norm, q);
      rms_norm(k_.floats(), n, kvd, s.k_norm, k_.floats());
    } else if (s.q_norm.size()) {
      prep.q_norm = s.q_norm.floats();
      prep.k_norm = s.k_norm.floats();
    }
    const model::RopeTable& rope = m_.rope();
    quant::cuda::launch_kernel("RoPE kernel", rope_store_kernel,
                               dim3(static_cast<unsigned>(n), static_cast<unsigned>(nh + nkv)), dim3(kRowThreads), 0,
                               st(), q, k_.floats(), v_.floats(), seq_len, start_at(), static_cast<int>(nh),
                               static_cast<int>(nkv), static_cast<int>(hd), static_cast<int>(rope.dim()),
                               rope.interleaved(), cos_.floats(), sin_.floats(), q_rot_.floats(), kc.floats(),
                               vc.floats(), kv.capacity, prep);
    AttentionShape shape;
    shape.heads = static_cast<int>(nh);
    shape.group = static_cast<int>(nh / nkv);
    shape.q_dim = shape.v_dim = static_cast<int>(hd);
    shape.q_row = shape.out_row = qd;
    shape.q_head = shape.out_head = hd;
    shape.kv_row = kvd;
    shape.k_group = shape.v_group = hd;
    launch_attention(q_rot_.floats(), kc.floats(), vc.floats(), ctx_.floats(), shape, n, seq_len, start_at(), kv.capacity,
                     model::attention_scale(c_), c_.layer_attention_window(l), or_null(s.sinks), key_parts_, key_done_, st());
    if (gated) {
      sigmoid_gate_kernel<<<elementwise_blocks(n * qd), 256, 0, st()>>>(ctx_.floats(), gate_.floats(), n * qd);
      check_launch("output gate kernel");
    }
    gemm(ctx_.floats(), s.wo, delta_.floats(), n, H, qd, s.o_bias);
    add_residual(n * H);
  }

  // A linear-attention layer (device_delta_net.h); its states in the cache.
  void delta_net(int64_t l, const LayerState& s, DeviceKv& kv, int64_t batch, int64_t seq_len, int64_t start) {
    const int64_t H = c_.hidden_size, n = batch * seq_len;
    DeltaNetState& state = attach_delta_net(kv, l);
    rms_norm(h_.floats(), n, H, s.delta.input_norm, xn_.floats());
    delta_net_.forward(c_, s.delta, xn_.floats(), batch, seq_len, start, state, delta_.floats(), st());
    add_residual(n * H);
  }

  // Latent attention (model/latent_attention.cpp) in the latent space at every
  // length: the CPU expands the keys instead where that is cheaper, the same
  // attention in another order of summation.
  void latent_attention(int64_t l, const LayerState& s, DeviceKv& kv, int64_t batch, int64_t seq_len) {
    const int64_t H = c_.hidden_size, n = batch * seq_len, nh = c_.num_heads, hd = c_.head_dim,
                  nope = c_.qk_nope_head_dim, rope = c_.qk_rope_head_dim, v = c_.v_head_dim, lora = c_.kv_lora_rank,
                  qd = nh * hd, row = lora + rope;
    attach_layer(kv, l, row, 0);
    const DeviceBuffer& cache = kv.k[static_cast<size_t>(l)];
    reserve_rope(kv.capacity);  // once a cache: no step copies rows
    grow_to(q_, static_cast<size_t>(n * qd));
    grow_to(q_rot_, static_cast<size_t>(n * qd));
    grow_to(k_, static_cast<size_t>(n * row));  // kv_a's rows
    grow_to(q_absorbed_, static_cast<size_t>(n * nh * row));
    grow_to(latent_ctx_, static_cast<size_t>(n * nh * lora));
    grow_to(ctx_, static_cast<size_t>(n * nh * v));
    rms_norm(h_.floats(), n, H, s.input_norm, xn_.floats());
    // q's first product and kv_a read the same x: one launch where they can.
    const int64_t r = c_.q_lora_rank;
    const DenseMatrix& wq = r > 0 ? s.wq_a : s.wq;
    float* q_first = q_.floats();
    if (r > 0) {
      grow_to(q_low_, static_cast<size_t>(n * r));
      q_first = q_low_.floats();
    }
    EQ_CHECK(wq.rows == (r > 0 ? r : qd) && s.wkv_a.rows == row && wq.cols == H && s.wkv_a.cols == H,
             "GPU layer " + std::to_string(l) + ": q and kv_a matrices of other shapes than the config's");
    gemms(xn_.floats(), {wq, s.wkv_a}, {q_first, k_.floats()}, n);
    add_bias(k_.floats(), n, row, s.kv_a_bias);
    if (r > 0) {
      add_bias(q_low_.floats(), n, r, s.q_a_bias);
      rms_norm(q_low_.floats(), n, r, s.q_a_norm, q_low_.floats(), c_.latent_norm_eps);
      gemm(q_low_.floats(), s.wq_b, q_.floats(), n, qd, r);
    }
    const model::RopeTable& t = m_.rope();
    latent_rope_store_kernel<<<dim3(static_cast<unsigned>(n), static_cast<unsigned>(1 + nh)), kRowThreads, 0, st()>>>(
        k_.floats(), q_.floats(), s.kv_a_norm.floats(), c_.latent_norm_eps, seq_len, start_at(), static_cast<int>(nh),
        static_cast<int>(hd), static_cast<int>(nope), static_cast<int>(lora), static_cast<int>(rope), t.interleaved(),
        cos_.floats(), sin_.floats(), q_rot_.floats(), cache.floats(), kv.capacity);
    check_launch("latent RoPE kernel");
    absorb_query_kernel<<<static_cast<unsigned>(n * nh), kRowThreads, 0, st()>>>(
        q_rot_.floats(), s.kv_b.floats(), static_cast<int>(nh), static_cast<int>(hd), static_cast<int>(nope),
        static_cast<int>(v), static_cast<int>(lora), static_cast<int>(rope), q_absorbed_.floats());
    check_launch("query absorption kernel");
    AttentionShape shape;
    shape.heads = static_cast<int>(nh);
    shape.group = static_cast<int>(nh);  // one cached row for every head
    shape.q_dim = static_cast<int>(row);
    shape.v_dim = static_cast<int>(lora);
    shape.q_row = nh * row;
    shape.q_head = row;
    shape.kv_row = row;
    shape.out_row = nh * lora;
    shape.out_head = lora;
    launch_attention(q_absorbed_.floats(), cache.floats(), cache.floats(), latent_ctx_.floats(), shape, n, seq_len,
                     start_at(), kv.capacity, model::attention_scale(c_), 0, nullptr, key_parts_, key_done_, st());
    latent_values_kernel<<<static_cast<unsigned>(n * nh), kRowThreads, 0, st()>>>(
        latent_ctx_.floats(), s.kv_b.floats(), static_cast<int>(nh), static_cast<int>(nope), static_cast<int>(v),
        static_cast<int>(lora), ctx_.floats());
    check_launch("latent values kernel");
    gemm(ctx_.floats(), s.wo, delta_.floats(), n, H, nh * v, s.o_bias);
    add_residual(n * H);
  }

  // out [n, hidden] (device) = the MLP of xn_'s n rows.
  void mlp(const DeviceMlp& w, int64_t n, float* out) {
    const int64_t H = c_.hidden_size, I = w.inter;
    grow_to(g_, static_cast<size_t>(n * I));
    grow_to(u_, static_cast<size_t>(n * I));
    EQ_CHECK(w.gate.rows == I && w.up.rows == I && w.gate.cols == H && w.up.cols == H,
             "GPU MLP: gate and up matrices of other shapes than the config's");
    gemms(xn_.floats(), {w.gate, w.up}, {g_.floats(), u_.floats()}, n);
    glu_rows_kernel<<<elementwise_blocks(n * I), 256, 0, st()>>>(g_.floats(), u_.floats(), g_.floats(), n, I, nullptr,
                                                                nullptr, static_cast<int>(w.act.kind), w.act.alpha,
                                                                w.act.limit);
    check_launch("activation kernel");
    gemm(g_.floats(), w.down, out, n, H, I);
  }

  // The feed-forward part and its residual: true when a MoE layer routed on the GPU.
  bool feed_forward(int64_t l, const LayerState& s, int64_t batch, int64_t seq_len, int64_t start) {
    const int64_t H = c_.hidden_size, n = batch * seq_len;
    rms_norm(h_.floats(), n, H, s.post_norm, xn_.floats());
    PackedMoeBlock* block = s.moe ? moe_here(l, s) : nullptr;
    const bool here = s.moe ? block != nullptr : s.mlp_here;
    bool routed = false;
    if (!here) {
      // On the CPU, on the rows copied over: the block reports to the observer itself.
      ++g_feed_forward_on_cpu;
      host_x_.resize(static_cast<size_t>(n * H));
      host_out_.resize(static_cast<size_t>(n * H));
      copy_from_device(host_x_.data(), xn_.data(), host_x_.size() * sizeof(float), host_staging_);
      if (s.moe) {
        model::MoeCall call{l, batch, seq_len, start, m_.observer()};
        m_.moe_block(l).forward(call, host_x_.data(), host_out_.data());
      } else {
        model::mlp_forward(model::load_dense_mlp(m_.weights(), c_, l), host_x_.data(), n, H, host_out_.data());
      }
      copy_to_device(delta_.data(), host_out_.data(), host_out_.size() * sizeof(float), host_up_staging_);
    } else if (!s.moe) {
      mlp(s.mlp, n, delta_.floats());
    } else if (moe(s, *block, n, &routed)) {
      return routed;  // the combine added the experts' sum into h
    }
    add_residual(n * H);
    return routed;
  }

  // route_survivors's rule on the GPU: pruned experts are never chosen.
  DeviceRouter device_router_of(const LayerState& s, const PackedLayer& layer) const {
    std::vector<uint8_t> allowed;
    if (layer.any_pruned()) {
      allowed.assign(static_cast<size_t>(c_.num_experts), 0);
      for (int32_t e : layer.survivors) allowed[static_cast<size_t>(e)] = 1;
    }
    return make_device_router(model::router_rule(c_), c_.num_experts, c_.top_k,
                              s.router.correction_bias ? s.router.correction_bias->data.data() : nullptr,
                              allowed.empty() ? nullptr : allowed.data());
  }

  // delta = the MoE block's output; or, without a shared expert, h += it
  // (one launch fewer a layer), and then true. *routed: whether it routed
  // on the GPU.
  bool moe(const LayerState& s, const PackedMoeBlock& block, int64_t n, bool* routed) {
    const int64_t H = c_.hidden_size, E = c_.num_experts, K = c_.top_k;
    grow_to(logits_, static_cast<size_t>(n * E));
    gemm(xn_.floats(), s.router_weight, logits_.floats(), n, E, H, s.router_bias);
    grow_to(weights_, static_cast<size_t>(n * K));
    grow_to(slot_out_, static_cast<size_t>(n * K * H));
    if (routes_on_device(block.dispatch(), block.layer(), n, K)) {
      // Routed decode: the ids stay on the GPU, nothing waits for the host.
      *routed = true;
      if (!s.device_router) s.device_router = std::make_unique<DeviceRouter>(device_router_of(s, block.layer()));
      grow_to(ids_, static_cast<size_t>(n * K));  // int32, as many as floats
      int32_t* ids = static_cast<int32_t*>(ids_.data());
      route_on_device(*s.device_router, logits_.floats(), n, ids, weights_.floats(), st());
      run_routed_on_device(block.dispatch(), block.layer(), xn_.floats(), n, K, ids, slot_out_.floats());
    } else {
      host_logits_.resize(static_cast<size_t>(n * E));
      copy_from_device(host_logits_.data(), logits_.data(), host_logits_.size() * sizeof(float), logits_staging_);
      const model::Routing routing = route_survivors(c_, s.router, block.layer(), host_logits_.data(), n);
      copy_to_device(weights_.data(), routing.weights.data(), routing.weights.size() * sizeof(float),
                     weights_staging_);
      run_on_device(block.dispatch(), block.layer(), xn_.floats(), n, K, routing.expert_ids.data(),
                    slot_out_.floats());
    }
    const bool shared = c_.shared_expert_intermediate_size > 0;
    quant::cuda::launch_kernel("combine kernel", combine_kernel, dim3(elementwise_blocks(n * H)), dim3(256), 0, st(),
                               slot_out_.floats(), weights_.floats(), n, K, H, shared ? delta_.floats() : h_.floats(),
                               !shared);
    if (!shared) return true;
    grow_to(shared_, static_cast<size_t>(n * H));
    mlp(s.mlp, n, shared_.floats());
    const float* gate_logit = nullptr;
    if (s.shared_gate.size()) {
      grow_to(shared_logit_, static_cast<size_t>(n));
      gemm(xn_.floats(), s.shared_gate.floats(), shared_logit_.floats(), n, 1, H);
      gate_logit = shared_logit_.floats();
    }
    quant::cuda::launch_kernel("shared expert kernel", add_shared_kernel, dim3(elementwise_blocks(n * H)), dim3(256),
                               0, st(), delta_.floats(), shared_.floats(), gate_logit, n, H);
    return false;
  }

  model::Model& m_;
  const model::ModelConfig& c_;
  uint64_t id_;
  std::shared_ptr<KvPool> pool_;
  mutable std::vector<LayerState> states_;
  mutable std::vector<int8_t> decided_;  // per layer: -1 not yet, 0 CPU, 1 here
  // The call's rows on the GPU.
  DeviceBuffer h_, xn_, delta_, q_, q_split_, gate_, q_rot_, k_, v_, ctx_, g_, u_, logits_, weights_, ids_, slot_out_,
      shared_, shared_logit_;
  // Latent attention's: q_a's rows, the absorbed queries, the latent contexts.
  DeviceBuffer q_low_, q_absorbed_, latent_ctx_;
  DeviceDeltaNet delta_net_;  // the linear-attention layers' rows
  DeviceBuffer cos_, sin_;
  int64_t rope_positions_ = 0, rope_capacity_ = 0;
  DeviceBuffer start_{sizeof(int64_t)};  // the call's first position (int64)
  DeviceBuffer key_parts_, key_done_;     // the attention's key parts and their counts (KeySplits)
  DeviceBuffer wide_;                     // dense_product's scratch
  StepGraphs graphs_{env_switch("EXPERTQUANT_GPU_GRAPH", true)};
  std::vector<uint64_t> graph_state_;  // graph_step's, kept to spare a step the allocation
  // Each copy's own staging: a copy to the GPU may still read its staging
  // when the next copy from the GPU fills another.
  PinnedBuffer h_staging_, host_staging_, host_up_staging_, logits_staging_, weights_staging_, start_staging_;
  std::vector<float> host_x_, host_out_, host_logits_;
};

}  // namespace

DeviceLayerStats device_layer_stats() {
  return {g_layers_run.load(), g_feed_forward_on_cpu.load(), g_moe_routed.load(), g_graph_captures.load(),
          g_graph_replays.load()};
}

std::unique_ptr<model::LayerRunner> make_device_layers(model::Model& model) {
  if (!env_switch("EXPERTQUANT_GPU_LAYERS", true)) return nullptr;
  const std::string why = unavailable_reason();
  if (!why.empty()) unsupported("--device cuda: " + why);
  return std::make_unique<DeviceLayers>(model);
}

}  // namespace eq::exec::cuda
