#include "model/routing.h"

#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/thread_pool.h"
#include "model/ops.h"

namespace eq::model {
namespace {

constexpr float kNever = -std::numeric_limits<float>::infinity();

// Index of the largest score not yet taken (lower id first on exact ties);
// -1 when every remaining score is kNever.
int64_t take_best(const float* score, std::vector<char>& taken, int64_t n) {
  int64_t best = -1;
  for (int64_t e = 0; e < n; ++e)
    if (!taken[e] && score[e] != kNever && (best < 0 || score[e] > score[best])) best = e;
  if (best >= 0) taken[best] = 1;
  return best;
}

// Per-token scratch, sized once per worker.
struct Scratch {
  std::vector<float> score, value, group;
  std::vector<char> taken, group_taken;
};

// Fills score (what top-k compares) and value (the weight of a chosen expert)
// for one token; disallowed experts score kNever.
void score_token(const float* l, int64_t E, const RouterRule& rule, const float* bias, const uint8_t* allowed,
                 Scratch& s) {
  switch (rule.scoring) {
    case RouterScoring::kSoftmax: {
      float mx = kNever;
      for (int64_t e = 0; e < E; ++e)
        if (!allowed || allowed[e]) mx = std::max(mx, l[e]);
      double sum = 0;
      for (int64_t e = 0; e < E; ++e)
        if (!allowed || allowed[e]) sum += std::exp(static_cast<double>(l[e]) - mx);
      for (int64_t e = 0; e < E; ++e) {
        const bool ok = !allowed || allowed[e];
        s.value[e] = ok ? static_cast<float>(std::exp(static_cast<double>(l[e]) - mx) / sum) : 0.0f;
        s.score[e] = ok ? s.value[e] : kNever;
      }
      return;
    }
    case RouterScoring::kSigmoid: {
      for (int64_t e = 0; e < E; ++e) {
        s.value[e] = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(l[e]))));
        const bool ok = !allowed || allowed[e];
        s.score[e] = ok ? s.value[e] + (bias ? bias[e] : 0.0f) : kNever;
      }
      if (rule.groups <= 1) return;
      const int64_t per = E / rule.groups;
      for (int64_t g = 0; g < rule.groups; ++g) {  // sum of the group's two largest scores
        float a = kNever, b = kNever;
        for (int64_t e = g * per; e < (g + 1) * per; ++e) {
          const float v = s.score[e];
          if (v > a) {
            b = a;
            a = v;
          } else if (v > b) {
            b = v;
          }
        }
        s.group[g] = a == kNever ? kNever : b == kNever ? a : a + b;
      }
      std::fill(s.group_taken.begin(), s.group_taken.end(), 0);
      for (int64_t j = 0; j < rule.topk_groups; ++j) take_best(s.group.data(), s.group_taken, rule.groups);
      for (int64_t g = 0; g < rule.groups; ++g)
        if (!s.group_taken[g])
          for (int64_t e = g * per; e < (g + 1) * per; ++e)
            if (s.score[e] != kNever) s.score[e] = 0.0f;
      return;
    }
    case RouterScoring::kTopKSoftmax:
      for (int64_t e = 0; e < E; ++e) s.score[e] = !allowed || allowed[e] ? l[e] : kNever;
      return;
  }
}

}  // namespace

RouterRule router_rule(const ModelConfig& c) {
  RouterRule r;
  r.scoring = c.router_scoring;
  r.renormalize = c.norm_topk_prob;
  r.groups = c.router_groups;
  r.topk_groups = c.router_topk_groups;
  r.scaling = static_cast<float>(c.routed_scaling_factor);
  return r;
}

Routing route_tokens(const float* logits, int64_t tokens, int64_t num_experts, int64_t top_k, const RouterRule& rule,
                     const float* correction_bias, const uint8_t* allowed) {
  if (top_k <= 0 || top_k > num_experts)
    invalid("router: top_k " + std::to_string(top_k) + " must be in [1, num_experts=" + std::to_string(num_experts) +
            "]");
  if (rule.groups < 1 || num_experts % rule.groups != 0 || rule.topk_groups < 1 || rule.topk_groups > rule.groups)
    invalid("router: " + std::to_string(rule.topk_groups) + " of " + std::to_string(rule.groups) +
            " groups do not fit " + std::to_string(num_experts) + " experts");
  Routing r;
  r.tokens = tokens;
  r.top_k = top_k;
  r.expert_ids.resize(tokens * top_k);
  r.weights.resize(tokens * top_k);
  default_pool().parallel_for(static_cast<size_t>(tokens), 64, [&](size_t t0, size_t t1) {
    Scratch s;
    s.score.resize(num_experts);
    s.value.resize(num_experts);
    s.taken.resize(num_experts);
    s.group.resize(rule.groups);
    s.group_taken.resize(rule.groups);
    for (size_t t = t0; t < t1; ++t) {
      const float* l = logits + t * num_experts;
      score_token(l, num_experts, rule, correction_bias, allowed, s);
      std::fill(s.taken.begin(), s.taken.end(), 0);
      int32_t* ids = r.expert_ids.data() + t * top_k;
      float* w = r.weights.data() + t * top_k;
      for (int64_t j = 0; j < top_k; ++j) {
        const int64_t best = take_best(s.score.data(), s.taken, num_experts);
        if (best < 0) invalid("router: fewer than top_k = " + std::to_string(top_k) + " experts can be chosen");
        ids[j] = static_cast<int32_t>(best);
        w[j] = s.value[best];
      }
      if (rule.scoring == RouterScoring::kTopKSoftmax) {  // selection order is descending: ids[0] holds the max
        double sum = 0;
        for (int64_t j = 0; j < top_k; ++j) sum += std::exp(static_cast<double>(l[ids[j]]) - l[ids[0]]);
        for (int64_t j = 0; j < top_k; ++j)
          w[j] = static_cast<float>(std::exp(static_cast<double>(l[ids[j]]) - l[ids[0]]) / sum);
      }
      if (rule.renormalize) {
        float sum = 0;
        for (int64_t j = 0; j < top_k; ++j) sum += w[j];
        if (rule.scoring == RouterScoring::kSigmoid) sum += 1e-20f;
        for (int64_t j = 0; j < top_k; ++j) w[j] /= sum;
      }
      if (rule.scaling != 1.0f)
        for (int64_t j = 0; j < top_k; ++j) w[j] *= rule.scaling;
    }
  });
  return r;
}

LayerRouter load_router(const ModelConfig& c, const WeightStore& w, int64_t layer) {
  const int64_t E = c.num_experts;
  LayerRouter r;
  r.weight = w.get(router_name(c, layer), {E, c.hidden_size});
  if (c.router_bias) r.bias = w.get(router_bias_name(c, layer), {E});
  if (c.router_correction_bias) r.correction_bias = w.get(router_correction_bias_name(c, layer), {E});
  return r;
}

void router_logits(const ModelConfig& c, const LayerRouter& r, const float* x, int64_t n, float* logits) {
  linear(x, n, c.hidden_size, r.weight->data.data(), c.num_experts, r.bias ? r.bias->data.data() : nullptr, logits);
}

Routing route_layer(const ModelConfig& c, const LayerRouter& r, const float* logits, int64_t tokens,
                    const uint8_t* allowed) {
  return route_tokens(logits, tokens, c.num_experts, c.top_k, router_rule(c),
                      r.correction_bias ? r.correction_bias->data.data() : nullptr, allowed);
}

ExpertGroups group_by_expert(const Routing& r, int64_t num_experts) {
  ExpertGroups g;
  g.offsets.assign(num_experts + 1, 0);
  for (int32_t e : r.expert_ids) ++g.offsets[e + 1];
  for (int64_t e = 0; e < num_experts; ++e) g.offsets[e + 1] += g.offsets[e];
  g.slots.resize(r.expert_ids.size());
  std::vector<int64_t> next(g.offsets.begin(), g.offsets.end() - 1);
  for (size_t s = 0; s < r.expert_ids.size(); ++s) g.slots[next[r.expert_ids[s]]++] = static_cast<int64_t>(s);
  return g;
}

}  // namespace eq::model
