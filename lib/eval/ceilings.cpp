#include "eval/ceilings.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/thread_pool.h"
#include "exec/timing.h"
#include "model/float_buffer.h"
#include "model/kernels/float_kernels.h"

namespace eq::eval {
namespace {

Ceiling summarize(const std::vector<double>& seconds, double work) {
  Ceiling c;
  c.reps = static_cast<int>(seconds.size());
  c.best = work / *std::min_element(seconds.begin(), seconds.end());
  c.median = work / exec::percentile(seconds, 0.5);
  return c;
}

template <typename Fn>
std::vector<double> time_passes(int reps, Fn&& fn) {
  fn();  // untimed: page faults, caches, pool start-up
  std::vector<double> t;
  for (int r = 0; r < std::max(1, reps); ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return t;
}

}  // namespace

Ceiling triad_bandwidth(uint64_t array_bytes, int reps) {
  const size_t n = static_cast<size_t>(array_bytes / sizeof(double));
  std::vector<double> a(n), b(n, 1.0), c(n, 2.0);
  constexpr size_t kChunk = 1 << 16;  // 512 KiB per array per chunk
  const size_t chunks = (n + kChunk - 1) / kChunk;
  const double s = 3.0;
  auto pass = [&] {
    default_pool().run(chunks, [&](size_t i) {
      const size_t lo = i * kChunk, hi = std::min(n, lo + kChunk);
      double* __restrict pa = a.data();
      const double* __restrict pb = b.data();
      const double* __restrict pc = c.data();
      for (size_t j = lo; j < hi; ++j) pa[j] = pb[j] + s * pc[j];
    });
  };
  return summarize(time_passes(reps, pass), 3.0 * static_cast<double>(n * sizeof(double)) / 1e9);
}

Ceiling eigen_gemm_peak(int64_t m, int64_t n, int64_t k, int reps) {
  model::FloatBuffer a(static_cast<size_t>(m * k)), b(static_cast<size_t>(n * k)), c(static_cast<size_t>(m * n));
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 17) * 0.01f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 13) * 0.01f;
  const int64_t parts = default_pool().size();
  auto call = [&] {
    default_pool().run(static_cast<size_t>(parts), [&](size_t p) {
      const int64_t lo = m * static_cast<int64_t>(p) / parts, hi = m * (static_cast<int64_t>(p) + 1) / parts;
      if (hi > lo) model::kernels::gemm_nt(hi - lo, n, k, a.data() + lo * k, k, b.data(), k, c.data() + lo * n, n);
    });
  };
  return summarize(time_passes(reps, call), 2.0 * static_cast<double>(m) * n * k / 1e9);
}

}  // namespace eq::eval
