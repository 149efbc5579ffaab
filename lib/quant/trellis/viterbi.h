// Viterbi search over a bitshift trellis: states are L-bit windows of the bit
// stream, state_t = ((state_{t-1} << K) | symbol_t) mod 2^L, and the emitted
// value of state s is codes[s]. It finds the stream minimizing
//   sum_t weight[t] * (codes[state_t] - target[t])^2.
// L is a run-time parameter so tests can check optimality against brute force
// on small trellises; the formats use L = 16 (SIMD step kernels).
#pragma once

#include <cstdint>
#include <vector>

namespace eq::quant::trellis {

struct TrellisProblem {
  int L = 16;
  int K = 2;
  const float* codes = nullptr;   // 2^L values
  int T = 0;                      // sequence length
  const float* target = nullptr;  // [T]
  const float* weight = nullptr;  // [T], >= 0
};

inline constexpr int kOverlapWindow = 256;

class Viterbi {
 public:
  // Exact minimum over streams whose state before step 0 and last state agree
  // on their low L-K bits with `overlap` (that is what tail-biting requires of
  // a circular stream), or over all streams with a free start when overlap < 0.
  // Writes the states (t < T) and returns the cost.
  double run(const TrellisProblem& p, int64_t overlap, uint32_t* states);

  // Tail-biting in two passes (as QTIP): a free pass over the circular
  // sequence around position 0 (positions -64..63, so position 0 is far from
  // that pass's own ends) picks the overlap, then a constrained pass finds the
  // best circular stream with it.
  double run_tail_biting(const TrellisProblem& p, uint32_t* states);

 private:
  std::vector<float> cost_a_, cost_b_;
  std::vector<uint8_t> planes_;
  std::vector<float> rolled_target_, rolled_weight_;
  std::vector<uint32_t> rolled_states_;
};

// Cost of a state sequence (for tests and the refit).
double trellis_cost(const TrellisProblem& p, const uint32_t* states);

}  // namespace eq::quant::trellis
