#include "model/routing.h"

#include <cmath>

#include "core/error.h"
#include "core/thread_pool.h"

namespace eq::model {

bool renormalizes_top_k(const ModelConfig& c) { return c.norm_topk_prob; }

Routing route_tokens(const float* logits, int64_t tokens, int64_t num_experts, int64_t top_k, bool renormalize) {
  if (top_k <= 0 || top_k > num_experts)
    invalid("router: top_k " + std::to_string(top_k) + " must be in [1, num_experts=" + std::to_string(num_experts) +
            "]");
  Routing r;
  r.tokens = tokens;
  r.top_k = top_k;
  r.expert_ids.resize(tokens * top_k);
  r.weights.resize(tokens * top_k);
  default_pool().parallel_for(static_cast<size_t>(tokens), 64, [&](size_t t0, size_t t1) {
    std::vector<float> prob(num_experts);
    std::vector<char> taken(num_experts);
    for (size_t t = t0; t < t1; ++t) {
      const float* l = logits + t * num_experts;
      float mx = l[0];
      for (int64_t e = 1; e < num_experts; ++e) mx = std::max(mx, l[e]);
      double sum = 0;
      for (int64_t e = 0; e < num_experts; ++e) sum += std::exp(static_cast<double>(l[e]) - mx);
      for (int64_t e = 0; e < num_experts; ++e)
        prob[e] = static_cast<float>(std::exp(static_cast<double>(l[e]) - mx) / sum);
      std::fill(taken.begin(), taken.end(), 0);
      int32_t* ids = r.expert_ids.data() + t * top_k;
      float* w = r.weights.data() + t * top_k;
      for (int64_t j = 0; j < top_k; ++j) {
        int64_t best = -1;
        for (int64_t e = 0; e < num_experts; ++e)
          if (!taken[e] && (best < 0 || prob[e] > prob[best])) best = e;
        taken[best] = 1;
        ids[j] = static_cast<int32_t>(best);
        w[j] = prob[best];
      }
      if (renormalize) {
        float s = 0;
        for (int64_t j = 0; j < top_k; ++j) s += w[j];
        for (int64_t j = 0; j < top_k; ++j) w[j] /= s;
      }
    }
  });
  return r;
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
