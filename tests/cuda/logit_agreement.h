// How close two runs' logits are, as distributions: a GPU path against the
// CPU's (or another GPU path) can pick the other of two near-tied experts,
// so logits are compared by mean KL and top token, not element by element.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "model/float_buffer.h"

namespace eq::test {

struct LogitAgreement {
  double kl_mean = 0;  // mean over rows of KL(p || q), nats
  int64_t same_top = 0, rows = 0;
  std::vector<double> kl_rows;  // each row's KL, for saying where two runs part
};

// p, q: [rows, V] logits of the same positions.
inline LogitAgreement logit_agreement(const model::FloatBuffer& p_logits, const model::FloatBuffer& q_logits,
                                      int64_t V) {
  LogitAgreement g;
  g.rows = static_cast<int64_t>(p_logits.size()) / V;
  double kl_sum = 0;
  for (int64_t r = 0; r < g.rows; ++r) {
    const float* p = p_logits.data() + r * V;
    const float* q = q_logits.data() + r * V;
    const double pm = *std::max_element(p, p + V), qm = *std::max_element(q, q + V);
    double ps = 0, qs = 0;
    for (int64_t v = 0; v < V; ++v) ps += std::exp(p[v] - pm), qs += std::exp(q[v] - qm);
    double kl = 0;
    for (int64_t v = 0; v < V; ++v) {
      const double lp = p[v] - pm - std::log(ps), lq = q[v] - qm - std::log(qs);
      kl += std::exp(lp) * (lp - lq);
    }
    kl_sum += kl;
    g.kl_rows.push_back(kl);
    g.same_top += std::max_element(p, p + V) - p == std::max_element(q, q + V) - q;
  }
  g.kl_mean = kl_sum / static_cast<double>(g.rows);
  return g;
}

}  // namespace eq::test
