#include "eval/quality.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

#include "core/error.h"
#include "eval/finite.h"
#include "exec/packed_model.h"
#include "exec/packed_moe_block.h"
#include "exec/timing.h"
#include "model/forward.h"
#include "model/layer_pass.h"
#include "model/moe_observer.h"

namespace eq::eval {
namespace {

// Runs the packed block on each reference block's input and accumulates the
// error of its output against the reference output.
class LayerErrorObserver : public model::MoeObserver {
 public:
  explicit LayerErrorObserver(exec::PackedModel& pm) : pm_(pm) {}
  struct Acc {
    double diff2 = 0, ref2 = 0, cos_sum = 0, cos_min = 1;
    int64_t tokens = 0;
  };
  void on_moe_block(const model::MoeObservation& obs) override {
    const int64_t n = obs.tokens, H = obs.hidden;
    packed_out_.resize(static_cast<size_t>(n * H));
    model::MoeCall call{obs.layer, obs.batch, obs.seq_len, obs.start_pos, nullptr};
    pm_.block(obs.layer).forward(call, obs.input, packed_out_.data());
    Acc& a = acc_[obs.layer];
    for (int64_t t = 0; t < n; ++t) {
      const float* r = obs.output + t * H;
      const float* p = packed_out_.data() + t * H;
      double d2 = 0, rr = 0, pp = 0, rp = 0;
      for (int64_t i = 0; i < H; ++i) {
        const double dr = r[i], dp = p[i];
        d2 += (dp - dr) * (dp - dr);
        rr += dr * dr;
        pp += dp * dp;
        rp += dr * dp;
      }
      a.diff2 += d2;
      a.ref2 += rr;
      const double cos = (rr > 0 && pp > 0) ? rp / std::sqrt(rr * pp) : (rr == pp ? 1.0 : 0.0);
      a.cos_sum += cos;
      a.cos_min = std::isnan(cos) ? cos : std::min(a.cos_min, cos);
      ++a.tokens;
    }
  }
  std::vector<LayerError> result() const {
    std::vector<LayerError> out;
    for (const auto& [layer, a] : acc_) {
      LayerError e;
      e.layer = layer;
      e.tokens = a.tokens;
      e.rel_l2 = a.ref2 > 0 ? std::sqrt(a.diff2 / a.ref2) : std::sqrt(a.diff2);
      e.cosine_mean = a.tokens ? a.cos_sum / static_cast<double>(a.tokens) : 0;
      e.cosine_min = a.tokens ? a.cos_min : 0;
      const std::string of = "per-layer error of layer " + std::to_string(layer) + ": ";
      require_finite(e.rel_l2, of + "relative L2", kEitherLogitsCause);
      require_finite(e.cosine_mean, of + "mean cosine", kEitherLogitsCause);
      out.push_back(e);
    }
    return out;
  }

 private:
  exec::PackedModel& pm_;
  std::map<int64_t, Acc> acc_;
  model::FloatBuffer packed_out_;
};

struct TextAcc {
  double nats_ref = 0, nats_packed = 0;
  int64_t agree = 0;
  std::vector<double> kl;
};

// log-softmax of one row in double.
void log_softmax(const float* logits, int64_t v, std::vector<double>& out) {
  out.resize(static_cast<size_t>(v));
  double mx = logits[0];
  for (int64_t i = 1; i < v; ++i) mx = std::max(mx, static_cast<double>(logits[i]));
  double sum = 0;
  for (int64_t i = 0; i < v; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  const double lse = mx + std::log(sum);
  for (int64_t i = 0; i < v; ++i) out[static_cast<size_t>(i)] = static_cast<double>(logits[i]) - lse;
}

int64_t argmax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return best;
}

TextQuality finish(const std::string& label, TextAcc& a) {
  TextQuality q;
  q.label = label;
  q.scored_tokens = static_cast<int64_t>(a.kl.size());
  if (a.kl.empty()) return q;
  const double n = static_cast<double>(a.kl.size());
  q.bits_reference = a.nats_ref / n / std::log(2.0);
  q.bits_packed = a.nats_packed / n / std::log(2.0);
  double sum = 0;
  for (double k : a.kl) sum += k;
  q.kl_mean = sum / n;
  q.kl_p99 = exec::percentile(a.kl, 0.99);
  q.kl_max = *std::max_element(a.kl.begin(), a.kl.end());
  q.top1_agreement = static_cast<double>(a.agree) / n;
  const std::string of = "quality of '" + label + "': ";
  require_finite(q.bits_packed, of + "bits per token of the packed model", kPackedLogitsCause);
  require_finite(q.bits_reference, of + "bits per token of the reference model", kModelLogitsCause);
  require_finite(q.kl_mean, of + "mean KL divergence", kEitherLogitsCause);
  require_finite(q.kl_p99, of + "p99 KL divergence", kEitherLogitsCause);
  require_finite(q.kl_max, of + "max KL divergence", kEitherLogitsCause);
  return q;
}

// (start, length) of each window: consecutive ctx-token windows from the
// start of each document, the last of a document shorter.
std::vector<std::pair<int64_t, int64_t>> text_windows(const LabeledTokens& t, int64_t ctx) {
  std::vector<std::pair<int64_t, int64_t>> windows;
  const int64_t n = static_cast<int64_t>(t.tokens.size());
  std::vector<int64_t> starts = t.document_starts;
  if (starts.empty() || starts.front() != 0) starts.insert(starts.begin(), 0);
  for (size_t d = 0; d < starts.size(); ++d) {
    const int64_t end = d + 1 < starts.size() ? std::min(starts[d + 1], n) : n;
    for (int64_t b = starts[d]; b < end; b += ctx) windows.push_back({b, std::min(ctx, end - b)});
  }
  return windows;
}

}  // namespace

QualityResult compare_quality(exec::PackedModel& pm, const std::vector<LabeledTokens>& texts,
                              const QualityOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  if (options.ctx < 2) invalid("quality: ctx " + std::to_string(options.ctx) + " must be >= 2");
  // Without the unquantized model only the packed model's own bits are scored.
  const bool compare = pm.has_reference();
  pm.use_reference(false);
  model::Model& m = pm.model();
  const int64_t V = m.config().vocab_size;
  int64_t total = 0;
  for (const LabeledTokens& t : texts) {
    m.check_tokens(t.tokens, std::max<int64_t>(1, static_cast<int64_t>(t.tokens.size())), t.label);
    for (const auto& [start, len] : text_windows(t, options.ctx)) total += std::max<int64_t>(0, len - 1);
  }
  LayerErrorObserver layer_obs(pm);
  // Windows of equal length run together (all full windows, then the tail),
  // batches of a text in order, texts in order.
  std::vector<model::WindowBatch> batches;
  std::vector<size_t> text_of;
  for (size_t ti = 0; ti < texts.size(); ++ti) {
    const LabeledTokens& text = texts[ti];
    const std::vector<std::pair<int64_t, int64_t>> windows = text_windows(text, options.ctx);
    for (size_t w0 = 0; w0 < windows.size();) {
      size_t w1 = w0;
      while (w1 < windows.size() && w1 - w0 < static_cast<size_t>(options.batch_windows) &&
             windows[w1].second == windows[w0].second)
        ++w1;
      const int64_t len = windows[w0].second, batch = static_cast<int64_t>(w1 - w0);
      std::vector<int32_t> toks;
      for (size_t w = w0; w < w1; ++w)
        toks.insert(toks.end(), text.tokens.begin() + windows[w].first,
                    text.tokens.begin() + windows[w].first + len);
      w0 = w1;
      if (len < 2) continue;
      batches.push_back({std::move(toks), batch, len});
      text_of.push_back(ti);
    }
  }
  model::PassOptions po;
  po.order = options.pass_order;
  po.hidden_memory = options.hidden_memory;
  po.spill_dir = options.spill_dir;
  po.progress = options.pass_progress;
  // The reference model's pass first (its observer runs the packed blocks on
  // the reference inputs), its final hidden states kept for the scoring.
  std::vector<int64_t> rows;
  for (const model::WindowBatch& b : batches) rows.push_back(compare ? b.rows() : 0);
  model::HiddenStates reference_hidden(rows, m.config().hidden_size, po.hidden_memory, po.spill_dir);
  model::Model* ref = nullptr;
  if (compare) {
    if (options.pass_start) options.pass_start("reference");
    pm.use_reference(true);
    ref = &pm.model();
    ref->set_observer(&layer_obs);
    model::run_pass(*ref, batches, po,
                    [&](size_t i, model::FloatBuffer& hidden) { reference_hidden.write(i, hidden.data()); });
    ref->set_observer(nullptr);
    pm.use_reference(false);
  }
  std::vector<TextAcc> accs(texts.size());
  int64_t done = 0;
  std::vector<double> lr, lp;
  model::FloatBuffer hidden_r, logits_r, logits_p;
  if (options.pass_start) options.pass_start("packed");
  model::run_pass(m, batches, po, [&](size_t bi, model::FloatBuffer& hidden_p) {
    const model::WindowBatch& bt = batches[bi];
    const int64_t batch = bt.batch, len = bt.seq_len, n = bt.rows();
    const std::vector<int32_t>& toks = bt.tokens;
    TextAcc& acc = accs[text_of[bi]];
    if (compare) {
      hidden_r.resize(n * m.config().hidden_size);
      reference_hidden.read(bi, hidden_r.data());
      logits_r.resize(n * V);
      ref->logits(hidden_r.data(), n, logits_r.data());
    }
    logits_p.resize(n * V);
    m.logits(hidden_p.data(), n, logits_p.data());
    for (int64_t s = 0; s < batch; ++s)
      for (int64_t i = 0; i + 1 < len; ++i) {
        const int64_t row = s * len + i;
        const int32_t next = toks[static_cast<size_t>(row + 1)];
        const float* b = logits_p.data() + row * V;
        log_softmax(b, V, lp);
        acc.nats_packed -= lp[static_cast<size_t>(next)];
        if (!compare) {
          acc.kl.push_back(0.0);  // counts the scored position
          continue;
        }
        const float* a = logits_r.data() + row * V;
        log_softmax(a, V, lr);
        acc.nats_ref -= lr[static_cast<size_t>(next)];
        double kl = 0;
        for (int64_t v = 0; v < V; ++v) kl += std::exp(lr[static_cast<size_t>(v)]) * (lr[static_cast<size_t>(v)] - lp[static_cast<size_t>(v)]);
        acc.kl.push_back(kl < 0 ? 0.0 : kl);  // rounding below 0 clamped; a NaN kept (and refused in finish)
        acc.agree += argmax(a, V) == argmax(b, V);
      }
    done += batch * (len - 1);
    if (options.progress) options.progress(done, total);
  });
  TextAcc all;
  QualityResult r;
  for (size_t ti = 0; ti < texts.size(); ++ti) {
    TextAcc& acc = accs[ti];
    all.nats_ref += acc.nats_ref;
    all.nats_packed += acc.nats_packed;
    all.agree += acc.agree;
    all.kl.insert(all.kl.end(), acc.kl.begin(), acc.kl.end());
    r.texts.push_back(finish(texts[ti].label, acc));
  }
  pm.use_reference(false);
  r.compared = compare;
  r.overall = finish("all", all);
  r.layers = layer_obs.result();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace eq::eval
