#include "model/generate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>

#include "core/error.h"
#include "model/forward.h"

namespace eq::model {
namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

double GenerateResult::prefill_tokens_per_second() const {
  return prefill_seconds > 0 ? static_cast<double>(prompt_tokens) / prefill_seconds : 0.0;
}

double GenerateResult::decode_tokens_per_second() const {
  const int64_t steps = tokens.empty() ? 0 : static_cast<int64_t>(tokens.size()) - 1;
  return decode_seconds > 0 ? static_cast<double>(steps) / decode_seconds : 0.0;
}

int32_t pick_token(const float* logits, int64_t vocab, const GenerateOptions& options, uint64_t& rng_state) {
  if (options.temperature <= 0) return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
  std::vector<double> p(vocab);
  const float mx = *std::max_element(logits, logits + vocab);
  double sum = 0;
  for (int64_t v = 0; v < vocab; ++v) sum += p[v] = std::exp((logits[v] - mx) / options.temperature);
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
  // Nucleus: keep the most likely tokens until their mass reaches top_p.
  double kept = 0;
  size_t n = 0;
  while (n < order.size() && (n == 0 || kept < options.top_p * sum)) kept += p[order[n++]];
  std::mt19937_64 rng(rng_state);
  rng_state = rng();
  double u = std::uniform_real_distribution<double>(0.0, kept)(rng);
  for (size_t i = 0; i < n; ++i) {
    u -= p[order[i]];
    if (u <= 0) return order[i];
  }
  return order[n - 1];
}

GenerateResult generate(Model& model, std::span<const int32_t> prompt, const GenerateOptions& options,
                        const std::function<void(int32_t)>& on_token) {
  if (prompt.empty()) invalid("generate: the prompt is empty");
  if (options.max_new_tokens < 0) invalid("generate: --max-new-tokens must be >= 0");
  const int64_t vocab = model.config().vocab_size, P = static_cast<int64_t>(prompt.size());
  GenerateResult res;
  res.prompt_tokens = P;
  if (options.max_new_tokens == 0) return res;
  uint64_t rng_state = options.seed;
  KvCache cache = model.new_cache(1, P + options.max_new_tokens);

  auto t = Clock::now();
  const FloatBuffer hidden = model.forward_hidden(prompt, 1, P, cache);
  FloatBuffer logits(vocab);
  model.logits(hidden.data() + (P - 1) * model.config().hidden_size, 1, logits.data());
  res.prefill_seconds = seconds_since(t);

  t = Clock::now();
  int32_t next = pick_token(logits.data(), vocab, options, rng_state);
  for (;;) {
    res.tokens.push_back(next);
    if (on_token) on_token(next);
    if (static_cast<int64_t>(res.tokens.size()) >= options.max_new_tokens) break;
    if (options.stop_token && next == *options.stop_token) break;
    logits = model.forward(std::span<const int32_t>(&next, 1), 1, 1, cache);
    next = pick_token(logits.data(), vocab, options, rng_state);
  }
  res.decode_seconds = seconds_since(t);
  return res;
}

}  // namespace eq::model
