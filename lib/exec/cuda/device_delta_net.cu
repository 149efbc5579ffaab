// The gated delta net on the GPU (device_delta_net.h).
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "core/error.h"
#include "exec/cuda/device_delta_net.h"
#include "exec/cuda/device_linear.h"
#include "exec/cuda/row_kernels.cuh"
#include "model/linear_attention.h"
#include "quant/cuda/cuda_common.cuh"
#include "quant/cuda/gemm_dense.cuh"

namespace eq::exec::cuda {

using quant::cuda::check_launch;

namespace {

constexpr int kRowThreads = 128;

__device__ float sigmoid_of(float x) { return 1.0f / (1.0f + expf(-x)); }

// The fused projections' rows, per key head g [q (dk) | k (dk) | v (rep dv) |
// z (rep dv)] and [b (rep) | a (rep)], into the separate layout: qkv [n,
// conv_dim] (all q heads, all k heads, all v heads), z [n, nv dv], b and a [n, nv].
__global__ void regroup_kernel(const float* qkvz, const float* ba, int64_t n, int nk, int dk, int rep, int dv,
                               float* qkv, float* z, float* b, float* a) {
  const int64_t group = 2 * dk + 2 * rep * dv, row = nk * group, kd = static_cast<int64_t>(nk) * dk,
                cd = 2 * kd + static_cast<int64_t>(nk) * rep * dv, vd = static_cast<int64_t>(nk) * rep * dv,
                nv = static_cast<int64_t>(nk) * rep;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n * row; i += stride) {
    const int64_t r = i / row, g = (i % row) / group, e = (i % row) % group;
    const float x = qkvz[i];
    if (e < dk)
      qkv[r * cd + g * dk + e] = x;
    else if (e < 2 * dk)
      qkv[r * cd + kd + g * dk + (e - dk)] = x;
    else if (e < 2 * dk + rep * dv)
      qkv[r * cd + 2 * kd + g * rep * dv + (e - 2 * dk)] = x;
    else
      z[r * vd + g * rep * dv + (e - 2 * dk - rep * dv)] = x;
  }
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n * 2 * nv; i += stride) {
    const int64_t r = i / (2 * nv), g = (i % (2 * nv)) / (2 * rep), e = (i % (2 * nv)) % (2 * rep);
    (e < rep ? b : a)[r * nv + g * rep + (e < rep ? e : e - rep)] = ba[i];
  }
}

// The causal depthwise conv + SiLU of each sequence's seq_len rows of qkv [n,
// channels], in place, continuing from `state` ([batch][kernel - 1][channels],
// the last inputs before this call) and leaving this call's last inputs
// there. A thread a (sequence, channel), its window of inputs in registers;
// the sum in the CPU's order (oldest input first).
__global__ void causal_conv_kernel(const float* weight, int64_t channels, int kernel, float* qkv, int64_t batch,
                                   int64_t seq_len, float* state) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= batch * channels) return;
  const int64_t b = i / channels, ch = i % channels;
  const int keep = kernel - 1;
  float w[kMaxDeltaConvKernel - 1], win[kMaxDeltaConvKernel - 1];  // the past inputs' weights and values
#pragma unroll
  for (int j = 0; j < kMaxDeltaConvKernel - 1; ++j) {
    w[j] = j < keep ? weight[ch * kernel + j] : 0.0f;
    win[j] = j < keep ? state[(b * keep + j) * channels + ch] : 0.0f;
  }
  const float last = weight[ch * kernel + keep];  // the current input's weight
  for (int64_t t = 0; t < seq_len; ++t) {
    float* x = qkv + (b * seq_len + t) * channels + ch;
    const float in = *x;
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < kMaxDeltaConvKernel - 1; ++j)
      if (j < keep) s += w[j] * win[j];
    s += last * in;
    *x = s * sigmoid_of(s);
#pragma unroll
    for (int j = 0; j < kMaxDeltaConvKernel - 1; ++j)
      if (j < keep) win[j] = j + 1 < keep ? win[j + 1] : in;
  }
#pragma unroll
  for (int j = 0; j < kMaxDeltaConvKernel - 1; ++j)
    if (j < keep) state[(b * keep + j) * channels + ch] = win[j];
}

// Per row (blockIdx.x) of the conv's output: q heads (blockIdx.y < nk) L2-
// normalized and scaled by q_scale, k heads (nk <= blockIdx.y < 2 nk)
// L2-normalized, and (blockIdx.y = 2 nk) the gates of its value heads:
// beta = sigmoid(b), g = -exp(A_log) softplus(a + dt_bias) (softplus linear
// above 20, as the CPU's).
__global__ void norms_gates_kernel(float* qkv, int64_t cd, int nk, int dk, float q_scale, const float* b,
                                   const float* a, const float* a_log, const float* dt_bias, int nv, float* beta,
                                   float* g) {
  __shared__ float red[kRowThreads / 32];
  const int64_t r = blockIdx.x;
  const int y = static_cast<int>(blockIdx.y);
  if (y == 2 * nk) {
    for (int h = threadIdx.x; h < nv; h += blockDim.x) {
      const int64_t i = r * nv + h;
      beta[i] = sigmoid_of(b[i]);
      const float x = a[i] + dt_bias[h];
      g[i] = -expf(a_log[h]) * (x > 20.0f ? x : log1pf(expf(x)));
    }
    return;
  }
  float* v = qkv + r * cd + static_cast<int64_t>(y) * dk;  // q heads then k heads, each dk wide
  float ss = 0.0f;
  for (int i = threadIdx.x; i < dk; i += blockDim.x) ss += v[i] * v[i];
  ss = block_sum(ss, red);
  const float inv = (y < nk ? q_scale : 1.0f) / sqrtf(ss + 1e-6f);
  for (int i = threadIdx.x; i < dk; i += blockDim.x) v[i] *= inv;
}

// The delta rule of each (sequence, value head) (blockIdx.x) over its
// seq_len positions, one after another (model::gated_delta_rule): column j of
// the state S [dk, dv] lies in the registers of kSplit neighbouring threads,
// kRows rows each; per position, S *= exp(g); delta = beta (v_j - Σ_i S[i, j]
// k_i); S[i, j] += k_i delta; o_j = Σ_i S[i, j] q_i, the column's sums added
// across its threads by shuffles. Threads: dv kSplit.
template <int kRows, int kSplit>
__global__ void __launch_bounds__(kMaxDeltaThreads) delta_rule_kernel(const float* qkv, int64_t cd, int64_t kd,
                                                                      const float* g, const float* beta, int nv,
                                                                      int rep, int64_t seq_len, int dk, int dv,
                                                                      float* state, float* out) {
  __shared__ float qs[kRows * kSplit], ks[kRows * kSplit];
  const int64_t b = blockIdx.x / nv;
  const int h = static_cast<int>(blockIdx.x % nv), kh = h / rep;
  const int j = threadIdx.x / kSplit, first = (threadIdx.x % kSplit) * kRows;
  // The warp's lanes (the last warp may be partial); a column's threads are in one warp.
  const int in_warp = static_cast<int>(blockDim.x) - static_cast<int>(threadIdx.x / 32) * 32;
  const unsigned lanes = in_warp >= 32 ? 0xffffffffu : (1u << in_warp) - 1;
  float* st = state + (static_cast<int64_t>(blockIdx.x) * dk) * dv + j;
  float S[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) S[r] = first + r < dk ? st[static_cast<int64_t>(first + r) * dv] : 0.0f;
  const int64_t vd = static_cast<int64_t>(nv) * dv;
  for (int64_t t = 0; t < seq_len; ++t) {
    const int64_t row_index = b * seq_len + t;
    const float* row = qkv + row_index * cd;
    __syncthreads();  // the previous position's q and k are read
    for (int i = threadIdx.x; i < kRows * kSplit; i += blockDim.x) {
      qs[i] = i < dk ? row[static_cast<int64_t>(kh) * dk + i] : 0.0f;
      ks[i] = i < dk ? row[kd + static_cast<int64_t>(kh) * dk + i] : 0.0f;
    }
    __syncthreads();
    const float decay = expf(g[row_index * nv + h]), bt = beta[row_index * nv + h];
    const float vj = row[2 * kd + static_cast<int64_t>(h) * dv + j];
    float kv = 0.0f;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      S[r] *= decay;
      kv += S[r] * ks[first + r];
    }
#pragma unroll
    for (int o = 1; o < kSplit; o <<= 1) kv += __shfl_xor_sync(lanes, kv, o);
    const float delta = (vj - kv) * bt;
    float o = 0.0f;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      S[r] += ks[first + r] * delta;  // rows past dk stay 0: their k is 0
      o += S[r] * qs[first + r];
    }
#pragma unroll
    for (int m = 1; m < kSplit; m <<= 1) o += __shfl_xor_sync(lanes, o, m);
    if (first == 0) out[row_index * vd + static_cast<int64_t>(h) * dv + j] = o;
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r)
    if (first + r < dk) st[static_cast<int64_t>(first + r) * dv] = S[r];
}

// o = RMSNorm(o) w SiLU(z) per (row, value head) (blockIdx.x), the sum of
// squares in double as the CPU's.
__global__ void gated_norm_kernel(float* o, const float* z, const float* w, int dv, double eps) {
  __shared__ double red[kRowThreads / 32];
  float* oh = o + static_cast<int64_t>(blockIdx.x) * dv;
  const float* zh = z + static_cast<int64_t>(blockIdx.x) * dv;
  double ss = 0;
  for (int i = threadIdx.x; i < dv; i += blockDim.x) ss += static_cast<double>(oh[i]) * oh[i];
  ss = block_sum(ss, red);
  const float inv = static_cast<float>(1.0 / sqrt(ss / static_cast<double>(dv) + eps));
  for (int i = threadIdx.x; i < dv; i += blockDim.x) oh[i] = w[i] * (oh[i] * inv) * (zh[i] * sigmoid_of(zh[i]));
}

void grow_floats(DeviceBuffer& b, int64_t floats, cudaStream_t s) {
  grow(b, static_cast<size_t>(floats) * sizeof(float), s);
}

}  // namespace

bool load_device_delta_net(const model::WeightStore& store, const model::ModelConfig& c, int64_t l,
                           DeltaNetWeights& w) {
  const model::LinearAttentionConfig& d = c.linear;
  if (d.key_head_dim > kMaxDeltaKeyDim || d.value_head_dim > kMaxDeltaValueDim || d.conv_kernel < 2 ||
      d.conv_kernel > kMaxDeltaConvKernel)
    return false;
  const model::LinearAttentionWeights a = model::load_linear_attention(store, c, l);
  w.out = device_matrix(a.out_op);
  if (d.fused_projections) {
    w.qkvz = device_matrix(a.qkvz_op);
    if (!w.qkvz) return false;
    w.ba = device_copy(a.ba);
  } else {
    w.qkv = device_matrix(a.qkv_op);
    w.z = device_matrix(a.z_op);
    if (!w.qkv || !w.z) return false;
    w.b = device_copy(a.b);
    w.a = device_copy(a.a);
  }
  if (!w.out) return false;
  w.input_norm = device_copy(a.input_norm);
  w.conv = device_copy(a.conv);
  w.dt_bias = device_copy(a.dt_bias);
  w.a_log = device_copy(a.a_log);
  w.norm = device_copy(a.norm);
  return true;
}

size_t delta_net_conv_bytes(const model::ModelConfig& c, int64_t batch) {
  return static_cast<size_t>(batch * (c.linear.conv_kernel - 1) * c.linear.conv_dim()) * sizeof(float);
}

size_t delta_net_recurrent_bytes(const model::ModelConfig& c, int64_t batch) {
  const model::LinearAttentionConfig& d = c.linear;
  return static_cast<size_t>(batch * d.num_value_heads * d.key_head_dim * d.value_head_dim) * sizeof(float);
}

void DeviceDeltaNet::forward(const model::ModelConfig& c, const DeltaNetWeights& w, const float* xn, int64_t batch,
                             int64_t seq_len, int64_t start, DeltaNetState& state, float* out, void* stream) {
  const cudaStream_t s = quant::cuda::stream_of(stream);
  const model::LinearAttentionConfig& d = c.linear;
  const int64_t H = c.hidden_size, n = batch * seq_len, nk = d.num_key_heads, nv = d.num_value_heads,
                dk = d.key_head_dim, dv = d.value_head_dim, rep = nv / nk, kd = d.key_dim(), vd = d.value_dim(),
                cd = d.conv_dim();
  if (start == 0) {
    quant::cuda::check(cudaMemsetAsync(state.conv.data(), 0, state.conv.size(), s), "conv state");
    quant::cuda::check(cudaMemsetAsync(state.recurrent.data(), 0, state.recurrent.size(), s), "recurrent state");
  }
  grow_floats(qkv_, n * cd, s);
  grow_floats(z_, n * vd, s);
  grow_floats(b_, n * nv, s);
  grow_floats(a_, n * nv, s);
  grow_floats(g_, n * nv, s);
  grow_floats(beta_, n * nv, s);
  grow_floats(o_, n * vd, s);
  if (d.fused_projections) {
    const int64_t rows = 2 * kd + 2 * vd;
    grow_floats(qkvz_, n * rows, s);
    grow_floats(ba_, n * 2 * nv, s);
    dense_product(w.qkvz, xn, qkvz_.floats(), n, s, wide_);
    quant::cuda::f32_gemm(xn, w.ba.floats(), ba_.floats(), n, 2 * nv, H, s);
    regroup_kernel<<<elementwise_blocks(n * rows), 256, 0, s>>>(
        qkvz_.floats(), ba_.floats(), n, static_cast<int>(nk), static_cast<int>(dk), static_cast<int>(rep),
        static_cast<int>(dv), qkv_.floats(), z_.floats(), b_.floats(), a_.floats());
    check_launch("delta net regroup kernel");
  } else {
    dense_product(w.qkv, xn, qkv_.floats(), n, s, wide_);
    dense_product(w.z, xn, z_.floats(), n, s, wide_);
    quant::cuda::f32_gemm(xn, w.b.floats(), b_.floats(), n, nv, H, s);
    quant::cuda::f32_gemm(xn, w.a.floats(), a_.floats(), n, nv, H, s);
  }
  causal_conv_kernel<<<static_cast<unsigned>((batch * cd + 127) / 128), 128, 0, s>>>(
      w.conv.floats(), cd, static_cast<int>(d.conv_kernel), qkv_.floats(), batch, seq_len, state.conv.floats());
  check_launch("delta net conv kernel");
  const float q_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dk)));
  norms_gates_kernel<<<dim3(static_cast<unsigned>(n), static_cast<unsigned>(2 * nk + 1)), kRowThreads, 0, s>>>(
      qkv_.floats(), cd, static_cast<int>(nk), static_cast<int>(dk), q_scale, b_.floats(), a_.floats(),
      w.a_log.floats(), w.dt_bias.floats(), static_cast<int>(nv), beta_.floats(), g_.floats());
  check_launch("delta net norms kernel");
  const unsigned blocks = static_cast<unsigned>(batch * nv);
  const int idk = static_cast<int>(dk), idv = static_cast<int>(dv), inv = static_cast<int>(nv),
            irep = static_cast<int>(rep);
  float *state_rows = state.recurrent.floats(), *o = o_.floats();
  if (dk <= 32)
    delta_rule_kernel<32, 1><<<blocks, idv, 0, s>>>(qkv_.floats(), cd, kd, g_.floats(), beta_.floats(), inv, irep,
                                                    seq_len, idk, idv, state_rows, o);
  else if (dk <= 64)
    delta_rule_kernel<32, 2><<<blocks, 2 * idv, 0, s>>>(qkv_.floats(), cd, kd, g_.floats(), beta_.floats(), inv,
                                                        irep, seq_len, idk, idv, state_rows, o);
  else
    delta_rule_kernel<32, 4><<<blocks, 4 * idv, 0, s>>>(qkv_.floats(), cd, kd, g_.floats(), beta_.floats(), inv,
                                                        irep, seq_len, idk, idv, state_rows, o);
  check_launch("delta rule kernel");
  gated_norm_kernel<<<static_cast<unsigned>(n * nv), kRowThreads, 0, s>>>(o_.floats(), z_.floats(), w.norm.floats(),
                                                                          idv, c.rms_norm_eps);
  check_launch("delta net gated norm kernel");
  dense_product(w.out, o_.floats(), out, n, s, wide_);
}

}  // namespace eq::exec::cuda
