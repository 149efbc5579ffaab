// One gated delta net (linear-attention) layer on the GPU
// (exec/cuda/device_delta_net.h) at Qwen3-Next-80B-A3B's shape: hidden 2048,
// 16 key heads and 32 value heads of 128, conv kernel 4, fused projections,
// random float32 weights (its matrices 135 MB). Times a decode step (batch 1
// and 8) and prefills of one sequence, each the median of --reps runs after a
// warm-up, and the decode step's weight bytes against a copy kernel's rate in
// the same run. The CPU's figures are bench/gated_delta_layer's.
//
//   bench/delta_net_cuda [--prefill 256,1024,4096] [--reps 5]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cuda_bench.cuh"
#include "exec/cuda/cuda_dispatch.h"
#include "exec/cuda/device_delta_net.h"
#include "exec/cuda/device_exec.h"
#include "model/config.h"

namespace {

using eq::exec::cuda::DeviceBuffer;

DeviceBuffer random_device(int64_t n, float scale, float offset, std::mt19937& rng) {
  std::vector<float> h(static_cast<size_t>(n));
  std::normal_distribution<float> n01(0.0f, 1.0f);
  for (float& x : h) x = offset + scale * n01(rng);
  DeviceBuffer d(h.size() * sizeof(float));
  d.upload(h.data(), h.size() * sizeof(float));
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace eq;
  std::string prefill_arg = "256,1024,4096";
  int reps = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--prefill") prefill_arg = argv[i + 1];
    else if (a == "--reps") reps = std::max(1, std::atoi(argv[i + 1]));
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  const std::string why = exec::cuda::unavailable_reason();
  if (!why.empty()) {
    std::fprintf(stderr, "no GPU: %s\n", why.c_str());
    return 1;
  }
  const auto j = nlohmann::json::parse(R"({"model_type":"qwen3_next","vocab_size":151936,"hidden_size":2048,
    "num_hidden_layers":48,"num_attention_heads":16,"num_key_value_heads":2,"head_dim":256,"num_experts":512,
    "num_experts_per_tok":10,"moe_intermediate_size":512,"shared_expert_intermediate_size":512,"rms_norm_eps":1e-6,
    "rope_parameters":{"rope_theta":1e7,"rope_type":"default","partial_rotary_factor":0.25},
    "linear_num_key_heads":16,"linear_num_value_heads":32,"linear_key_head_dim":128,"linear_value_head_dim":128,
    "linear_conv_kernel_dim":4})");
  const model::ModelConfig c = model::parse_config(j, "qwen3-next-80b-a3b");
  const model::LinearAttentionConfig& d = c.linear;
  const int64_t H = c.hidden_size, qkvz_rows = 2 * d.key_dim() + 2 * d.value_dim();
  std::mt19937 rng(1);
  const float ws = 1.0f / std::sqrt(static_cast<float>(H));
  DeviceBuffer qkvz = random_device(qkvz_rows * H, ws, 0, rng), out = random_device(H * d.value_dim(), ws, 0, rng);
  exec::cuda::DeltaNetWeights w;
  w.qkvz = qkvz.floats();
  w.out = out.floats();
  w.ba = random_device(2 * d.num_value_heads * H, ws, 0, rng);
  w.conv = random_device(d.conv_dim() * d.conv_kernel, 0.5f, 0, rng);
  w.dt_bias = random_device(d.num_value_heads, 0.5f, 0, rng);
  w.a_log = random_device(d.num_value_heads, 0.5f, -1.0f, rng);
  w.norm = random_device(d.value_head_dim, 0.1f, 1.0f, rng);
  const double weight_bytes = 4.0 * static_cast<double>(qkvz_rows * H + H * d.value_dim() + 2 * d.num_value_heads * H);

  cudaStream_t s = nullptr;
  bench::check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  double copy = 0;
  {
    const bench::CopyPool pool(1024, s);
    copy = bench::copy_gbps(pool, s);
  }
  std::printf("gated delta net layer, Qwen3-Next-80B-A3B shape (weights %.1f MB float32); copy kernel %.0f GB/s\n",
              weight_bytes / 1e6, copy);
  exec::cuda::DeviceDeltaNet net;
  // Median ms of `reps` calls of `batch` sequences of `seq_len` positions (after one warm-up), each from position 0
  // (prefill) or after `past` positions (decode).
  auto time = [&](int64_t batch, int64_t seq_len, int64_t past) {
    exec::cuda::DeltaNetState st{DeviceBuffer(exec::cuda::delta_net_conv_bytes(c, batch)),
                                 DeviceBuffer(exec::cuda::delta_net_recurrent_bytes(c, batch))};
    bench::check(cudaMemset(st.conv.data(), 0, st.conv.size()), "memset");
    bench::check(cudaMemset(st.recurrent.data(), 0, st.recurrent.size()), "memset");
    DeviceBuffer x = random_device(batch * seq_len * H, 1.0f, 0, rng), y(static_cast<size_t>(batch * seq_len * H) * 4);
    std::vector<float> ms;
    for (int r = 0; r <= reps; ++r) {
      const float t = bench::event_ms(s, [&] { net.forward(c, w, x.floats(), batch, seq_len, past, st, y.floats(), s); },
                                      "delta net");
      if (r > 0) ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    return static_cast<double>(ms[ms.size() / 2]);
  };
  for (int64_t batch : {1, 8}) {
    const double ms = time(batch, 1, 100);
    std::printf("decode, batch %lld: %.3f ms a step, %.0f tokens/s; weights read at %.0f GB/s (%.1f%% of the copy)\n",
                static_cast<long long>(batch), ms, batch / (ms * 1e-3), weight_bytes / (ms * 1e-3) / 1e9,
                100.0 * weight_bytes / (ms * 1e-3) / 1e9 / copy);
  }
  for (const std::string& p : bench::split(prefill_arg)) {
    const int64_t n = std::atoll(p.c_str());
    const double ms = time(1, n, 0);
    std::printf("prefill %lld tokens: %.2f ms, %.0f tokens/s\n", static_cast<long long>(n), ms, n / (ms * 1e-3));
  }
  cudaStreamDestroy(s);
  return 0;
}
