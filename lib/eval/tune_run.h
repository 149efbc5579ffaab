// One `expertquant tune` run: a packed model opened, its first evaluation
// text's MoE inputs captured, and the dispatch and expert-MLP kernel
// crossovers measured on them (exec/tune.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "eval/text_inputs.h"
#include "exec/tune.h"

namespace eq::eval {

struct TuneRequest {
  std::string packed;  // the packed folder
  std::string model;   // its source, checked against the packed config; empty = none
  bool verify = true;  // the packed folder's checksums at load
  TextInputs inputs;
  int64_t ctx = 512;  // window length of the captured text
  exec::TuneOptions options;
  // Called once the model is open and the texts are read, before the inputs
  // are captured and timed (options.progress then counts the points).
  std::function<void()> measuring;
};

exec::TuneResult run_tune(const TuneRequest& request);

}  // namespace eq::eval
