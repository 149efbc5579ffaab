// The GPU decode of one MoE layer's routed experts (lib/exec/cuda, issue #41),
// against a device-to-device copy kernel in the same run:
//   bench/moe_layer_cuda [--shape qwen3-30b-a3b] [--formats f1,f2,...] [--iters N] [--copy-mib N] [--m M]
// For each format (default: every registered row): a synthetic layer of the
// shape (lib/exec/synthetic_layer.h, random codes and valid scales: the
// kernels do a real pack's work) copied to the GPU, then `iters` decode steps
// of M tokens (--m, default 1) through the same top_k experts drawn at random
// (expert_mlp_decode: gate and up in grouped launches, then down), all
// captured in one CUDA graph so that launch costs on the host do not set the
// pace; timed with events. Printed: the packed bytes the routed experts read
// per step, microseconds per step, GB/s of packed bytes read, and that as a
// share of the copy kernel's GB/s (bytes read + written: the DRAM traffic a
// copy moves) over 1 GiB, and beside it the copy kernel's GB/s at the step's
// size (copy@step: as many copies as steps in one graph, each moving the bytes
// a step reads, from slices of the 1 GiB buffers that move on copy after copy)
// and the step's share of that: how much of the gap is the size of a step.
// Different experts each step keep most reads out of the 60 MB L2
// (a layer's experts are 150 MB to 1.2 GB). Also printed: the launch floor,
// steps of as many dependent empty kernels as a decode step launched before
// SwiGLU moved into down's input (3: gate and up, SwiGLU, down; trellis 7:
// each product adds two rotations); the stream and trellis rows now launch
// one fewer.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "cuda_bench.cuh"
#include "exec/cuda/device_moe.h"
#include "exec/synthetic_layer.h"
#include "quant/format.h"

namespace {

using namespace eq;
using namespace eq::bench;

// Milliseconds of the fastest of 3 runs of the graph that `enqueue` captures
// on s (run once before, untimed).
template <typename Enqueue>
float best_graph_ms(cudaStream_t s, const Enqueue& enqueue) {
  const CapturedGraph graph(s, enqueue);
  if (!graph) {
    std::fprintf(stderr, "CUDA: the step could not be captured as a graph\n");
    std::exit(1);
  }
  graph.launch(s);
  float best = 1e30f;
  for (int rep = 0; rep < 3; ++rep) best = std::min(best, event_ms(s, [&] { graph.launch(s); }, "graph run"));
  return best;
}

__global__ void empty_kernel() {}

// Microseconds per step of `kernels` dependent empty kernels, `iters` steps in
// one graph: the launch floor under a decode step of as many kernels.
double floor_us(int kernels, int iters, cudaStream_t s) {
  const float ms = best_graph_ms(s, [&] {
    for (int t = 0; t < iters * kernels; ++t) empty_kernel<<<1, 32, 0, s>>>();
  });
  return ms * 1e3 / iters;
}

// GB/s of the copy kernel at a decode step's size: `iters` copies in one graph
// (as the steps are), each moving `bytes` of DRAM traffic (bytes / 2 read,
// bytes / 2 written) between slices of the pool that move on copy after copy,
// so that, like the steps' experts, most reads miss the L2. Best of 3.
double copy_gbps_at(const CopyPool& pool, double bytes, int iters, cudaStream_t s) {
  const size_t half = (static_cast<size_t>(bytes / 2) + 255) / 256 * 256, n = half / sizeof(float4);
  const size_t slots = pool.bytes / half;
  const float ms = best_graph_ms(s, [&] {
    for (int t = 0; t < iters; ++t) {
      const size_t at = (static_cast<size_t>(t) % slots) * n;
      copy_kernel<<<pool.blocks, 256, 0, s>>>(pool.a + at, pool.b + at, n);
    }
  });
  return 2.0 * static_cast<double>(half) * iters / (ms * 1e-3) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  std::string shape_name = "qwen3-30b-a3b", formats_arg;
  int m_rows = 1;  // rows of x every routed expert takes (a decode step of M tokens through the same experts)
  int iters = 200;
  size_t copy_mib = 1024;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--shape") shape_name = argv[i + 1];
    else if (a == "--formats") formats_arg = argv[i + 1];
    else if (a == "--iters") iters = std::atoi(argv[i + 1]);
    else if (a == "--copy-mib") copy_mib = static_cast<size_t>(std::atol(argv[i + 1]));
    else if (a == "--m") m_rows = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  try {
    const std::string why = exec::cuda::unavailable_reason();
    if (!why.empty()) {
      std::printf("no GPU: %s\n", why.c_str());
      return 0;
    }
    const exec::LayerShape* shape = exec::find_layer_shape(shape_name);
    EQ_CHECK(shape != nullptr, "unknown shape " + shape_name);
    std::vector<const quant::FormatTraits*> formats;
    if (formats_arg.empty())
      for (const quant::FormatTraits& f : quant::all_formats()) formats.push_back(&f);
    else
      for (const std::string& n : split(formats_arg)) formats.push_back(&quant::format_by_name(n));

    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, 0), "properties");
    cudaStream_t s;
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
    const CopyPool pool(copy_mib, s);
    const double copy = copy_gbps(pool, s);
    std::printf("GPU: %s, %d SMs, L2 %d MiB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
    std::printf("shape %s: %lld experts, top-%lld, hidden %lld, intermediate %lld; M = %d; %d steps in one graph\n",
                shape->name.c_str(), static_cast<long long>(shape->experts), static_cast<long long>(shape->top_k),
                static_cast<long long>(shape->hidden), static_cast<long long>(shape->intermediate), m_rows, iters);
    std::printf("copy kernel (%zu MiB -> %zu MiB): %.0f GB/s read + written\n", copy_mib, copy_mib, copy);
    std::printf("launch floor: 3 dependent empty kernels %.2f us/step, 7 (a trellis step) %.2f us/step\n",
                floor_us(3, iters, s), floor_us(7, iters, s));
    if (const char* b = std::getenv("EXPERTQUANT_GPU_LOAD_BATCH")) std::printf("EXPERTQUANT_GPU_LOAD_BATCH=%s\n", b);
    std::printf("\n");
    std::printf("%-12s %10s %12s %10s %10s %9s %15s %14s\n", "format", "layer MB", "MB/step", "us/step", "GB/s", "of copy",
                "copy@step GB/s", "of copy@step");

    const std::vector<int32_t> ids = exec::random_expert_ids(shape->experts, shape->top_k, iters, 42);
    for (const quant::FormatTraits* f : formats) {
      exec::FormatMix mix{std::string(f->name), {{f, 1.0}}};
      const std::unique_ptr<exec::SyntheticLayer> layer = exec::make_synthetic_layer(*shape, mix, 7);
      const exec::PackedLayer& L = layer->layer();
      std::vector<exec::cuda::DeviceExpert> experts(static_cast<size_t>(shape->experts));
      for (int64_t e = 0; e < shape->experts; ++e) {
        const exec::ExpertLocation loc = L.experts[static_cast<size_t>(e)];
        experts[static_cast<size_t>(e)] = exec::cuda::upload(L.groups[loc.group].slots[loc.slot]);
      }
      std::vector<float> x(static_cast<size_t>(shape->hidden * m_rows));
      std::mt19937 rng(3);
      std::normal_distribution<float> nd;
      for (float& v : x) v = nd(rng);
      exec::cuda::DeviceBuffer dx(x.size() * sizeof(float)),
          dout(static_cast<size_t>(shape->top_k * shape->hidden * m_rows) * sizeof(float)), scratch;
      dx.upload(x.data(), x.size() * sizeof(float));
      double bytes = 0.0;
      std::vector<std::vector<const exec::cuda::DeviceExpert*>> steps(static_cast<size_t>(iters));
      for (int t = 0; t < iters; ++t)
        for (int64_t j = 0; j < shape->top_k; ++j) {
          const exec::cuda::DeviceExpert& e = experts[static_cast<size_t>(ids[static_cast<size_t>(t * shape->top_k + j)])];
          steps[static_cast<size_t>(t)].push_back(&e);
          bytes += static_cast<double>(e.gate.nbytes + e.up.nbytes + e.down.nbytes);
        }
      // Warm up (sizes the scratch), then capture every step in one graph.
      exec::cuda::expert_mlp_decode(steps[0], dx.floats(), m_rows, dout.floats(), scratch, s);
      exec::cuda::synchronize(s);
      const float best_ms = best_graph_ms(s, [&] {
        for (int t = 0; t < iters; ++t)
          exec::cuda::expert_mlp_decode(steps[static_cast<size_t>(t)], dx.floats(), m_rows, dout.floats(), scratch, s);
      });
      const double us = best_ms * 1e3 / iters, per_step = bytes / iters;
      const double gbps = per_step / (us * 1e-6) / 1e9;
      const double copy_at = copy_gbps_at(pool, per_step, iters, s);
      std::printf("%-12s %10.1f %12.2f %10.2f %10.0f %8.1f%% %15.0f %13.1f%%\n", std::string(f->name).c_str(),
                  static_cast<double>(layer->packed_bytes()) / 1e6, per_step / 1e6, us, gbps, 100.0 * gbps / copy,
                  copy_at, 100.0 * gbps / copy_at);
      std::fflush(stdout);
    }
    cudaStreamDestroy(s);
  } catch (const eq::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
