// Repeated wall-clock measurement for the latency harness and tune: warm-up
// runs first (page faults, caches, lazily converted weights), then `reps`
// timed runs; median and p90 are robust to other jobs sharing the cores.
#pragma once

#include <functional>
#include <vector>

namespace eq::exec {

struct TimingStats {
  double median = 0, p90 = 0, min = 0, mean = 0;  // seconds
  int reps = 0;
};

// Nearest-rank percentile of `samples` (q in [0, 1]).
double percentile(std::vector<double> samples, double q);
TimingStats summarize_times(const std::vector<double>& seconds);
TimingStats time_repeated(const std::function<void()>& fn, int warmup, int reps);

}  // namespace eq::exec
