#include "exec/timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

namespace eq::exec {

double percentile(std::vector<double> samples, double q) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const double rank = std::ceil(q * static_cast<double>(samples.size()));
  const size_t i = static_cast<size_t>(std::clamp(rank, 1.0, static_cast<double>(samples.size()))) - 1;
  return samples[i];
}

TimingStats summarize_times(const std::vector<double>& seconds) {
  TimingStats s;
  s.reps = static_cast<int>(seconds.size());
  if (seconds.empty()) return s;
  s.median = percentile(seconds, 0.5);
  s.p90 = percentile(seconds, 0.9);
  s.min = *std::min_element(seconds.begin(), seconds.end());
  s.mean = std::accumulate(seconds.begin(), seconds.end(), 0.0) / static_cast<double>(seconds.size());
  return s;
}

TimingStats time_repeated(const std::function<void()>& fn, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> t;
  for (int i = 0; i < std::max(1, reps); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return summarize_times(t);
}

}  // namespace eq::exec
