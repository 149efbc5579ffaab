// The machine's two ceilings, measured in the same run as the kernels they
// judge (bench/moe_layer): a STREAM-style triad for memory bandwidth and an
// Eigen float32 GEMM for compute. Both use every thread of eq::default_pool().
#pragma once

#include <cstdint>

namespace eq::eval {

struct Ceiling {
  double best = 0, median = 0;  // GB/s or GFLOP/s over the timed repetitions
  int reps = 0;
};

// a[i] = b[i] + s * c[i] over float64 arrays of `array_bytes` each (choose
// ≫ L3); counts 3 × array_bytes per pass (two reads, one write; write-allocate
// traffic not counted, as STREAM does). One untimed pass first.
Ceiling triad_bandwidth(uint64_t array_bytes, int reps);

// C[m×n] = A[m×k] · B[n×k]ᵀ in float32 through lib/model's Eigen kernel for
// the active ISA, rows of C split evenly over the pool's threads; counts
// 2·m·n·k flops. One untimed call first.
Ceiling eigen_gemm_peak(int64_t m, int64_t n, int64_t k, int reps);

}  // namespace eq::eval
