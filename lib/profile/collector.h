// The streaming half of profiling: observes every MoE block (as a
// model::MoeObserver during a forward pass, or fed directly from captured
// router inputs / logits / a trace) and accumulates RoutingStats, the input
// samples for sensitivity, and optionally the routing trace.
//
// With inputs available it evaluates each routed expert itself (SwiGLU in
// float32 with Eigen), because it needs the intermediate activation h for the
// down projection's importance, not only the expert output.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/moe_observer.h"
#include "profile/expert_sampler.h"
#include "profile/routing_stats.h"

namespace eq::model {
class WeightStore;
}

namespace eq::profile {

class TraceWriter;

class ProfileCollector : public model::MoeObserver {
 public:
  // weights: source of expert weights (null: usage statistics only).
  // sample_capacity: rows kept per expert for sensitivity (0: none).
  ProfileCollector(const model::ModelConfig& config, const model::WeightStore* weights, bool has_probs,
                   int64_t sample_capacity, uint64_t seed, TraceWriter* trace = nullptr);

  void on_moe_block(const model::MoeObservation& obs) override;

  // One batch of `tokens` rows of layer `layer`. x [tokens, hidden] may be
  // null (no outputs/energies); logits [tokens, E] may be null (no router
  // probabilities); ids/gates [tokens, top_k] are the routing applied.
  void observe(int64_t layer, int64_t tokens, const float* x, const float* logits, const int32_t* ids,
               const float* gates);

  RoutingStats& stats() { return stats_; }
  const ExpertSampler& sampler() const { return sampler_; }
  int64_t layer_index(int64_t layer) const;

 private:
  const model::ModelConfig& config_;
  const model::WeightStore* weights_;
  RoutingStats stats_;
  ExpertSampler sampler_;
  TraceWriter* trace_;
};

// The MoE layer numbers of a model, ascending.
std::vector<int64_t> moe_layers(const model::ModelConfig& c);

}  // namespace eq::profile
