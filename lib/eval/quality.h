// Quality of a packed model against the unquantized one on evaluation text,
// in one pass over the text with the perplexity window rule (perplexity.h):
//  * per MoE layer: relative L2 error ‖P − R‖ / ‖R‖ and cosine of the packed
//    block's output P against the unquantized block's R on the same inputs
//    (the reference model's residual stream), over every token;
//  * per domain and overall: bits per token (bits per byte for byte-level
//    models) of both models, the KL divergence KL(reference ‖ packed) of the
//    next-token distributions (mean, p99, max over scored positions), and
//    top-1 agreement (argmax equal, lowest id on ties).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "model/layer_pass.h"

namespace eq::exec {
class PackedModel;
}

namespace eq::eval {

struct LabeledTokens {
  LabeledTokens() = default;
  LabeledTokens(std::string label_, std::vector<int32_t> tokens_, std::vector<int64_t> document_starts_ = {})
      : label(std::move(label_)), tokens(std::move(tokens_)), document_starts(std::move(document_starts_)) {}

  std::string label;  // the domain ("prose", "c", ...)
  std::vector<int32_t> tokens;
  // Offsets in `tokens` where a new document starts: windows are cut inside
  // documents, never across one (empty: one document).
  std::vector<int64_t> document_starts;
};

struct QualityOptions {
  int64_t ctx = 512;
  int64_t batch_windows = 4;
  // Called with (tokens scored so far, total to score) as the packed pass
  // scores each batch (at its end in the layer order).
  std::function<void(int64_t, int64_t)> progress;
  // The order of the two forward passes (reference, then packed) and their
  // hidden-state bound (model/layer_pass.h); both orders give the same figures.
  model::PassOrder pass_order = model::PassOrder::kLayer;
  uint64_t hidden_memory = 0;
  std::string spill_dir;
  std::function<void(const model::PassProgress&)> pass_progress;
  // Called as each forward pass begins: "reference" (with --model), then
  // "packed" (a caller measures them apart).
  std::function<void(const std::string&)> pass_start;
};

struct LayerError {
  int64_t layer = 0;
  int64_t tokens = 0;
  double rel_l2 = 0;       // ‖P − R‖_F / ‖R‖_F over all tokens
  double cosine_mean = 0;  // mean over tokens of cos(P_t, R_t)
  double cosine_min = 0;
};

struct TextQuality {
  std::string label;
  int64_t scored_tokens = 0;
  double bits_reference = 0, bits_packed = 0;  // per scored token
  double kl_mean = 0, kl_p99 = 0, kl_max = 0;  // nats
  double top1_agreement = 0;                   // fraction in [0, 1]
};

struct QualityResult {
  // False when the packed model ran alone (no unquantized model loaded): only
  // bits_packed and scored_tokens are measured; the reference, KL, top-1 and
  // per-layer fields are not (zero here, null in the report).
  bool compared = true;
  TextQuality overall;
  std::vector<TextQuality> texts;
  std::vector<LayerError> layers;
  double seconds = 0;
};

// Leaves `pm` running its packed blocks. Without a reference model loaded
// (PackedModel::has_reference) scores the packed model alone.
QualityResult compare_quality(exec::PackedModel& pm, const std::vector<LabeledTokens>& texts,
                              const QualityOptions& options = {});

}  // namespace eq::eval
