#include "model/linear_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include <Eigen/Core>

#include "core/thread_pool.h"
#include "model/attention_core.h"
#include "model/float_buffer.h"
#include "model/projection.h"

namespace eq::model {
namespace {

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float silu(float x) { return x * sigmoid(x); }
// softplus with the linear branch above 20, as torch's default threshold.
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// The projections of n rows in one layout: qkv [n, conv_dim] (all q heads,
// all k heads, all v heads), z [n, dv nv], b and a [n, nv].
struct Projected {
  FloatBuffer qkv, z, b, a;
};

Projected project_inputs(const ModelConfig& c, const LinearAttentionWeights& w, const float* x, int64_t n) {
  const LinearAttentionConfig& d = c.linear;
  const int64_t H = c.hidden_size, nk = d.num_key_heads, nv = d.num_value_heads, dk = d.key_head_dim,
                dv = d.value_head_dim, rep = nv / nk, kd = d.key_dim(), vd = d.value_dim(), cd = d.conv_dim();
  Projected p;
  p.qkv.resize(n * cd);
  p.z.resize(n * vd);
  p.b.resize(n * nv);
  p.a.resize(n * nv);
  if (!d.fused_projections) {
    const Projection ps[] = {{&w.qkv, w.qkv_op, cd, nullptr, p.qkv.data()},
                             {&w.z, w.z_op, vd, nullptr, p.z.data()},
                             {&w.b, nullptr, nv, nullptr, p.b.data()},
                             {&w.a, nullptr, nv, nullptr, p.a.data()}};
    project_shared(x, n, H, ps);
    return p;
  }
  // Fused rows per key head g: [q (dk) | k (dk) | v (rep dv) | z (rep dv)]
  // and [b (rep) | a (rep)]; value head h = g rep + i.
  const int64_t group = 2 * dk + 2 * rep * dv, qkvz_rows = nk * group;
  FloatBuffer qkvz(n * qkvz_rows), ba(n * 2 * nv);
  project(x, n, H, w.qkvz, w.qkvz_op, qkvz_rows, nullptr, qkvz.data());
  project(x, n, H, w.ba, nullptr, 2 * nv, nullptr, ba.data());
  for (int64_t r = 0; r < n; ++r)
    for (int64_t g = 0; g < nk; ++g) {
      const float* src = qkvz.data() + r * qkvz_rows + g * group;
      float* row = p.qkv.data() + r * cd;
      std::memcpy(row + g * dk, src, dk * sizeof(float));
      std::memcpy(row + kd + g * dk, src + dk, dk * sizeof(float));
      std::memcpy(row + 2 * kd + g * rep * dv, src + 2 * dk, rep * dv * sizeof(float));
      std::memcpy(p.z.data() + r * vd + g * rep * dv, src + 2 * dk + rep * dv, rep * dv * sizeof(float));
      const float* bsrc = ba.data() + r * 2 * nv + g * 2 * rep;
      std::memcpy(p.b.data() + r * nv + g * rep, bsrc, rep * sizeof(float));
      std::memcpy(p.a.data() + r * nv + g * rep, bsrc + rep, rep * sizeof(float));
    }
  return p;
}

// Causal depthwise conv1d + SiLU over one sequence's `steps` rows of qkv
// (in place), continuing from `state` (the previous kernel-1 inputs) and
// leaving the last kernel-1 inputs there.
void causal_conv(const float* weight, int64_t channels, int64_t kernel, float* qkv, int64_t steps, float* state) {
  const int64_t keep = kernel - 1;
  // The inputs: state rows, then this call's rows.
  std::vector<float> in(static_cast<size_t>((keep + steps) * channels));
  std::memcpy(in.data(), state, keep * channels * sizeof(float));
  std::memcpy(in.data() + keep * channels, qkv, steps * channels * sizeof(float));
  for (int64_t t = 0; t < steps; ++t)
    for (int64_t ch = 0; ch < channels; ++ch) {
      float s = 0;
      for (int64_t j = 0; j < kernel; ++j) s += weight[ch * kernel + j] * in[(t + j) * channels + ch];
      qkv[t * channels + ch] = silu(s);
    }
  std::memcpy(state, in.data() + steps * channels, keep * channels * sizeof(float));
}

void l2_normalize(float* x, int64_t dim, float scale) {
  float ss = 0;
  for (int64_t i = 0; i < dim; ++i) ss += x[i] * x[i];
  const float inv = scale / std::sqrt(ss + 1e-6f);
  for (int64_t i = 0; i < dim; ++i) x[i] *= inv;
}

}  // namespace

LinearAttentionWeights load_linear_attention(const WeightStore& w, const ModelConfig& c, int64_t layer) {
  const LinearAttentionConfig& d = c.linear;
  const std::string p = linear_attn_prefix(layer);
  const int64_t H = c.hidden_size, nv = d.num_value_heads;
  LinearAttentionWeights a;
  a.input_norm = load_norm(w, c, "model.layers." + std::to_string(layer) + ".input_layernorm.weight", H);
  // A quantized projection runs through its LinearOp (pack --attn-format).
  auto proj = [&](const std::string& name, int64_t rows, Tensor32Ptr& t, const LinearOp*& op) {
    op = w.op(name);
    if (!op) t = w.get(name, {rows, H});
  };
  if (d.fused_projections) {
    proj(p + "in_proj_qkvz.weight", 2 * d.key_dim() + 2 * d.value_dim(), a.qkvz, a.qkvz_op);
    a.ba = w.get(p + "in_proj_ba.weight", {2 * nv, H});
  } else {
    proj(p + "in_proj_qkv.weight", d.conv_dim(), a.qkv, a.qkv_op);
    proj(p + "in_proj_z.weight", d.value_dim(), a.z, a.z_op);
    a.b = w.get(p + "in_proj_b.weight", {nv, H});
    a.a = w.get(p + "in_proj_a.weight", {nv, H});
  }
  a.conv = w.get(p + "conv1d.weight", {d.conv_dim(), 1, d.conv_kernel});
  a.dt_bias = w.get(p + "dt_bias", {nv});
  a.a_log = w.get(p + "A_log", {nv});
  a.norm = w.get(p + "norm.weight", {d.value_head_dim});
  a.out_op = w.op(p + "out_proj.weight");
  if (!a.out_op) a.out = w.get(p + "out_proj.weight", {H, d.value_dim()});
  return a;
}

void gated_delta_rule(const float* q, const float* k, int64_t ldqk, const float* v, int64_t ldv, const float* g,
                      const float* beta, int64_t ldgb, int64_t steps, int64_t dk, int64_t dv, float* state, float* out,
                      int64_t ldo) {
  std::vector<float> kv(static_cast<size_t>(dv));
  for (int64_t t = 0; t < steps; ++t) {
    const float* qt = q + t * ldqk;
    const float* kt = k + t * ldqk;
    const float* vt = v + t * ldv;
    const float decay = std::exp(g[t * ldgb]), b = beta[t * ldgb];
    for (int64_t i = 0; i < dk * dv; ++i) state[i] *= decay;
    std::fill(kv.begin(), kv.end(), 0.0f);
    for (int64_t i = 0; i < dk; ++i)
      for (int64_t j = 0; j < dv; ++j) kv[j] += state[i * dv + j] * kt[i];
    for (int64_t j = 0; j < dv; ++j) kv[j] = (vt[j] - kv[j]) * b;  // the delta, times beta
    for (int64_t i = 0; i < dk; ++i)
      for (int64_t j = 0; j < dv; ++j) state[i * dv + j] += kt[i] * kv[j];
    float* ot = out + t * ldo;
    for (int64_t j = 0; j < dv; ++j) ot[j] = 0;
    for (int64_t i = 0; i < dk; ++i)
      for (int64_t j = 0; j < dv; ++j) ot[j] += state[i * dv + j] * qt[i];
  }
}

void gated_delta_rule_chunked(const float* q, const float* k, int64_t ldqk, const float* v, int64_t ldv,
                              const float* g, const float* beta, int64_t ldgb, int64_t steps, int64_t dk, int64_t dv,
                              float* state, float* out, int64_t ldo, int64_t chunk) {
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Rows = Eigen::Map<const Mat, 0, Eigen::OuterStride<>>;
  using OutRows = Eigen::Map<Mat, 0, Eigen::OuterStride<>>;
  Eigen::Map<Mat> S(state, dk, dv);
  Eigen::VectorXf G(chunk);
  Mat A, D, U, QS, KD;
  for (int64_t c0 = 0; c0 < steps; c0 += chunk) {
    const int64_t L = std::min(chunk, steps - c0);
    const Rows Q(q + c0 * ldqk, L, dk, Eigen::OuterStride<>(ldqk));
    const Rows K(k + c0 * ldqk, L, dk, Eigen::OuterStride<>(ldqk));
    const Rows V(v + c0 * ldv, L, dv, Eigen::OuterStride<>(ldv));
    for (int64_t i = 0; i < L; ++i) G[i] = (i ? G[i - 1] : 0.0f) + g[(c0 + i) * ldgb];
    // Right-hand side [beta v | beta k exp(G)], solved in place by forward
    // substitution of the unit lower-triangular system.
    U.resize(L, dv + dk);
    for (int64_t i = 0; i < L; ++i) {
      const float b = beta[(c0 + i) * ldgb];
      U.row(i).head(dv) = b * V.row(i);
      U.row(i).tail(dk) = (b * std::exp(G[i])) * K.row(i);
    }
    // The decays between positions, D(i, j) = exp(G_i - G_j) for j <= i,
    // used by the solve and by the scores.
    D.resize(L, L);
    for (int64_t i = 0; i < L; ++i)
      for (int64_t j = 0; j <= i; ++j) D(i, j) = std::exp(G[i] - G[j]);
    A.noalias() = K * K.transpose();  // [L, L]: k_i · k_j
    for (int64_t i = 0; i < L; ++i) {
      const float b = beta[(c0 + i) * ldgb];
      for (int64_t j = 0; j < i; ++j) A(i, j) *= b * D(i, j);
    }
    // UnitLower reads only the strictly lower part: the diagonal is 1.
    A.triangularView<Eigen::UnitLower>().solveInPlace(U);
    // v_new = U_v - U_k S, in the first dv columns of U.
    U.leftCols(dv).noalias() -= U.rightCols(dk) * S;
    const auto vnew = U.leftCols(dv);
    // Intra-chunk scores, causal incl. the diagonal, decayed.
    A.noalias() = Q * K.transpose();
    for (int64_t i = 0; i < L; ++i)
      for (int64_t j = 0; j <= i; ++j) A(i, j) *= D(i, j);
    A.triangularView<Eigen::StrictlyUpper>().setZero();
    OutRows O(out + c0 * ldo, L, dv, Eigen::OuterStride<>(ldo));
    QS.noalias() = Q * S;
    for (int64_t i = 0; i < L; ++i) QS.row(i) *= std::exp(G[i]);
    O.noalias() = QS;
    O.noalias() += A * vnew;
    // The state after the chunk.
    const float last = G[L - 1];
    KD = K;
    for (int64_t i = 0; i < L; ++i) KD.row(i) *= std::exp(last - G[i]);
    S *= std::exp(last);
    S.noalias() += KD.transpose() * vnew;
  }
}

namespace {
// The chunked form at kDeltaChunk, with gated_delta_rule's signature.
void gated_delta_rule_chunked_default(const float* q, const float* k, int64_t ldqk, const float* v, int64_t ldv,
                                      const float* g, const float* beta, int64_t ldgb, int64_t steps, int64_t dk,
                                      int64_t dv, float* state, float* out, int64_t ldo) {
  gated_delta_rule_chunked(q, k, ldqk, v, ldv, g, beta, ldgb, steps, dk, dv, state, out, ldo);
}
}  // namespace

void linear_attention_forward(const ModelConfig& c, const LinearAttentionWeights& w, int64_t layer, const float* x,
                              int64_t batch, int64_t seq_len, KvCache& cache, float* out) {
  const LinearAttentionConfig& d = c.linear;
  const int64_t H = c.hidden_size, n = batch * seq_len, nk = d.num_key_heads, nv = d.num_value_heads,
                dk = d.key_head_dim, dv = d.value_head_dim, rep = nv / nk, kd = d.key_dim(), vd = d.value_dim(),
                cd = d.conv_dim();
  if (cache.length() == 0)
    for (int64_t b = 0; b < batch; ++b) {
      std::fill_n(cache.conv_state(layer, b), cache.conv_state_dim(), 0.0f);
      std::fill_n(cache.recurrent_state(layer, b), cache.recurrent_state_dim(), 0.0f);
    }
  Projected p = project_inputs(c, w, x, n);

  // Conv per sequence, then per row: L2 norms and the gates.
  default_pool().run(static_cast<size_t>(batch), [&](size_t b) {
    causal_conv(w.conv->data.data(), cd, d.conv_kernel, p.qkv.data() + b * seq_len * cd, seq_len,
                cache.conv_state(layer, static_cast<int64_t>(b)));
  });
  const float q_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dk)));
  FloatBuffer g(n * nv), beta(n * nv);
  for (int64_t r = 0; r < n; ++r) {
    float* row = p.qkv.data() + r * cd;
    for (int64_t h = 0; h < nk; ++h) {
      l2_normalize(row + h * dk, dk, q_scale);
      l2_normalize(row + kd + h * dk, dk, 1.0f);
    }
    for (int64_t h = 0; h < nv; ++h) {
      beta[r * nv + h] = sigmoid(p.b[r * nv + h]);
      g[r * nv + h] = -std::exp(w.a_log->data[h]) * softplus(p.a[r * nv + h] + w.dt_bias->data[h]);
    }
  }

  // One task per (sequence, value head): the recurrence for one token, the
  // chunked form for more.
  FloatBuffer o(n * vd);
  default_pool().run(static_cast<size_t>(batch * nv), [&](size_t task) {
    const int64_t b = static_cast<int64_t>(task) / nv, h = static_cast<int64_t>(task) % nv, kh = h / rep;
    const float* base = p.qkv.data() + b * seq_len * cd;
    const auto rule = seq_len == 1 ? gated_delta_rule : gated_delta_rule_chunked_default;
    rule(base + kh * dk, base + kd + kh * dk, cd, base + 2 * kd + h * dv, cd, g.data() + b * seq_len * nv + h,
         beta.data() + b * seq_len * nv + h, nv, seq_len, dk, dv, cache.recurrent_state(layer, b) + h * dk * dv,
         o.data() + b * seq_len * vd + h * dv, vd);
  });

  // Gated RMSNorm per value head: RMSNorm(o) w SiLU(z).
  const float* nw = w.norm->data.data();
  for (int64_t r = 0; r < n * nv; ++r) {
    float* oh = o.data() + r * dv;
    const float* zh = p.z.data() + r * dv;
    double ss = 0;
    for (int64_t i = 0; i < dv; ++i) ss += static_cast<double>(oh[i]) * oh[i];
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(dv) + c.rms_norm_eps));
    for (int64_t i = 0; i < dv; ++i) oh[i] = nw[i] * (oh[i] * inv) * silu(zh[i]);
  }
  project(o.data(), n, vd, w.out, w.out_op, H, nullptr, out);
}

}  // namespace eq::model
