// The gated delta net on the GPU (exec/cuda/device_delta_net.h; ctest label
// `cuda`) against the CPU's model::linear_attention_forward on random weights
// and inputs: a prefill of 2 sequences (the CPU's chunked form, over more than
// one chunk), a second chunk of 5 positions, then decode steps (the CPU's
// recurrence), outputs and the states left in the cache, for key heads of 32,
// 64 and 128 (a state column on 1, 2 and 4 threads), both projection layouts,
// and value heads whose threads end in a partial warp (64 x 40: 80 threads).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "exec/cuda/cuda_dispatch.h"
#include "exec/cuda/device_delta_net.h"
#include "exec/cuda/device_exec.h"
#include "exec/cuda/device_linear.h"
#include "model/config.h"
#include "model/kv_cache.h"
#include "model/linear_attention.h"

namespace eq::exec {
namespace {

struct Shape {
  const char* model_type;  // qwen3_next: fused projections; qwen3_5_moe_text: separate
  int64_t key_heads, value_heads, dk, dv;
};

model::ModelConfig config_of(const Shape& s) {
  auto j = nlohmann::json::parse(R"({"vocab_size":256,"hidden_size":96,"num_hidden_layers":4,
    "num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"num_experts":8,"num_experts_per_tok":2,
    "moe_intermediate_size":32,"shared_expert_intermediate_size":48,"rms_norm_eps":1e-6,
    "rope_parameters":{"rope_theta":1e7,"rope_type":"default","partial_rotary_factor":0.25},
    "linear_conv_kernel_dim":4})");
  j["model_type"] = s.model_type;
  j["linear_num_key_heads"] = s.key_heads;
  j["linear_num_value_heads"] = s.value_heads;
  j["linear_key_head_dim"] = s.dk;
  j["linear_value_head_dim"] = s.dv;
  return model::parse_config(j, "cfg.json");
}

model::Tensor32Ptr random_tensor(std::vector<int64_t> shape, float scale, float offset, std::mt19937& rng) {
  auto t = std::make_shared<model::Tensor32>();
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  t->shape = std::move(shape);
  t->data.resize(static_cast<size_t>(n));
  std::normal_distribution<float> n01(0.0f, 1.0f);
  for (float& x : t->data) x = offset + scale * n01(rng);
  return t;
}

// max |a - b| over max |b|.
double relative_gap(const std::vector<float>& a, const std::vector<float>& b) {
  double gap = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    gap = std::max(gap, std::abs(double(a[i]) - b[i]));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  return gap / std::max(scale, 1e-30);
}

void expect_matches_cpu(const Shape& shape) {
  const model::ModelConfig c = config_of(shape);
  const model::LinearAttentionConfig& d = c.linear;
  const int64_t H = c.hidden_size, B = 2, T = 70, T2 = 5, steps = 3, layer = 0;
  ASSERT_TRUE(c.layer_linear(layer));
  std::mt19937 rng(static_cast<uint32_t>(shape.dk * 131 + shape.dv));
  const float w_scale = 1.0f / std::sqrt(static_cast<float>(H));
  model::LinearAttentionWeights w;
  if (d.fused_projections) {
    w.qkvz = random_tensor({2 * d.key_dim() + 2 * d.value_dim(), H}, w_scale, 0, rng);
    w.ba = random_tensor({2 * d.num_value_heads, H}, w_scale, 0, rng);
  } else {
    w.qkv = random_tensor({d.conv_dim(), H}, w_scale, 0, rng);
    w.z = random_tensor({d.value_dim(), H}, w_scale, 0, rng);
    w.b = random_tensor({d.num_value_heads, H}, w_scale, 0, rng);
    w.a = random_tensor({d.num_value_heads, H}, w_scale, 0, rng);
  }
  w.conv = random_tensor({d.conv_dim(), 1, d.conv_kernel}, 0.5f, 0, rng);
  w.dt_bias = random_tensor({d.num_value_heads}, 0.5f, 0, rng);
  w.a_log = random_tensor({d.num_value_heads}, 0.5f, -1.0f, rng);  // decays near 1 and below: the state lasts
  w.norm = random_tensor({d.value_head_dim}, 0.1f, 1.0f, rng);
  w.out = random_tensor({H, d.value_dim()}, 1.0f / std::sqrt(static_cast<float>(d.value_dim())), 0, rng);
  const model::Tensor32Ptr x_prefill = random_tensor({B * T, H}, 1.0f, 0, rng);
  const model::Tensor32Ptr x_chunk = random_tensor({B * T2, H}, 1.0f, 0, rng);
  const model::Tensor32Ptr x_steps = random_tensor({steps, B, H}, 1.0f, 0, rng);

  // The CPU: the prefill, the second chunk, then one token of each sequence a step.
  model::KvCache cache(c, B, T + T2 + steps);
  const int64_t rows = B * T + B * T2 + steps * B, at_steps = B * (T + T2);
  std::vector<float> cpu(static_cast<size_t>(rows * H));
  model::linear_attention_forward(c, w, layer, x_prefill->data.data(), B, T, cache, cpu.data());
  cache.advance(T);
  model::linear_attention_forward(c, w, layer, x_chunk->data.data(), B, T2, cache, cpu.data() + B * T * H);
  cache.advance(T2);
  for (int64_t s = 0; s < steps; ++s) {
    model::linear_attention_forward(c, w, layer, x_steps->data.data() + s * B * H, B, 1, cache,
                                    cpu.data() + (at_steps + s * B) * H);
    cache.advance(1);
  }

  // The GPU, the same calls.
  cuda::DeltaNetWeights dw;
  cuda::DeviceBuffer qkvz = cuda::device_copy(w.qkvz), qkv = cuda::device_copy(w.qkv), z = cuda::device_copy(w.z),
               out = cuda::device_copy(w.out);
  // Float32 matrices as device_matrix gives them ([rows, cols] of the host tensors).
  auto dense = [](const cuda::DeviceBuffer& b, const model::Tensor32Ptr& t) {
    return b.size() ? cuda::DenseMatrix{b.data(), t->shape[0], t->shape[1], false} : cuda::DenseMatrix{};
  };
  dw.qkvz = dense(qkvz, w.qkvz);
  dw.qkv = dense(qkv, w.qkv);
  dw.z = dense(z, w.z);
  dw.out = dense(out, w.out);
  dw.ba = cuda::device_copy(w.ba);
  dw.b = cuda::device_copy(w.b);
  dw.a = cuda::device_copy(w.a);
  dw.conv = cuda::device_copy(w.conv);
  dw.dt_bias = cuda::device_copy(w.dt_bias);
  dw.a_log = cuda::device_copy(w.a_log);
  dw.norm = cuda::device_copy(w.norm);
  cuda::DeltaNetState state{cuda::DeviceBuffer(cuda::delta_net_conv_bytes(c, B)),
                            cuda::DeviceBuffer(cuda::delta_net_recurrent_bytes(c, B))};
  // Left over from another sequence: a call at position 0 zeroes the states first.
  for (cuda::DeviceBuffer* b : {&state.conv, &state.recurrent}) {
    std::vector<float> junk(b->size() / sizeof(float), 7.0f);
    b->upload(junk.data(), junk.size() * sizeof(float));
  }
  cuda::DeviceBuffer x(static_cast<size_t>(rows * H) * sizeof(float)), y(static_cast<size_t>(rows * H) * sizeof(float));
  x.upload(x_prefill->data.data(), static_cast<size_t>(B * T * H) * sizeof(float));
  x.upload(x_chunk->data.data(), static_cast<size_t>(B * T2 * H) * sizeof(float),
           static_cast<size_t>(B * T * H) * sizeof(float));
  x.upload(x_steps->data.data(), static_cast<size_t>(steps * B * H) * sizeof(float),
           static_cast<size_t>(at_steps * H) * sizeof(float));
  cuda::DeviceDeltaNet net;
  net.forward(c, dw, x.floats(), B, T, 0, state, y.floats(), nullptr);
  net.forward(c, dw, x.floats() + B * T * H, B, T2, T, state, y.floats() + B * T * H, nullptr);
  for (int64_t s = 0; s < steps; ++s)
    net.forward(c, dw, x.floats() + (at_steps + s * B) * H, B, 1, T + T2 + s, state,
                y.floats() + (at_steps + s * B) * H, nullptr);
  std::vector<float> gpu(cpu.size()), conv(state.conv.size() / sizeof(float)),
      recurrent(state.recurrent.size() / sizeof(float));
  y.download(gpu.data(), gpu.size() * sizeof(float));
  state.conv.download(conv.data(), conv.size() * sizeof(float));
  state.recurrent.download(recurrent.data(), recurrent.size() * sizeof(float));

  std::vector<float> cpu_conv, cpu_recurrent;
  for (int64_t b = 0; b < B; ++b) {
    cpu_conv.insert(cpu_conv.end(), cache.conv_state(layer, b), cache.conv_state(layer, b) + cache.conv_state_dim());
    cpu_recurrent.insert(cpu_recurrent.end(), cache.recurrent_state(layer, b),
                         cache.recurrent_state(layer, b) + cache.recurrent_state_dim());
  }
  const double out_gap = relative_gap(gpu, cpu), conv_gap = relative_gap(conv, cpu_conv),
               state_gap = relative_gap(recurrent, cpu_recurrent);
  std::printf("%s dk %lld dv %lld: outputs %.3g, conv state %.3g, recurrent state %.3g (max gap / max value)\n",
              shape.model_type, static_cast<long long>(shape.dk), static_cast<long long>(shape.dv), out_gap,
              conv_gap, state_gap);
  // Float32 products and sums in other orders (the chunked form against
  // the recurrence): about 1e-6 measured; a wrong head, row or gate is O(1).
  EXPECT_LE(out_gap, 1e-4);
  EXPECT_LE(conv_gap, 1e-6);  // the last projections themselves, no recurrence (measured <= 4.1e-7)
  EXPECT_LE(state_gap, 1e-4);
}

TEST(DeviceDeltaNet, MatchesTheCpu) {
  const std::string why = cuda::unavailable_reason();
  if (!why.empty()) GTEST_SKIP() << "no GPU: " << why;
  for (const Shape& s : {Shape{"qwen3_5_moe_text", 2, 4, 32, 32}, Shape{"qwen3_next", 2, 4, 64, 64},
                         Shape{"qwen3_5_moe_text", 2, 4, 128, 128}, Shape{"qwen3_next", 1, 3, 128, 40},
                         Shape{"qwen3_5_moe_text", 2, 4, 64, 40}})
    expect_matches_cpu(s);
}

}  // namespace
}  // namespace eq::exec
