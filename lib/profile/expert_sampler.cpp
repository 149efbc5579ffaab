#include "profile/expert_sampler.h"

#include "core/hash.h"
#include <algorithm>
#include <cstring>

namespace eq::profile {
namespace {

}  // namespace

ExpertSampler::ExpertSampler(int64_t num_layers, int64_t num_experts, int64_t hidden, int64_t capacity,
                             uint64_t seed)
    : num_experts_(num_experts), hidden_(hidden), capacity_(capacity) {
  experts_.resize(num_layers * num_experts);
  layers_.resize(num_layers);
  for (int64_t l = 0; l < num_layers; ++l) {
    layers_[l].rng = seed ^ (0x1000003ull * uint64_t(l + 1)) ^ 0xabcdefull;
    for (int64_t e = 0; e < num_experts; ++e)
      experts_[l * num_experts + e].rng = seed ^ (0x1000003ull * uint64_t(l + 1)) ^ (0x9e37ull * uint64_t(e + 1));
  }
}

void ExpertSampler::offer(InputSample& s, const float* x, float gate) {
  ++s.seen;
  int64_t slot;
  if (s.rows < capacity_) {
    slot = s.rows++;
    s.x.resize(s.rows * hidden_);
    s.gate.resize(s.rows);
  } else {
    slot = int64_t(splitmix64(s.rng) % uint64_t(s.seen));
    if (slot >= capacity_) return;
  }
  std::memcpy(s.x.data() + slot * hidden_, x, hidden_ * sizeof(float));
  s.gate[slot] = gate;
}

void ExpertSampler::offer_expert(int64_t layer_index, int64_t expert, const float* x, float gate) {
  if (capacity_ > 0) offer(experts_[layer_index * num_experts_ + expert], x, gate);
}

void ExpertSampler::offer_layer(int64_t layer_index, const float* x) {
  if (capacity_ > 0) offer(layers_[layer_index], x, 1.0f);
}

int64_t sample_capacity(int64_t wanted, uint64_t memory_budget, int64_t num_layers, int64_t num_experts,
                        int64_t hidden) {
  if (wanted <= 0) return 0;
  const uint64_t per_row = uint64_t(hidden) * sizeof(float) + sizeof(float);
  const uint64_t rows_total = uint64_t(num_layers) * uint64_t(num_experts + 1);
  const uint64_t fit = memory_budget / std::max<uint64_t>(1, per_row * rows_total);
  return std::max<int64_t>(1, std::min<int64_t>(wanted, int64_t(fit)));
}

}  // namespace eq::profile
