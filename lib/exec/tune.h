// expertquant tune: measure, on this machine and this packed model, where the
// sorted branch starts to beat the unsorted per-token branch, and pick
// sort_cutoff from it (the crossover is measured, not guessed: it depends on
// the machine and the model). Every MoE layer runs on real inputs for each M
// of the sweep, both branches alternately so drifting machine load hits both
// alike. The same sweep then times the decode, small-batch and batch
// expert-MLP kernels (auto dispatch at the chosen cutoff) and picks
// mlp_kernels.decode_max_tokens and small_batch_max_tokens.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "exec/moe_inputs.h"
#include "exec/runtime_config.h"
#include "exec/timing.h"

namespace eq::exec {

class PackedModel;

struct TuneOptions {
  std::vector<int64_t> sweep = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  int warmup = 1, reps = 7;
  // Sorted must beat per-token by this fraction to count as faster: within
  // the noise the unsorted branch wins (it needs no sort or gather buffer).
  double tie_margin = 0.05;
  // Where the routed experts run. On the GPU only the dispatch crossover is
  // measured (the expert-MLP kernel thresholds are the CPU's): the result is
  // `base` with its "cuda" section replaced.
  quant::Device device = quant::Device::kCpu;
  RuntimeConfig base;
  // Called before each timed point: done and total points, and what is timed.
  std::function<void(int64_t done, int64_t total, const std::string& step)> progress;
};

struct TunePoint {
  int64_t m = 0;
  TimingStats per_token, sorted;  // one MoE step: all MoE layers, seconds
  TimingStats decode, small_batch, batch;  // the same step (auto dispatch) with each expert-MLP kernel
};

struct TuneResult {
  std::vector<TunePoint> points;
  // The largest M of the sweep below the first M at which sorted is faster
  // by more than tie_margin (0 when it already is at the smallest M).
  int64_t sort_cutoff = 0;
  // The largest M of the sweep below the first M at which the batch kernel is
  // faster than the decode kernel by more than tie_margin (0: never decode).
  int64_t decode_max_tokens = 0;
  // From decode_max_tokens on: the largest M of the sweep below the first M at
  // which the batch kernel is faster than the small-batch kernel by more than
  // tie_margin (decode_max_tokens when small-batch never wins).
  int64_t small_batch_max_tokens = 0;
  RuntimeConfig config;  // sort_cutoff, mlp_kernels + the measurement record
};

// On the GPU (options.device), sort_cutoff is the GPU's and the kernel
// fields of the points stay empty.
TuneResult tune_sort_cutoff(PackedModel& pm, const MoeInputs& inputs, const TuneOptions& options);

}  // namespace eq::exec
