#include "pass_options.h"

#include "core/memory.h"
#include "format_util.h"

namespace eq::app {

model::PassOrder PassCliOptions::parsed_order() const { return model::parse_pass_order(order); }

uint64_t PassCliOptions::parsed_hidden_memory() const {
  if (hidden_memory.empty()) return 0;
  const uint64_t b = parse_byte_size(hidden_memory, "--hidden-memory");
  return b == 0 ? 1 : b;  // 0 bytes: every state in the file
}

void add_pass_options(CLI::App* sub, PassCliOptions& o) {
  sub->add_option("--pass-order", o.order,
                  "layer (default): every window through a layer before the next, each layer read from the "
                  "checkpoint once; window: each batch of windows through the whole model. Same results")
      ->check(CLI::IsMember({"layer", "window"}));
  sub->add_option("--hidden-memory", o.hidden_memory,
                  "Hidden states of the layer order kept in memory up to this size (512M, 4G; default a quarter "
                  "of physical memory), beyond it in a temporary file");
}

std::string pass_progress_step(const model::PassProgress& p, double seconds) {
  const bool by_layer = p.order == model::PassOrder::kLayer;
  std::string step;
  if (by_layer) {
    const int64_t current = std::min(p.layers_done + 1, p.layers);
    step = "layer " + std::to_string(current) + ": " + with_commas(uint64_t(p.tokens_done)) + "/" +
           with_commas(uint64_t(p.tokens)) + " tokens";
  }
  if (seconds <= 0) return step;
  // Tokens through the whole model: in the layer order, layer-tokens done / layers.
  const double through =
      !by_layer ? double(p.tokens_done)
      : p.layers > 0 ? (double(p.layers_done) * double(p.tokens) + double(p.tokens_done)) / double(p.layers)
                     : 0.0;
  if (!step.empty()) step += ", ";
  step += progress_rate(ProgressUnit::kTokens, through / seconds) + ", " +
          progress_rate(ProgressUnit::kBytes, double(p.checkpoint_bytes) / seconds) + " read";
  return step;
}

void PassProgressView::operator()(const model::PassProgress& p) {
  const bool by_layer = p.order == model::PassOrder::kLayer;
  if (!started_) {
    bar_.phase(name_, by_layer ? ProgressUnit::kLayers : ProgressUnit::kTokens);
    start_ = std::chrono::steady_clock::now();
    started_ = true;
  }
  last_ = p;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  draw(p, pass_progress_step(p, seconds));
}

bool PassProgressView::show_step(const std::string& step) {
  // Only a layer-major pass does side work inside it; after a window pass the
  // side work is a phase of its own.
  if (!started_ || last_.order != model::PassOrder::kLayer) return false;
  draw(last_, step);
  return true;
}

void PassProgressView::draw(const model::PassProgress& p, const std::string& step) {
  if (p.order == model::PassOrder::kLayer)
    bar_.update(uint64_t(p.layers_done), uint64_t(p.layers), step);
  else
    bar_.update(uint64_t(p.tokens_done), uint64_t(p.tokens), step);
}

std::string side_work_step(const std::string& name, ProgressUnit unit, uint64_t done, uint64_t total,
                           double seconds) {
  return progress_line({.title = name, .unit = unit, .done = done, .total = total, .seconds = seconds}, "");
}

}  // namespace eq::app
