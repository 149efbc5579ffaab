// One `expertquant eval` run, from a packed folder (and optionally its
// source checkpoint) to the report: load, quality (bpb, KL, top-1, per-layer
// error), collapse checks, the source check, then latency per dispatch
// strategy of the packed model alone and of an optional baseline pack.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "eval/collapse.h"
#include "eval/latency.h"
#include "eval/report.h"
#include "eval/text_inputs.h"
#include "exec/packed_model.h"
#include "exec/runtime_config.h"
#include "model/layer_pass.h"

namespace eq::eval {

struct EvalRequest {
  std::string packed;    // the packed folder
  std::string model;     // its unquantized source; empty = the packed model runs alone
  std::string baseline;  // a uniform pack of the same source, timed beside it; empty = none
  TextInputs inputs;
  // Auto dispatch's sort cutoff and the expert-MLP kernel thresholds.
  exec::RuntimeConfig runtime;
  std::string dispatch = "mask-combine,sorted,auto";  // strategies timed (a --dispatch list)
  bool verify = true;  // the packed folder's checksums at load
  bool quality = true, collapse = true, latency = true;
  int64_t ctx = 512, batch_windows = 4;
  model::PassOrder pass_order = model::PassOrder::kLayer;
  uint64_t hidden_memory = 0;
  // The collapse checks: prompts, lengths, thresholds (progress unused).
  CollapseOptions collapse_options;
  // The latency sweep: points, repetitions, steps (ctx and progress unused:
  // ctx above applies).
  LatencyOptions latency_options;
};

enum class EvalStage { kQuality, kCollapse, kLatency };

// Told what the run does as it goes; called on the calling thread.
class EvalObserver {
 public:
  virtual ~EvalObserver() = default;
  // The packed model is open and set up by the request's runtime config.
  virtual void on_loaded(const exec::PackedModel& packed) {}
  // A stage begins; `model` is the one a latency stage times ("packed",
  // "baseline"), empty for the others.
  virtual void on_stage_start(EvalStage stage, const std::string& model) {}
  // The quality stage: a forward pass begins ("reference", then "packed"),
  // and its progress.
  virtual void on_pass_start(const std::string& model) {}
  virtual void on_pass_progress(const model::PassProgress& progress) {}
  // The collapse stage (tokens generated) and the latency stage (points
  // timed): done and total, and what is being done.
  virtual void on_progress(int64_t done, int64_t total, const std::string& step) {}
  virtual void on_stage_end() {}
  // Before a latency stage: the MoE inputs of `rows` tokens are captured.
  virtual void on_capturing(const std::string& model, int64_t rows) {}
  // The source checkpoint matched the packed folder's fingerprint, with
  // `bytes_hashed` bytes hashed as they were read.
  virtual void on_source_verified(uint64_t bytes_hashed) {}
};

EvalReport run_eval(const EvalRequest& request, EvalObserver* observer = nullptr);

}  // namespace eq::eval
