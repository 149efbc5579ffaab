// Scalar Viterbi step (the reference; any L). See quant/trellis/kernels.h.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "quant/trellis/kernels.h"

namespace eq::quant::trellis {

void viterbi_step_generic(const float* prev, float* next, uint8_t* planes, const float* codes, int L, int K,
                          float target, float weight) {
  const uint32_t groups = 1u << (L - K);
  const uint32_t fan = 1u << K;
  const size_t plane_bytes = std::max<size_t>(1, groups / 8);
  const float linear = -2.0f * weight * target;
  std::memset(planes, 0, plane_bytes * K);
  for (uint32_t r = 0; r < groups; ++r) {
    // Predecessors of the states (r << K) | b are r + j * groups: one strided group.
    float best = prev[r];
    uint32_t arg = 0;
    for (uint32_t j = 1; j < fan; ++j) {
      float c = prev[r + j * groups];
      if (c < best) {
        best = c;
        arg = j;
      }
    }
    for (int b = 0; b < K; ++b) planes[b * plane_bytes + (r >> 3)] |= static_cast<uint8_t>(((arg >> b) & 1u) << (r & 7));
    for (uint32_t b = 0; b < fan; ++b) {
      uint32_t s = (r << K) | b;
      next[s] = std::fma(codes[s], std::fma(codes[s], weight, linear), best);
    }
  }
}

void two_single_steps(ViterbiStepFn step, const float* prev, float* next, uint8_t* planes0, uint8_t* planes1,
                      const float* codes, int L, int K, float target0, float weight0, float target1, float weight1) {
  thread_local std::vector<float> middle;
  middle.resize(size_t{1} << L);
  step(prev, middle.data(), planes0, codes, L, K, target0, weight0);
  step(middle.data(), next, planes1, codes, L, K, target1, weight1);
}

void viterbi_two_steps_generic(const float* prev, float* next, uint8_t* planes0, uint8_t* planes1, const float* codes,
                               int L, int K, float target0, float weight0, float target1, float weight1) {
  two_single_steps(viterbi_step_generic, prev, next, planes0, planes1, codes, L, K, target0, weight0, target1,
                   weight1);
}

}  // namespace eq::quant::trellis
