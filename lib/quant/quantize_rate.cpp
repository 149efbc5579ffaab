#include "quant/quantize_rate.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <vector>

#include "core/thread_pool.h"

namespace eq::quant {

namespace {

// Uniform in [0, 1) from a fixed integer generator: the same probe on every
// machine, whatever the standard library's distributions do.
struct ProbeRandom {
  uint64_t x = 0x9e3779b97f4a7c15ull;
  double next() {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return double(x >> 11) / double(1ull << 53);
  }
};

// Seconds of this thread's CPU time, or of the wall clock.
double now(bool cpu_time) {
  if (cpu_time) {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int64_t rate_probe_rows(int64_t cols) {
  const int64_t rows = (4096 / std::max<int64_t>(1, cols) + 15) / 16 * 16;
  return std::clamp<int64_t>(rows, 16, 256);
}

double measure_quantize_rate(const FormatTraits& format, int64_t cols, Device device, bool weighted,
                             double min_seconds) {
  const int64_t rows = rate_probe_rows(cols);
  ProbeRandom r;
  // Gaussian-like weights (the sum of four uniforms), importance in [0.5, 1.5).
  std::vector<float> w(static_cast<size_t>(rows * cols)), importance(static_cast<size_t>(cols));
  for (float& v : w) v = float((r.next() + r.next() + r.next() + r.next() - 2.0) * 0.02);
  for (float& v : importance) v = float(0.5 + r.next());
  QuantizeOptions o;
  o.device = device;
  o.importance = weighted ? importance.data() : nullptr;
  o.tensor_name = "rate probe";
  const bool cpu_time = device == Device::kCpu;
  // On the CPU, one probe per thread of the pool, all at once, as pack keeps
  // every thread busy with an expert of its own: what the threads share (the
  // caches, a core's sibling, the memory) slows each as it slows pack. At least
  // two tasks, so that each is a pool job and a quantizer that spreads its own
  // work over the pool (trellis) runs it inline, in its one thread: the
  // thread's CPU time is then the whole work's. A GPU probe runs once.
  ThreadPool& pool = default_pool();
  const size_t tasks = cpu_time ? static_cast<size_t>(std::max(2, pool.size())) : 1;
  std::vector<int64_t> reps(tasks, 0);
  std::vector<double> elapsed(tasks, 0.0);
  pool.run(tasks, [&](size_t i) {
    const double start = now(cpu_time);
    do {
      QuantizedMatrix q = format.quantize(w.data(), rows, cols, o);
      ++reps[i];
      elapsed[i] = now(cpu_time) - start;
    } while (elapsed[i] < min_seconds);
  });
  int64_t total_reps = 0;
  double total_seconds = 0;
  for (size_t i = 0; i < tasks; ++i) {
    total_reps += reps[i];
    total_seconds += elapsed[i];
  }
  return double(total_reps * rows * cols) / std::max(total_seconds, 1e-9);
}

}  // namespace eq::quant
