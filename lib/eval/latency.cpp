#include "eval/latency.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "eval/finite.h"
#include "exec/packed_model.h"
#include "exec/packed_moe_block.h"
#include "model/ops.h"
#include "model/routing.h"

namespace eq::eval {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Tokens for a forward of `m` tokens: batch × seq with seq a power of two
// within the model's positions, taken from the text (repeated if short).
std::vector<int32_t> step_tokens(std::span<const int32_t> text, int64_t m) {
  std::vector<int32_t> t(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) t[static_cast<size_t>(i)] = text[static_cast<size_t>(i) % text.size()];
  return t;
}

int64_t step_seq_len(int64_t m, int64_t max_seq) {
  int64_t seq = 1;
  while (seq * 2 <= std::min(m, max_seq) && m % (seq * 2) == 0) seq *= 2;
  return std::min(seq, m);
}

}  // namespace

LatencyResult measure_latency(exec::PackedModel& pm, const exec::MoeInputs& inputs, std::span<const int32_t> tokens,
                              const std::vector<std::shared_ptr<const exec::Dispatch>>& dispatches,
                              const LatencyOptions& o) {
  const auto t0 = Clock::now();
  if (tokens.empty()) invalid("latency: no evaluation tokens");
  if (o.sweep.empty()) invalid("latency: empty M sweep");
  const int64_t max_m = *std::max_element(o.sweep.begin(), o.sweep.end());
  if (max_m > inputs.rows) invalid("latency: M up to " + std::to_string(max_m) + " needs that many captured rows");
  pm.use_reference(false);
  model::Model& model = pm.model();
  const model::ModelConfig& c = model.config();
  const int64_t H = c.hidden_size;
  int64_t max_seq = o.ctx;
  if (c.max_position_embeddings > 0) max_seq = std::min(max_seq, c.max_position_embeddings);
  const std::shared_ptr<const exec::Dispatch> saved = pm.dispatch_ptr();

  LatencyResult r;
  r.folder = pm.folder();
  for (const exec::PackedLayer& l : pm.layers()) {
    r.layers.push_back(l.layer);
    r.groups_per_layer.push_back(static_cast<int64_t>(l.groups.size()));
  }
  for (const auto& d : dispatches) {
    StrategyLatency s;
    s.dispatch = d->name();
    if (d->kind() == exec::DispatchKind::kAuto) s.sort_cutoff = d->sort_cutoff();
    r.strategies.push_back(std::move(s));
  }

  std::vector<float> out;
  const int64_t points = static_cast<int64_t>(o.sweep.size() + dispatches.size());
  int64_t done = 0;
  for (int64_t m : o.sweep) {
    if (o.progress) o.progress(done++, points, "MoE step M=" + std::to_string(m));
    out.resize(static_cast<size_t>(m * H));
    const size_t L = pm.layers().size();
    // samples[strategy][layer][rep], step[strategy][rep]
    std::vector<std::vector<std::vector<double>>> samples(dispatches.size(), std::vector<std::vector<double>>(L));
    std::vector<std::vector<double>> step(dispatches.size());
    for (int rep = 0; rep < o.warmup + o.reps; ++rep)
      for (size_t d = 0; d < dispatches.size(); ++d) {
        pm.set_dispatch(dispatches[d]);
        double total = 0;
        for (size_t li = 0; li < L; ++li) {
          const exec::PackedLayer& l = pm.layers()[li];
          model::MoeCall call{l.layer, 1, m, 0, nullptr};
          const auto ts = Clock::now();
          pm.block(l.layer).forward(call, inputs.by_layer.at(l.layer).data(), out.data());
          const double sec = since(ts);
          total += sec;
          if (rep >= o.warmup) samples[d][li].push_back(sec);
        }
        if (rep >= o.warmup) step[d].push_back(total);
      }
    std::vector<exec::TimingStats> model_steps(dispatches.size());
    if (o.model_step) {
      const int64_t seq = step_seq_len(m, max_seq), batch = m / seq;
      const std::vector<int32_t> toks = step_tokens(tokens, m);
      std::vector<std::vector<double>> ms(dispatches.size());
      for (int rep = 0; rep < o.warmup + o.reps; ++rep)
        for (size_t d = 0; d < dispatches.size(); ++d) {
          pm.set_dispatch(dispatches[d]);
          model::KvCache cache = model.new_cache(batch, seq);
          const auto ts = Clock::now();
          (void)model.forward(toks, batch, seq, cache);
          if (rep >= o.warmup) ms[d].push_back(since(ts));
        }
      for (size_t d = 0; d < dispatches.size(); ++d) model_steps[d] = exec::summarize_times(ms[d]);
    }
    for (size_t d = 0; d < dispatches.size(); ++d) {
      LatencyPoint p;
      p.m = m;
      p.moe_step = exec::summarize_times(step[d]);
      for (size_t li = 0; li < L; ++li) p.per_layer.push_back(exec::summarize_times(samples[d][li]));
      p.model_step = model_steps[d];
      const exec::Dispatch& disp = *dispatches[d];
      p.sorted_branch = disp.kind() == exec::DispatchKind::kSorted ||
                        (disp.kind() == exec::DispatchKind::kAuto &&
                         disp.sorts(m));
      // Bytes from the routing of these inputs (router run once, outside the timing).
      for (const exec::PackedLayer& l : pm.layers()) {
        const float* x = inputs.by_layer.at(l.layer).data();
        std::vector<float> logits(static_cast<size_t>(m * c.num_experts));
        const model::LayerRouter router = model::load_router(c, model.weights(), l.layer);
        model::router_logits(c, router, x, m, logits.data());
        const model::Routing routing = exec::route_survivors(c, router, l, logits.data(), m);
        const exec::BytesRead b = exec::estimate_bytes_read(disp, l, routing.expert_ids.data(), m, c.top_k, H);
        p.bytes.weights += b.weights;
        p.bytes.activations += b.activations;
      }
      r.strategies[d].points.push_back(std::move(p));
    }
  }

  // Decode (M = 1 with the KV cache) and prefill, per strategy.
  const int64_t prompt = std::min<int64_t>(o.decode_prompt, max_seq / 2);
  const int64_t steps = std::min<int64_t>(o.decode_tokens, max_seq - prompt);
  const std::vector<int32_t> text = step_tokens(tokens, prompt + steps);
  const int64_t pre = std::min<int64_t>(o.prefill_tokens, max_seq);
  const std::vector<int32_t> pre_toks = step_tokens(tokens, pre);
  for (size_t d = 0; d < dispatches.size(); ++d) {
    if (o.progress) o.progress(done++, points, "decode/prefill " + dispatches[d]->name());
    pm.set_dispatch(dispatches[d]);
    StrategyLatency& s = r.strategies[d];
    std::vector<double> per_step;
    for (int run = 0; run < 1 + std::min(o.warmup, 1); ++run) {
      const bool timed = run == std::min(o.warmup, 1);
      model::KvCache cache = model.new_cache(1, prompt + steps);
      (void)model.forward(std::span<const int32_t>(text.data(), static_cast<size_t>(prompt)), 1, prompt, cache);
      for (int64_t i = 0; i < steps; ++i) {
        const auto ts = Clock::now();
        (void)model.forward(std::span<const int32_t>(text.data() + prompt + i, 1), 1, 1, cache);
        if (timed) per_step.push_back(since(ts));
      }
    }
    s.decode_step = exec::summarize_times(per_step);
    // From the median step: robust to a step that waited for another process.
    s.decode_tokens_per_second = s.decode_step.median > 0 ? 1.0 / s.decode_step.median : 0;
    s.prefill = exec::time_repeated(
        [&] {
          model::KvCache cache = model.new_cache(1, pre);
          (void)model.forward(pre_toks, 1, pre, cache);
        },
        o.warmup, std::max(1, o.reps / 2));
    s.prefill_tokens = pre;
    s.prefill_tokens_per_second = s.prefill.median > 0 ? static_cast<double>(pre) / s.prefill.median : 0;
  }
  pm.set_dispatch(saved);
  r.seconds = since(t0);
  const char* cause = "a timing went non-finite";
  for (const StrategyLatency& s : r.strategies) {
    const std::string of = "latency of " + s.dispatch + ": ";
    require_finite(s.decode_tokens_per_second, of + "decode tokens/s", cause, ErrorKind::kInternal);
    require_finite(s.prefill_tokens_per_second, of + "prefill tokens/s", cause, ErrorKind::kInternal);
    for (const LatencyPoint& p : s.points) {
      require_finite(p.moe_step.median, of + "MoE step median at M=" + std::to_string(p.m), cause, ErrorKind::kInternal);
      require_finite(p.model_step.median, of + "model step median at M=" + std::to_string(p.m), cause,
                     ErrorKind::kInternal);
    }
  }
  if (o.progress) o.progress(points, points, "done");
  return r;
}

}  // namespace eq::eval
