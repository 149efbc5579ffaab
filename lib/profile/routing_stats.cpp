#include "profile/routing_stats.h"

#include <algorithm>

#include "core/error.h"

namespace eq::profile {

void ExpertStats::merge(const ExpertStats& o) {
  tokens += o.tokens;
  gate_sum += o.gate_sum;
  gate_max = std::max(gate_max, o.gate_max);
  prob_sum += o.prob_sum;
  saliency_sum += o.saliency_sum;
  out_norm_sum += o.out_norm_sum;
  gated_out_energy += o.gated_out_energy;
  if (energy_in.size() < o.energy_in.size()) energy_in.resize(o.energy_in.size(), 0.0);
  if (energy_mid.size() < o.energy_mid.size()) energy_mid.resize(o.energy_mid.size(), 0.0);
  for (size_t i = 0; i < o.energy_in.size(); ++i) energy_in[i] += o.energy_in[i];
  for (size_t i = 0; i < o.energy_mid.size(); ++i) energy_mid[i] += o.energy_mid[i];
}

double LayerStats::share(int64_t e, int64_t top_k) const {
  const int64_t slots = routed_slots(top_k);
  return slots ? double(experts[e].tokens) / double(slots) : 0.0;
}

RoutingStats RoutingStats::make(const std::vector<int64_t>& moe_layers, int64_t hidden, int64_t intermediate,
                                int64_t num_experts, int64_t top_k, bool has_probs, bool has_outputs) {
  RoutingStats s;
  s.hidden = hidden;
  s.intermediate = intermediate;
  s.num_experts = num_experts;
  s.top_k = top_k;
  s.has_probs = has_probs;
  s.has_outputs = has_outputs;
  for (int64_t l : moe_layers) {
    LayerStats ls;
    ls.layer = l;
    ls.experts.resize(num_experts);
    if (has_outputs)
      for (auto& e : ls.experts) {
        e.energy_in.assign(hidden, 0.0);
        e.energy_mid.assign(intermediate, 0.0);
      }
    s.layers.push_back(std::move(ls));
  }
  return s;
}

LayerStats& RoutingStats::layer(int64_t layer) {
  for (auto& l : layers)
    if (l.layer == layer) return l;
  invalid("routing statistics: layer " + std::to_string(layer) + " is not a profiled MoE layer");
}

const LayerStats& RoutingStats::layer(int64_t layer) const {
  return const_cast<RoutingStats*>(this)->layer(layer);
}

void RoutingStats::merge(const RoutingStats& o, const std::string& label) {
  if (o.hidden != hidden || o.intermediate != intermediate || o.num_experts != num_experts || o.top_k != top_k)
    invalid(label + ": model dimensions differ (hidden, moe_intermediate, num_experts, top_k)");
  if (o.layers.size() != layers.size()) invalid(label + ": field 'layers': different MoE layers");
  if (o.has_probs != has_probs || o.has_outputs != has_outputs)
    invalid(label + ": profiles from different kinds of source (router probabilities / expert outputs) do not merge");
  for (size_t i = 0; i < layers.size(); ++i) {
    LayerStats& a = layers[i];
    const LayerStats& b = o.layers[i];
    if (a.layer != b.layer || a.experts.size() != b.experts.size())
      invalid(label + ": field 'layers[" + std::to_string(i) + "]': layer or expert count differs");
    a.tokens += b.tokens;
    a.routed_output_energy += b.routed_output_energy;
    for (size_t e = 0; e < a.experts.size(); ++e) a.experts[e].merge(b.experts[e]);
  }
}

}  // namespace eq::profile
