// Text continuation with the forward pass: prefill the prompt once, then
// decode one token at a time from the KV cache. Greedy (argmax, lowest id on
// ties) when temperature is 0, else sampling from softmax(logits / T)
// restricted to the smallest set whose probability reaches top_p.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

namespace eq::model {

class Model;

struct GenerateOptions {
  int64_t max_new_tokens = 32;
  double temperature = 0.0;
  double top_p = 1.0;
  uint64_t seed = 0;
  std::optional<int32_t> stop_token;  // generation ends after emitting it
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // new tokens only
  int64_t prompt_tokens = 0;
  double prefill_seconds = 0, decode_seconds = 0;
  double prefill_tokens_per_second() const;
  // Decode steps run after the prefill (the first new token comes from the prefill logits).
  double decode_tokens_per_second() const;
};

// `on_token` (optional) sees each new token as soon as it is chosen.
GenerateResult generate(Model& model, std::span<const int32_t> prompt, const GenerateOptions& options,
                        const std::function<void(int32_t)>& on_token = {});

// The choice rule used by generate() for one row of logits.
int32_t pick_token(const float* logits, int64_t vocab, const GenerateOptions& options, uint64_t& rng_state);

}  // namespace eq::model
