// Trellis quality and speed on i.i.d. N(0,1) weights (fixed seed 42):
//   build/bench/trellis_throughput BITS ROWS COLS [THREADS=1]
// prints MSE, quantize weights/s and dequantize weights/s per core. Times are
// process CPU time divided by THREADS, so they stay per-core on a shared machine.
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "quant/trellis/format.h"

namespace {
double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s BITS ROWS COLS [THREADS]\n", argv[0]);
    return 2;
  }
  const int bits = std::atoi(argv[1]);
  const int64_t rows = std::atoll(argv[2]), cols = std::atoll(argv[3]);
  const int threads = argc > 4 ? std::atoi(argv[4]) : 1;
  eq::set_num_threads(threads);
  std::mt19937_64 rng(42);
  std::normal_distribution<float> nd;
  std::vector<float> w(static_cast<size_t>(rows * cols));
  for (auto& v : w) v = nd(rng);
  const eq::quant::FormatTraits& f = eq::quant::trellis_format(bits);
  double t0 = cpu_seconds();
  eq::quant::QuantizedMatrix q = f.quantize(w.data(), rows, cols, {});
  double t1 = cpu_seconds();
  std::vector<float> out(w.size());
  const int reps = 10;
  for (int i = 0; i < reps; ++i) f.dequantize(q.view(), out.data());
  double t2 = cpu_seconds();
  double se = 0;
  for (size_t i = 0; i < w.size(); ++i) se += double(w[i] - out[i]) * (w[i] - out[i]);
  std::printf("%s isa=%s threads=%d weights=%zu mse=%.5f quantize=%.0f weights/s/core dequantize=%.3f Gweights/s/core\n",
              std::string(f.name).c_str(), std::string(eq::isa_name(eq::active_isa())).c_str(), threads, w.size(),
              se / w.size(), w.size() / ((t1 - t0) / threads), w.size() * reps / ((t2 - t1) / threads) / 1e9);
}
