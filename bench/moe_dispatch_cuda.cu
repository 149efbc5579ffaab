// The GPU MoE layer (lib/exec/cuda/device_moe.h, issue #41) at M tokens for
// each dispatch strategy and format mix:
//   bench/moe_dispatch_cuda [--shape qwen3-30b-a3b] [--mixes bf16,fp4_g32,...] [--m 1,16,512,4096]
//                           [--dispatch mask-combine,sorted,auto] [--sort-cutoff N] [--iters N] [--graph]
//                           [--routed]
// For each mix (a preset of exec/synthetic_layer.h or one format; default
// bf16, fp4_g32, int4_g64, int8_row, trellis4, mix842, mix842t): a synthetic
// layer of the shape with random codes (the kernels do a real pack's work),
// every expert on the GPU; random top-k routing of M tokens; the layer call
// (host sort and index copies included) timed with events, the median of
// `iters` calls after one untimed. Printed per (mix, M, dispatch):
// milliseconds a call, TFLOP/s of the routed products (2 M top_k 3 H I
// flops), and the ratio to the uniform bf16 layer at the same M and dispatch
// (bf16's products are cuBLAS's bf16 GEMMs on the stored matrices: the
// baseline), and to fp4_g32 for the mixes. A copy kernel's GB/s is printed
// first. --graph adds the GPU's own time a call ("GPU ms"): the call captured
// once in a CUDA graph and replayed, so the host's part (sorting, building and
// launching the calls) is left out; "-" where the call cannot be captured (its
// index copies come from pageable memory). --routed adds a row "routed" at
// M <= the sort cutoff: routed decode (run_moe_routed) with the ids already
// in device memory, as a model step's router kernel leaves them.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "cuda_bench.cuh"
#include "exec/cuda/device_moe.h"
#include "exec/dispatch.h"
#include "exec/synthetic_layer.h"
#include "quant/format.h"

namespace {

using namespace eq;
using namespace eq::bench;

// The median ms of `iters` runs of `enqueue` on `s` (event_ms).
template <class Enqueue>
double median_ms(const Enqueue& enqueue, cudaStream_t s, int iters, const char* what) {
  std::vector<float> times;
  for (int it = 0; it < iters; ++it) times.push_back(event_ms(s, enqueue, what));
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// The median ms of `iters` replays of `call` captured once as a CUDA graph on
// `s`, or -1 when the capture fails (the call is then left as it was).
template <class Call>
double graph_ms(const Call& call, cudaStream_t s, int iters) {
  const CapturedGraph graph(s, call);
  if (!graph) return -1.0;
  graph.launch(s);
  check(cudaStreamSynchronize(s), "graph warm-up");
  return median_ms([&] { graph.launch(s); }, s, iters, "graph replay");
}

}  // namespace

int main(int argc, char** argv) {
  std::string shape_name = "qwen3-30b-a3b", mixes_arg = "bf16,fp4_g32,int4_g64,int8_row,trellis4,mix842,mix842t",
              ms_arg = "1,4,16,64,512,4096", dispatch_arg = "mask-combine,sorted,auto";
  int iters = 9;
  int64_t sort_cutoff = 8;
  bool graph = false, routed = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--routed") {
      routed = true;
      continue;
    }
    if (a == "--graph") {
      graph = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "option %s needs a value\n", a.c_str());
      return 2;
    }
    ++i;
    if (a == "--shape") shape_name = argv[i];
    else if (a == "--mixes") mixes_arg = argv[i];
    else if (a == "--m") ms_arg = argv[i];
    else if (a == "--dispatch") dispatch_arg = argv[i];
    else if (a == "--sort-cutoff") sort_cutoff = std::atoll(argv[i]);
    else if (a == "--iters") iters = std::max(1, std::atoi(argv[i]));
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
    const std::vector<exec::DispatchKind> kinds = exec::parse_dispatch_option(dispatch_arg, true);
    std::vector<int64_t> ms;
    for (const std::string& m : split(ms_arg)) ms.push_back(std::atoll(m.c_str()));
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, 0), "properties");
    cudaStream_t s;
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
    std::printf("GPU: %s, %d SMs; copy kernel %.0f GB/s read + written\n", prop.name, prop.multiProcessorCount,
                copy_gbps(CopyPool(1024, s), s));
    const int64_t H = shape->hidden, I = shape->intermediate, K = shape->top_k;
    std::printf("shape %s: %lld experts, top-%lld, hidden %lld, intermediate %lld; sort cutoff %lld; median of %d calls\n\n",
                shape->name.c_str(), static_cast<long long>(shape->experts), static_cast<long long>(K),
                static_cast<long long>(H), static_cast<long long>(I), static_cast<long long>(sort_cutoff), iters);
    std::printf("%-10s %8s %6s %-13s %10s %9s %8s %8s%s\n", "mix", "GB", "M", "dispatch", "ms/call", "TFLOP/s",
                "/ bf16", "/ fp4", graph ? "     GPU ms   / fp4" : "");
    std::map<std::pair<int64_t, int>, double> base_bf16, base_fp4, gpu_fp4;
    for (const std::string& mix_name : split(mixes_arg)) {
      const exec::FormatMix* mix = exec::find_format_mix(mix_name);
      EQ_CHECK(mix != nullptr, "unknown mix " + mix_name);
      const std::unique_ptr<exec::SyntheticLayer> layer = exec::make_synthetic_layer(*shape, *mix, 7);
      const exec::cuda::DeviceMoeLayer d = exec::cuda::upload(layer->layer());
      exec::cuda::DeviceMoeScratch scratch;
      for (int64_t M : ms) {
        const std::vector<int32_t> ids = exec::random_expert_ids(shape->experts, K, M, 100 + M);
        std::vector<float> x(static_cast<size_t>(M * H));
        std::mt19937 rng(3);
        std::normal_distribution<float> nd;
        for (float& v : x) v = nd(rng);
        exec::cuda::DeviceBuffer dx(x.size() * sizeof(float)), dout(static_cast<size_t>(M * K * H) * sizeof(float));
        dx.upload(x.data(), x.size() * sizeof(float));
        exec::cuda::DeviceBuffer dids(ids.size() * sizeof(int32_t));
        dids.upload(ids.data(), ids.size() * sizeof(int32_t));
        std::vector<int> rows;  // a DispatchKind, or -1: routed
        for (exec::DispatchKind kind : kinds) rows.push_back(static_cast<int>(kind));
        if (routed && M <= sort_cutoff && d.routed) rows.push_back(-1);
        for (int row : rows) {
          const auto kind = static_cast<exec::DispatchKind>(row);
          auto call = [&] {
            if (row < 0)
              exec::cuda::run_moe_routed(d, dx.floats(), M, K, static_cast<const int32_t*>(dids.data()),
                                         dout.floats(), scratch, s);
            else
              exec::cuda::run_moe(d, kind, sort_cutoff, dx.floats(), M, K, ids.data(), dout.floats(), scratch, s);
          };
          call();
          exec::cuda::synchronize(s);
          const double med = median_ms(call, s, iters, "layer call");
          double gpu_med = -1.0;
          if (graph) gpu_med = graph_ms(call, s, iters);
          const double tflops = 2.0 * static_cast<double>(M * K) * 3.0 * H * I / (med * 1e-3) / 1e12;
          const auto key = std::make_pair(M, row);
          if (mix_name == "bf16") base_bf16[key] = med;
          if (mix_name == "fp4_g32") base_fp4[key] = med, gpu_fp4[key] = gpu_med;
          char rb[16] = "-", rf[16] = "-", g[40] = "";
          if (base_bf16.count(key)) std::snprintf(rb, sizeof rb, "%.2f", med / base_bf16[key]);
          if (base_fp4.count(key)) std::snprintf(rf, sizeof rf, "%.2f", med / base_fp4[key]);
          if (graph && gpu_med < 0) std::snprintf(g, sizeof g, " %10s %7s", "-", "-");
          else if (graph && gpu_fp4.count(key) && gpu_fp4[key] > 0)
            std::snprintf(g, sizeof g, " %10.4f %7.2f", gpu_med, gpu_med / gpu_fp4[key]);
          else if (graph) std::snprintf(g, sizeof g, " %10.4f %7s", gpu_med, "-");
          std::printf("%-10s %8.3f %6lld %-13s %10.4f %9.1f %8s %8s%s\n", mix_name.c_str(),
                      static_cast<double>(d.nbytes) / 1e9, static_cast<long long>(M),
                      row < 0 ? "routed" : std::string(exec::dispatch_kind_name(kind)).c_str(), med, tflops, rb, rf,
                      g);
          std::fflush(stdout);
        }
      }
    }
    cudaStreamDestroy(s);
  } catch (const eq::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
