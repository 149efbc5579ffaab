// The batch expert-MLP kernel (run_batch_mlp) on one thread, timed in thread
// CPU time, so the figures hold on a shared, loaded machine (the wall-clock
// bench/moe_layer does not):
//   build/bench/batch_mlp_core [FORMATS=fp4_g32,int8_row] [ROWS=1,4,16,32,64] [EXPERTS=128]
// EXPERTS distinct copies of one random qwen3-30b-a3b expert (H 2048, I 768),
// ROWS rows each, in one call: 128 copies keep the weights out of L2 (as a
// real layer's 128 experts), 1 copy runs them from cache. Prints useful
// GFLOP/s (2 * 3 * H * I per row) per core, best of 5 calls, and Eigen's
// fp32 sgemm 512x768x2048 on one thread the same way. EXPERTQUANT_BATCH_INT8=0
// runs the fp32 path (int8_panel_gemm.h) for comparison.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "exec/batch_mlp.h"
#include "exec/int8_panel_gemm.h"
#include "model/kernels/float_kernels.h"
#include "quant/format.h"

namespace {

double thread_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

template <typename F>
double best_seconds(int reps, F&& call) {
  call();
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const double t0 = thread_seconds();
    call();
    best = std::min(best, thread_seconds() - t0);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace eq;
  const std::vector<std::string> formats = split(argc > 1 ? argv[1] : "fp4_g32,int8_row");
  const std::vector<std::string> row_counts = split(argc > 2 ? argv[2] : "1,4,16,32,64");
  const int experts = argc > 3 ? std::atoi(argv[3]) : 128;
  constexpr int64_t H = 2048, I = 768;
  set_num_threads(1);

  std::vector<float> a(512 * H), b(I * H), c(512 * I);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 17) * 0.01f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 13) * 0.01f;
  const double eigen_s = best_seconds(5, [&] { model::kernels::gemm_nt(512, I, H, a.data(), H, b.data(), H, c.data(), I); });
  const double eigen = 2.0 * 512 * I * H / eigen_s / 1e9;
  std::printf("isa %s, integer batch path %s, %d experts; eigen sgemm 512x768x2048 1 thread %.1f GFLOP/s\n",
              std::string(isa_name(active_isa())).c_str(), exec::active_int8_batch_kernels().gemm ? "on" : "off",
              experts, eigen);

  std::mt19937_64 rng(42);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> wg(I * H), wu(I * H), wd(H * I);
  for (auto* w : {&wg, &wu, &wd})
    for (float& v : *w) v = normal(rng);
  for (const std::string& name : formats) {
    const quant::FormatTraits& f = quant::format_by_name(name);
    const quant::QuantizedMatrix g = f.quantize(wg.data(), I, H, {}), u = f.quantize(wu.data(), I, H, {}),
                                 d = f.quantize(wd.data(), H, I, {});
    const std::vector<quant::QuantizedMatrix> gs(experts, g), us(experts, u), ds(experts, d);
    std::vector<exec::ExpertWeights> weights;
    for (int e = 0; e < experts; ++e) weights.push_back({gs[e].view(), us[e].view(), ds[e].view()});
    for (const std::string& rs : row_counts) {
      const int64_t rows = std::atoll(rs.c_str());
      std::vector<float> x(static_cast<size_t>(experts * rows * H)), y(x.size());
      for (float& v : x) v = normal(rng) * 20.0f;
      std::vector<exec::ExpertBatch> batches;
      for (int e = 0; e < experts; ++e)
        batches.push_back({&weights[e], &f, x.data() + e * rows * H, y.data() + e * rows * H, rows});
      const double s = best_seconds(5, [&] { exec::run_batch_mlp(batches); });
      const double gflops = 2.0 * 3 * H * I * rows * experts / s / 1e9;
      std::printf("%-9s rows %3lld: %6.1f GFLOP/s/core = %5.1f%% eigen (1 thread)\n", name.c_str(),
                  static_cast<long long>(rows), gflops, 100.0 * gflops / eigen);
    }
  }
  return 0;
}
