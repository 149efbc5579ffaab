#include "eval/perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <span>

#include "core/error.h"
#include "eval/finite.h"
#include "model/forward.h"
#include "model/layer_pass.h"

namespace eq::eval {
namespace {

struct Window {
  const int32_t* tokens;
  int64_t length;
};

// Logit rows per lm_head call: bounds the logits buffer for large vocabularies.
constexpr int64_t kLogitRowBudget = 1 << 22;  // floats

// -ln softmax(logits)[target], in double.
double neg_log_prob(const float* logits, int64_t vocab, int32_t target) {
  const float mx = *std::max_element(logits, logits + vocab);
  double sum = 0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(logits[v]) - mx);
  return std::log(sum) + mx - static_cast<double>(logits[target]);
}

}  // namespace

double PerplexityResult::bits_per_token() const { return nats_per_token() / std::log(2.0); }
double PerplexityResult::perplexity() const { return std::exp(nats_per_token()); }

PerplexityResult perplexity(model::Model& model, const std::vector<std::vector<int32_t>>& sequences,
                            const PerplexityOptions& options) {
  if (options.ctx < 2) invalid("perplexity: --ctx must be at least 2, got " + std::to_string(options.ctx));
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t vocab = model.config().vocab_size;
  const int64_t batch_windows = std::max<int64_t>(1, options.batch_windows);

  // Windows grouped by length (full windows together; each short tail alone or
  // with tails of equal length), in file order within a group.
  std::map<int64_t, std::vector<Window>> by_length;
  PerplexityResult res;
  int64_t to_score = 0;
  for (const auto& seq : sequences) {
    const int64_t n = static_cast<int64_t>(seq.size());
    for (int64_t b = 0; b < n; b += options.ctx) {
      const int64_t len = std::min(options.ctx, n - b);
      res.tokens += len;
      if (len < 2) continue;  // nothing to score
      by_length[len].push_back({seq.data() + b, len});
      to_score += len - 1;
    }
  }

  // Per-window sums, added in a fixed order (longest windows first, file order
  // within a length), so a run is reproducible for any thread count.
  std::vector<model::WindowBatch> batches;
  for (auto it = by_length.rbegin(); it != by_length.rend(); ++it) {
    const int64_t len = it->first;
    const auto& windows = it->second;
    for (size_t w0 = 0; w0 < windows.size(); w0 += batch_windows) {
      model::WindowBatch& b = batches.emplace_back();
      b.batch = std::min<int64_t>(batch_windows, static_cast<int64_t>(windows.size() - w0));
      b.seq_len = len;
      b.tokens.resize(b.batch * len);
      for (int64_t w = 0; w < b.batch; ++w)
        std::copy(windows[w0 + w].tokens, windows[w0 + w].tokens + len, b.tokens.begin() + w * len);
    }
  }
  model::FloatBuffer logits;
  const int64_t H = model.config().hidden_size;
  const int64_t rows_per_call = std::max<int64_t>(1, kLogitRowBudget / vocab);
  model::PassOptions po;
  po.order = options.pass_order;
  po.hidden_memory = options.hidden_memory;
  po.spill_dir = options.spill_dir;
  po.progress = options.pass_progress;
  model::run_pass(model, batches, po, [&](size_t i, model::FloatBuffer& hidden) {
    const model::WindowBatch& b = batches[i];
    const int64_t len = b.seq_len;
    for (int64_t s = 0; s < b.batch; ++s) {
      double window_nats = 0;
      // Rows 0..len-2 predict tokens 1..len-1.
      for (int64_t r0 = 0; r0 < len - 1; r0 += rows_per_call) {
        const int64_t rows = std::min(rows_per_call, len - 1 - r0);
        logits.resize(rows * vocab);
        model.logits(hidden.data() + (s * len + r0) * H, rows, logits.data());
        for (int64_t r = 0; r < rows; ++r)
          window_nats += neg_log_prob(logits.data() + r * vocab, vocab, b.tokens[s * len + r0 + r + 1]);
      }
      res.total_nats += window_nats;
      res.scored_tokens += len - 1;
      ++res.windows;
    }
    if (options.progress) options.progress(res.scored_tokens, to_score);
  });
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (res.windows == 0) invalid("perplexity: no window of at least 2 tokens to score");
  require_finite(res.total_nats, "perplexity: the summed log-loss", kModelLogitsCause);
  return res;
}

}  // namespace eq::eval
