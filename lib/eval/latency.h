// The latency harness: for each dispatch strategy, a sweep over the token
// count M of one MoE call (real routing: the inputs each MoE layer received
// while reading evaluation text), warm-up then repeated runs, median and p90
// per MoE layer and for one MoE step (all layers), the whole model step
// (forward of M tokens, attention and head included), the bytes each
// strategy reads, decode tokens/s (M = 1 with the KV cache) and prefill
// tokens/s. Strategies are timed interleaved per M so machine load drifts
// hit them alike. Never used in tests with thresholds: timings are reported,
// not judged.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "exec/dispatch.h"
#include "exec/dispatch_cost.h"
#include "exec/moe_inputs.h"
#include "exec/timing.h"

namespace eq::exec {
class PackedModel;
}

namespace eq::eval {

struct LatencyOptions {
  std::vector<int64_t> sweep = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
  int warmup = 1, reps = 5;
  bool model_step = true;
  int64_t ctx = 512;             // longest sequence of a model step (capped by the model's positions)
  int64_t decode_prompt = 32;    // tokens prefilled before timing decode
  int64_t decode_tokens = 32;    // timed decode steps
  int64_t prefill_tokens = 256;  // tokens of the timed prefill
  // Called before each timed point (an M of the sweep, then decode/prefill per
  // dispatch) and once at the end: done and total points, and what is timed.
  std::function<void(int64_t done, int64_t total, const std::string& step)> progress;
};

struct LatencyPoint {
  int64_t m = 0;
  exec::TimingStats moe_step;                 // all MoE layers, one call each
  std::vector<exec::TimingStats> per_layer;   // in PackedModel::layers() order
  exec::TimingStats model_step;               // reps == 0 when not measured
  bool sorted_branch = false;                 // the branch taken (auto; fixed for the others)
  exec::BytesRead bytes;                      // one MoE step, all layers
};

struct StrategyLatency {
  std::string dispatch;
  int64_t sort_cutoff = -1;  // auto only
  std::vector<LatencyPoint> points;
  exec::TimingStats decode_step, prefill;
  int64_t prefill_tokens = 0;
  // 1 / median decode step; prefill_tokens / median prefill time.
  double decode_tokens_per_second = 0, prefill_tokens_per_second = 0;
};

struct LatencyResult {
  std::string folder;
  std::vector<int64_t> layers;
  std::vector<int64_t> groups_per_layer;
  std::vector<StrategyLatency> strategies;
  double seconds = 0;
};

// `inputs` must hold at least max(sweep) rows per MoE layer; `tokens` (text)
// feeds the model steps, decode and prefill. Restores the model's dispatch.
LatencyResult measure_latency(exec::PackedModel& pm, const exec::MoeInputs& inputs, std::span<const int32_t> tokens,
                              const std::vector<std::shared_ptr<const exec::Dispatch>>& dispatches,
                              const LatencyOptions& options);

}  // namespace eq::eval
