#include "quant/trellis/viterbi.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "quant/trellis/kernels.h"

namespace eq::quant::trellis {

double Viterbi::run(const TrellisProblem& p, int64_t overlap, uint32_t* states) {
  EQ_CHECK(p.K >= 1 && p.L > p.K && p.L <= 24 && p.T >= 1, "bad trellis problem");
  const size_t num_states = size_t{1} << p.L;
  const uint32_t overlap_mask = (1u << (p.L - p.K)) - 1;
  const size_t plane_bytes = std::max<size_t>(1, (num_states >> p.K) / 8);
  const size_t step_bytes = plane_bytes * static_cast<size_t>(p.K);
  cost_a_.resize(num_states);
  cost_b_.resize(num_states);
  planes_.resize(step_bytes * static_cast<size_t>(p.T));

  const float inf = std::numeric_limits<float>::infinity();
  for (size_t s = 0; s < num_states; ++s)
    cost_a_[s] = (overlap < 0 || (s & overlap_mask) == static_cast<uint64_t>(overlap)) ? 0.0f : inf;

  const Kernels& k = kernels();
  float* prev = cost_a_.data();
  float* next = cost_b_.data();
  int t = 0;
  for (; t + 1 < p.T; t += 2) {
    k.viterbi_two_steps(prev, next, planes_.data() + step_bytes * t, planes_.data() + step_bytes * (t + 1), p.codes,
                        p.L, p.K, p.target[t], p.weight[t], p.target[t + 1], p.weight[t + 1]);
    std::swap(prev, next);
  }
  if (t < p.T) {
    k.viterbi_step(prev, next, planes_.data() + step_bytes * t, p.codes, p.L, p.K, p.target[t], p.weight[t]);
    std::swap(prev, next);
  }

  // Best admissible final state (lowest index on ties).
  uint32_t best = 0;
  float best_cost = inf;
  bool found = false;
  for (size_t s = 0; s < num_states; ++s) {
    if (overlap >= 0 && (s & overlap_mask) != static_cast<uint64_t>(overlap)) continue;
    if (!found || prev[s] < best_cost) {
      best = static_cast<uint32_t>(s);
      best_cost = prev[s];
      found = true;
    }
  }
  EQ_CHECK(found, "no admissible final state");

  uint32_t state = best;
  for (int t = p.T - 1; t >= 0; --t) {
    states[t] = state;
    const uint32_t group = state >> p.K;
    const uint8_t* planes = planes_.data() + step_bytes * t;
    uint32_t j = 0;
    for (int b = 0; b < p.K; ++b) j |= ((planes[b * plane_bytes + (group >> 3)] >> (group & 7)) & 1u) << b;
    state = group | (j << (p.L - p.K));
  }
  return trellis_cost(p, states);
}

double Viterbi::run_tail_biting(const TrellisProblem& p, uint32_t* states) {
  // The free pass covers kOverlapWindow steps centred on position 0 (wrapping
  // around): survivor paths of a bitshift trellis merge within a few L/K steps,
  // so a longer pass would pick the same overlap at a higher cost.
  const int window = std::min(p.T, kOverlapWindow);
  const int half = window / 2;
  rolled_target_.resize(window);
  rolled_weight_.resize(window);
  rolled_states_.resize(window);
  for (int i = 0; i < window; ++i) {
    int src = ((i - half) % p.T + p.T) % p.T;  // rolled[half] = original[0]
    rolled_target_[i] = p.target[src];
    rolled_weight_[i] = p.weight[src];
  }
  TrellisProblem rolled = p;
  rolled.T = window;
  rolled.target = rolled_target_.data();
  rolled.weight = rolled_weight_.data();
  run(rolled, -1, rolled_states_.data());
  const int64_t overlap = rolled_states_[half] >> p.K;  // low L-K bits of the state before original[0]
  return run(p, overlap, states);
}

double trellis_cost(const TrellisProblem& p, const uint32_t* states) {
  double cost = 0;
  for (int t = 0; t < p.T; ++t) {
    double d = static_cast<double>(p.codes[states[t]]) - p.target[t];
    cost += static_cast<double>(p.weight[t]) * d * d;
  }
  return cost;
}

}  // namespace eq::quant::trellis
