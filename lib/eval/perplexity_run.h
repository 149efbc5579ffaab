// One `expertquant perplexity` run: the reference model of a checkpoint over
// a text file (encoded by its tokenizer) or a token file, scored by the
// window rule of perplexity.h.
#pragma once

#include <cstdint>
#include <string>

#include "eval/perplexity.h"

namespace eq::eval {

struct PerplexityRequest {
  std::string model;                  // checkpoint folder or .safetensors file
  std::string text, tokens;           // exactly one: a text file or a token file
  std::string tokens_format = "auto";  // of `tokens`: auto, json, npy, u32, i32
  std::string doc_separator;           // text: documents end here (decoded; "" = one document)
  int64_t max_tokens = 0;              // the text's first N tokens, or each token sequence's; 0 = all
  PerplexityOptions options;
};

struct PerplexityRun {
  PerplexityResult result;
  std::string input;  // the file scored
  bool byte_level = false;
  uint64_t cached_weight_bytes = 0;  // float32 weights the model cached
  uint64_t checkpoint_bytes = 0;     // the checkpoint's tensors as stored
};

PerplexityRun run_perplexity(const PerplexityRequest& request);

}  // namespace eq::eval
