// The GPU MoE layer (lib/exec/cuda/device_moe.h, issue #41) at M tokens for
// each dispatch strategy and format mix:
//   bench/moe_dispatch_cuda [--shape qwen3-30b-a3b] [--mixes bf16,fp4_g32,...] [--m 1,16,512,4096]
//                           [--dispatch mask-combine,sorted,auto] [--sort-cutoff N] [--iters N]
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
// first.
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

}  // namespace

int main(int argc, char** argv) {
  std::string shape_name = "qwen3-30b-a3b", mixes_arg = "bf16,fp4_g32,int4_g64,int8_row,trellis4,mix842,mix842t",
              ms_arg = "1,4,16,64,512,4096", dispatch_arg = "mask-combine,sorted,auto";
  int iters = 9;
  int64_t sort_cutoff = 8;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--shape") shape_name = argv[i + 1];
    else if (a == "--mixes") mixes_arg = argv[i + 1];
    else if (a == "--m") ms_arg = argv[i + 1];
    else if (a == "--dispatch") dispatch_arg = argv[i + 1];
    else if (a == "--sort-cutoff") sort_cutoff = std::atoll(argv[i + 1]);
    else if (a == "--iters") iters = std::max(1, std::atoi(argv[i + 1]));
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
    std::printf("%-10s %8s %6s %-13s %10s %9s %8s %8s\n", "mix", "GB", "M", "dispatch", "ms/call", "TFLOP/s",
                "/ bf16", "/ fp4");
    std::map<std::pair<int64_t, int>, double> base_bf16, base_fp4;
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
        for (exec::DispatchKind kind : kinds) {
          auto call = [&] {
            exec::cuda::run_moe(d, kind, sort_cutoff, dx.floats(), M, K, ids.data(), dout.floats(), scratch, s);
          };
          call();
          exec::cuda::synchronize(s);
          std::vector<float> times;
          cudaEvent_t e0, e1;
          cudaEventCreate(&e0);
          cudaEventCreate(&e1);
          for (int it = 0; it < iters; ++it) {
            cudaEventRecord(e0, s);
            call();
            cudaEventRecord(e1, s);
            check(cudaEventSynchronize(e1), "layer call");
            float ms_call = 0.0f;
            cudaEventElapsedTime(&ms_call, e0, e1);
            times.push_back(ms_call);
          }
          cudaEventDestroy(e0);
          cudaEventDestroy(e1);
          std::sort(times.begin(), times.end());
          const double med = times[times.size() / 2];
          const double tflops = 2.0 * static_cast<double>(M * K) * 3.0 * H * I / (med * 1e-3) / 1e12;
          const auto key = std::make_pair(M, static_cast<int>(kind));
          if (mix_name == "bf16") base_bf16[key] = med;
          if (mix_name == "fp4_g32") base_fp4[key] = med;
          char rb[16] = "-", rf[16] = "-";
          if (base_bf16.count(key)) std::snprintf(rb, sizeof rb, "%.2f", med / base_bf16[key]);
          if (base_fp4.count(key)) std::snprintf(rf, sizeof rf, "%.2f", med / base_fp4[key]);
          std::printf("%-10s %8.3f %6lld %-13s %10.4f %9.1f %8s %8s\n", mix_name.c_str(),
                      static_cast<double>(d.nbytes) / 1e9, static_cast<long long>(M),
                      std::string(exec::dispatch_kind_name(kind)).c_str(), med, tflops, rb, rf);
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
