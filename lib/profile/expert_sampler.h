// Bounded samples of expert inputs for sensitivity measurement: a reservoir
// (Algorithm R, splitmix64 seeded per layer and expert) of at most `capacity`
// routed input rows per expert, plus one per layer over all tokens (the
// fallback for experts routed too rarely: calibration tokens forced through
// the expert). Offers arrive in token order, so the sample depends only on
// the calibration data and the seed, never on the thread count.
#pragma once

#include <cstdint>
#include <vector>

namespace eq::profile {

struct InputSample {
  int64_t seen = 0;          // rows offered
  int64_t rows = 0;          // rows kept (<= capacity)
  std::vector<float> x;      // [rows, hidden]
  std::vector<float> gate;   // [rows] gate weight of each kept row (1 for the layer sample)
  uint64_t rng = 0;
};

class ExpertSampler {
 public:
  ExpertSampler() = default;
  ExpertSampler(int64_t num_layers, int64_t num_experts, int64_t hidden, int64_t capacity, uint64_t seed);

  int64_t capacity() const { return capacity_; }
  // Thread-safe for distinct (layer_index, expert) pairs.
  void offer_expert(int64_t layer_index, int64_t expert, const float* x, float gate);
  void offer_layer(int64_t layer_index, const float* x);

  const InputSample& expert(int64_t layer_index, int64_t expert) const {
    return experts_[layer_index * num_experts_ + expert];
  }
  const InputSample& layer(int64_t layer_index) const { return layers_[layer_index]; }
  bool empty() const { return capacity_ == 0; }

 private:
  void offer(InputSample& s, const float* x, float gate);
  int64_t num_experts_ = 0, hidden_ = 0, capacity_ = 0;
  std::vector<InputSample> experts_, layers_;
};

// Per-expert capacity: `wanted` rows, reduced so that all experts' samples fit
// in `memory_budget` bytes (float32 rows); at least 1 when wanted > 0.
int64_t sample_capacity(int64_t wanted, uint64_t memory_budget, int64_t num_layers, int64_t num_experts,
                        int64_t hidden);

}  // namespace eq::profile
