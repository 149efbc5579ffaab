// Perplexity over token sequences with the reference-model window rule: each
// sequence is cut into consecutive non-overlapping windows of `ctx` tokens
// (the last one shorter); every window is an independent sequence starting at
// position 0; every token except the first of its window is scored with
// -log p(token | window prefix). Bits per token = Σ -log2 p / scored tokens
// (bits per byte for byte-level models).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/layer_pass.h"

namespace eq::model {
class Model;
}

namespace eq::eval {

struct PerplexityOptions {
  int64_t ctx = 512;
  // Windows of equal length run together as one batch (bigger expert matmuls).
  int64_t batch_windows = 4;
  // Called after each batch is scored with (tokens scored so far, total to
  // score): as the pass goes in the window order, all at the end in the layer order.
  std::function<void(int64_t, int64_t)> progress;
  // The forward pass's order and hidden-state bound (model/layer_pass.h);
  // both orders give the same figures.
  model::PassOrder pass_order = model::PassOrder::kLayer;
  uint64_t hidden_memory = 0;
  std::string spill_dir;
  std::function<void(const model::PassProgress&)> pass_progress;
};

struct PerplexityResult {
  double total_nats = 0;
  int64_t scored_tokens = 0;
  int64_t windows = 0;
  int64_t tokens = 0;  // tokens read (scored + one per window)
  double seconds = 0;
  double nats_per_token() const { return scored_tokens ? total_nats / static_cast<double>(scored_tokens) : 0.0; }
  double bits_per_token() const;
  double perplexity() const;
};

PerplexityResult perplexity(model::Model& model, const std::vector<std::vector<int32_t>>& sequences,
                            const PerplexityOptions& options = {});

}  // namespace eq::eval
