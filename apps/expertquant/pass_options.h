// --pass-order and --hidden-memory of the commands that run calibration or
// evaluation windows through the reference forward (profile, perplexity,
// eval), and the progress of that pass (model/layer_pass.h).
#pragma once

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdint>
#include <string>

#include "model/layer_pass.h"
#include "progress.h"

namespace eq::app {

struct PassCliOptions {
  std::string order = "layer";
  std::string hidden_memory;  // "" = model::default_hidden_memory()
  model::PassOrder parsed_order() const;
  uint64_t parsed_hidden_memory() const;  // 0 = the default
};

void add_pass_options(CLI::App* sub, PassCliOptions& o);

// The step text of a pass `seconds` after it started: in the layer order
// "layer 3: 1,024/16,384 tokens, 312.4 tokens/s, 210.0 MiB/s read" (tokens
// per second through the whole model), in the window order the rates alone.
std::string pass_progress_step(const model::PassProgress& p, double seconds);

// The step text of work counted apart from the pass, `seconds` of it so far:
// "sensitivity [######..................]  29.0%  37/128 experts  2.1 experts/s  ETA 43s".
std::string side_work_step(const std::string& name, ProgressUnit unit, uint64_t done, uint64_t total, double seconds);

// Draws a pass on `bar` as phase `name`: the layer order counts layers, the
// window order tokens; the step is pass_progress_step.
class PassProgressView {
 public:
  PassProgressView(Progress& bar, std::string name) : bar_(bar), name_(std::move(name)) {}
  void operator()(const model::PassProgress& p);
  // Work the pass does between its own updates (profile's sensitivity after
  // each layer): the pass's last counts redrawn with `step` as the step.
  // False (nothing drawn) before the pass started or when it is not layer-major.
  bool show_step(const std::string& step);

 private:
  void draw(const model::PassProgress& p, const std::string& step);
  Progress& bar_;
  std::string name_;
  bool started_ = false;
  model::PassProgress last_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace eq::app
