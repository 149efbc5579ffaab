// Quantizer throughput on the GPU against the CPU (docs/benchmarks.md): for
// every row with a device quantizer, weights/s of the CPU quantizer (all
// cores: one matrix per thread, as pack's workers run it; the trellis rows
// spread one matrix over the pool themselves) and of the GPU quantizer
// (--gpu-threads pool workers, each on its own stream), and whether the
// GPU's parts equal the CPU's byte for byte.
//
//   bench/quant_device [--rows 768] [--cols 2048] [--formats a,b] [--gpu-matrices 8]
//                      [--trellis-kernels cluster,global] [--importance] [--half-search] [--half-only]
//
// --device-style GPU choice: every visible GPU; worker t runs on GPU t mod
// count (CUDA_VISIBLE_DEVICES picks fewer).
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "quant/gpus.h"
#include "quant/format.h"

using namespace eq::quant;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Quantizes `count` matrices on `threads` workers of the pool, as pack's
// workers do (a pool run inside them runs inline); threads = 0: one matrix
// at a time from this thread, each spreading over the pool itself (the CPU
// trellis quantizer). Returns seconds.
double run(const FormatTraits& f, const std::vector<std::vector<float>>& ws, int64_t rows, int64_t cols, int count,
           int threads, Device device, std::vector<QuantizedMatrix>* first, const float* importance = nullptr,
           TrellisSearch search = TrellisSearch::kExact) {
  set_trellis_search(search);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<QuantizedMatrix> out(static_cast<size_t>(count));
  auto one = [&](int i) {
    QuantizeOptions o;
    o.seed = 99 + static_cast<uint64_t>(i);
    o.device = device;
    o.importance = importance;
    out[static_cast<size_t>(i)] = f.quantize(ws[static_cast<size_t>(i) % ws.size()].data(), rows, cols, o);
  };
  if (threads == 0) {
    for (int i = 0; i < count; ++i) one(i);
  } else {
    eq::default_pool().run(static_cast<size_t>(threads), [&](size_t t) {
      bind_device(device, t);  // worker t on GPU t mod count, as pack's workers
      for (int i = static_cast<int>(t); i < count; i += threads) one(i);
    });
  }
  const double s = seconds_since(t0);
  if (first) *first = std::move(out);
  return s;
}

// Squared error of the round trips of out[i] against ws[i mod |ws|].
double sq_error(const FormatTraits& f, const std::vector<std::vector<float>>& ws, int64_t rows, int64_t cols,
                const std::vector<QuantizedMatrix>& out) {
  double sum = 0;
  std::vector<float> back(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < out.size(); ++i) {
    f.dequantize(out[i].view(), back.data());
    const std::vector<float>& w = ws[i % ws.size()];
    for (size_t k = 0; k < back.size(); ++k) sum += (double(w[k]) - back[k]) * (double(w[k]) - back[k]);
  }
  return sum;
}

bool same(const QuantizedMatrix& a, const QuantizedMatrix& b) {
  if (a.parts.size() != b.parts.size()) return false;
  for (size_t p = 0; p < a.parts.size(); ++p)
    if (a.parts[p].bytes != b.parts[p].bytes) return false;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("GPU vs CPU quantizer throughput");
  int64_t rows = 768, cols = 2048;
  int gpu_matrices = 8, gpu_threads = 4;
  std::string formats, sweep, kernels;
  app.add_option("--rows", rows);
  app.add_option("--cols", cols);
  app.add_option("--formats", formats, "comma-separated (default: every row with a device quantizer)");
  app.add_option("--gpu-matrices", gpu_matrices);
  app.add_option("--gpu-threads", gpu_threads);
  app.add_option("--trellis-blocks", sweep,
                 "comma-separated resident block counts to time trellis2 with (EQ_CUDA_TRELLIS_BLOCKS)");
  app.add_option("--trellis-kernels", kernels,
                 "comma-separated trellis search kernels (EQ_CUDA_TRELLIS_KERNEL: cluster, global) to time every "
                 "trellis row of the list with, in the same run");
  bool with_importance = false;
  app.add_flag("--importance", with_importance,
               "Quantize with a random per-column importance (as pack does with a profile: the trellis rows then "
               "search column by column with error feedback)");
  bool half_search = false;
  app.add_flag("--half-search", half_search,
               "Also time every trellis row of the list with the GPU's half search, against the exact one, with "
               "both errors");
  bool half_only = false;
  app.add_flag("--half-only", half_only,
               "Time only the GPU's half search of the listed trellis rows (no CPU quantizer, no exact search): its "
               "weights/s and squared error per weight, to compare builds of the half kernel");
  CLI11_PARSE(app, argc, argv);
  try {
    require_device(Device::kCuda);
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    std::vector<std::vector<float>> ws(4, std::vector<float>(static_cast<size_t>(rows * cols)));
    std::mt19937_64 rng(1);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    for (auto& w : ws)
      for (float& x : w) x = normal(rng);
    std::vector<float> importance_values(static_cast<size_t>(cols));
    std::uniform_real_distribution<float> uniform(0.1f, 2.0f);
    for (float& x : importance_values) x = uniform(rng);
    const float* importance = with_importance ? importance_values.data() : nullptr;
    std::vector<const FormatTraits*> list;
    if (formats.empty()) {
      for (const FormatTraits& f : all_formats())
        if (f.device_quantizer) list.push_back(&f);
    } else {
      std::stringstream ss(formats);
      for (std::string name; std::getline(ss, name, ',');) list.push_back(&format_by_name(name));
    }
    if (half_only) {
      std::printf("matrix [%lld, %lld] float32%s, GPU half search: %d matrices on %d host threads\n\n",
                  static_cast<long long>(rows), static_cast<long long>(cols), importance ? ", with importance" : "",
                  gpu_matrices, gpu_threads);
      std::printf("| format | half weights/s | squared error per weight |\n| --- | ---: | ---: |\n");
      const double per = static_cast<double>(rows * cols);
      for (const FormatTraits* f : list) {
        if (!f->slow_quantizer) continue;
        std::vector<QuantizedMatrix> half_out;
        run(*f, ws, rows, cols, 1, 0, Device::kCuda, nullptr, importance, TrellisSearch::kHalf);  // warm-up
        const double s = run(*f, ws, rows, cols, gpu_matrices, gpu_threads, Device::kCuda, &half_out, importance,
                             TrellisSearch::kHalf);
        std::printf("| %s | %.3g | %.6g |\n", std::string(f->name).c_str(), per * gpu_matrices / s,
                    sq_error(*f, ws, rows, cols, half_out) / (per * gpu_matrices));
        std::fflush(stdout);
      }
      return 0;
    }
    std::printf("matrix [%lld, %lld] float32%s, CPU: %d threads, GPU: %d matrices on %d host threads\n\n",
                static_cast<long long>(rows), static_cast<long long>(cols), importance ? ", with importance" : "",
                cores, gpu_matrices, gpu_threads);
    std::printf("| format | CPU weights/s | GPU weights/s | GPU / CPU | GPU parts equal CPU |\n| --- | ---: | ---: | ---: | --- |\n");
    const double per = static_cast<double>(rows * cols);
    for (const FormatTraits* f : list) {
      // Trellis: one matrix at a time over the pool (its own threads); the rest: one matrix per core.
      const int cpu_count = f->slow_quantizer ? 1 : cores;
      const int cpu_threads = f->slow_quantizer ? 0 : cores;
      std::vector<QuantizedMatrix> cpu_out, gpu_out;
      const double cpu_s = run(*f, ws, rows, cols, cpu_count, cpu_threads, Device::kCpu, &cpu_out, importance);
      run(*f, ws, rows, cols, 1, 0, Device::kCuda, nullptr, importance);  // warm-up: context, code tables, pools
      const double gpu_s = run(*f, ws, rows, cols, gpu_matrices, gpu_threads, Device::kCuda, &gpu_out, importance);
      const double cpu_wps = per * cpu_count / cpu_s, gpu_wps = per * gpu_matrices / gpu_s;
      std::printf("| %s | %.3g | %.3g | %.1fx | %s |\n", std::string(f->name).c_str(), cpu_wps, gpu_wps,
                  gpu_wps / cpu_wps, same(cpu_out[0], gpu_out[0]) ? "yes" : "NO");
      std::fflush(stdout);
    }
    if (half_search) {
      std::printf("\nthe trellis rows by GPU search (%zu GPUs):\n\n", device_count(Device::kCuda));
      std::printf("| format | exact weights/s | half weights/s | half / exact speed | half / exact squared error |\n"
                  "| --- | ---: | ---: | ---: | ---: |\n");
      for (const FormatTraits* f : list) {
        if (!f->slow_quantizer) continue;
        std::vector<QuantizedMatrix> exact_out, half_out;
        run(*f, ws, rows, cols, 1, 0, Device::kCuda, nullptr, importance, TrellisSearch::kHalf);  // warm-up
        const double exact_s = run(*f, ws, rows, cols, gpu_matrices, gpu_threads, Device::kCuda, &exact_out,
                                   importance, TrellisSearch::kExact);
        const double half_s = run(*f, ws, rows, cols, gpu_matrices, gpu_threads, Device::kCuda, &half_out,
                                  importance, TrellisSearch::kHalf);
        const double ee = sq_error(*f, ws, rows, cols, exact_out), he = sq_error(*f, ws, rows, cols, half_out);
        std::printf("| %s | %.3g | %.3g | %.2fx | %.5f |\n", std::string(f->name).c_str(), per * gpu_matrices / exact_s,
                    per * gpu_matrices / half_s, exact_s / half_s, he / ee);
        std::fflush(stdout);
      }
    }
    if (!kernels.empty()) {
      std::printf("\nthe trellis rows by search kernel (EQ_CUDA_TRELLIS_KERNEL):\n\n");
      std::printf("| format | kernel | GPU weights/s | GPU parts equal CPU |\n| --- | --- | ---: | --- |\n");
      for (const FormatTraits* f : list) {
        if (!f->slow_quantizer) continue;
        std::vector<QuantizedMatrix> cpu_out;
        run(*f, ws, rows, cols, 1, 0, Device::kCpu, &cpu_out, importance);
        std::stringstream ss(kernels);
        for (std::string k; std::getline(ss, k, ',');) {
          setenv("EQ_CUDA_TRELLIS_KERNEL", k.c_str(), 1);
          std::vector<QuantizedMatrix> gpu_out;
          run(*f, ws, rows, cols, 1, 0, Device::kCuda, nullptr, importance);  // warm-up
          const double s = run(*f, ws, rows, cols, gpu_matrices, gpu_threads, Device::kCuda, &gpu_out, importance);
          std::printf("| %s | %s | %.3g | %s |\n", std::string(f->name).c_str(), k.c_str(), per * gpu_matrices / s,
                      same(cpu_out[0], gpu_out[0]) ? "yes" : "NO");
          std::fflush(stdout);
        }
        unsetenv("EQ_CUDA_TRELLIS_KERNEL");
      }
    }
    if (!sweep.empty()) {
      const FormatTraits& t2 = format_by_name("trellis2");
      std::printf("\ntrellis2 on the GPU by resident blocks (EQ_CUDA_TRELLIS_BLOCKS):\n");
      std::stringstream ss(sweep);
      for (std::string b; std::getline(ss, b, ',');) {
        setenv("EQ_CUDA_TRELLIS_BLOCKS", b.c_str(), 1);
        const double s = run(t2, ws, rows, cols, gpu_matrices, gpu_threads, Device::kCuda, nullptr);
        std::printf("  %s blocks: %.3g weights/s\n", b.c_str(), per * gpu_matrices / s);
        std::fflush(stdout);
      }
      unsetenv("EQ_CUDA_TRELLIS_BLOCKS");
    }
  } catch (const eq::Error& e) {
    std::fprintf(stderr, "quant_device: %s\n", e.what());
    return e.exit_code();
  }
  return 0;
}
