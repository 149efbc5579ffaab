// Per layer × expert statistics of one calibration pass, accumulated in
// float64. Each expert's sums are added in token order by one task, so a run
// is bit-identical for any thread count; two RoutingStats of disjoint
// calibration slices merge by addition (equal to one run over both up to
// float64 rounding), which is what `expertquant profile --merge` relies on.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace eq::profile {

struct ExpertStats {
  int64_t tokens = 0;             // tokens whose top-k contains the expert
  double gate_sum = 0;            // Σ gate weight (after renormalization when the arch does)
  double gate_max = 0;            // max gate weight
  double prob_sum = 0;            // Σ router probability (softmax, before top-k) over all tokens of the layer
  double saliency_sum = 0;        // Σ gate · ‖expert output‖₂   (REAP numerator)
  double out_norm_sum = 0;        // Σ ‖expert output‖₂
  double gated_out_energy = 0;    // Σ gate² · ‖expert output‖₂², the expert's share of the block output energy
  std::vector<double> energy_in;  // [hidden] Σ x² of the expert's input (gate/up importance)
  std::vector<double> energy_mid; // [intermediate] Σ h² of silu(gate x)·up x (down importance)

  double mean_gate() const { return tokens ? gate_sum / double(tokens) : 0.0; }
  double reap() const { return tokens ? saliency_sum / double(tokens) : 0.0; }
  double mean_out_norm() const { return tokens ? out_norm_sum / double(tokens) : 0.0; }
  void merge(const ExpertStats& o);
};

struct LayerStats {
  int64_t layer = 0;
  int64_t tokens = 0;                  // tokens seen by the layer
  double routed_output_energy = 0;     // Σ_t ‖Σ_j gate_j · y_j‖² (routed experts only)
  std::vector<ExpertStats> experts;    // index = expert id

  int64_t routed_slots(int64_t top_k) const { return tokens * top_k; }
  // Fraction of the layer's routed slots that went to expert e.
  double share(int64_t e, int64_t top_k) const;
};

struct RoutingStats {
  int64_t hidden = 0, intermediate = 0, num_experts = 0, top_k = 0;
  // What the source could measure: router probabilities (needs logits), expert
  // outputs and activation energies (needs the expert inputs).
  bool has_probs = false, has_outputs = false;
  std::vector<LayerStats> layers;  // MoE layers, ascending

  // Sized for the given MoE layers; energies allocated only when has_outputs.
  static RoutingStats make(const std::vector<int64_t>& moe_layers, int64_t hidden, int64_t intermediate,
                           int64_t num_experts, int64_t top_k, bool has_probs, bool has_outputs);
  LayerStats& layer(int64_t layer);  // throws eq::Error when absent
  const LayerStats& layer(int64_t layer) const;
  // Adds `o` (same dims and layers; throws eq::Error naming `label` otherwise).
  void merge(const RoutingStats& o, const std::string& label);
};

}  // namespace eq::profile
