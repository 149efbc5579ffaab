// Observation hooks on MoE blocks: what profile (routing statistics, REAP
// saliency, activation energy) and eval (per-layer error) are built on.
// A block reports once per forward call, on the calling thread, after its
// output is complete. With no observer installed nothing extra is computed.
#pragma once

#include <cstdint>

namespace eq::model {

struct MoeObservation {
  int64_t layer = 0;
  int64_t tokens = 0;       // rows; row r is sequence r / seq_len at position start_pos + r % seq_len
  int64_t batch = 0, seq_len = 0, start_pos = 0;
  int64_t hidden = 0, num_experts = 0, top_k = 0;
  const float* input = nullptr;          // [tokens, hidden] block input (after post_attention_layernorm)
  const float* router_logits = nullptr;  // [tokens, num_experts] router linear output, before softmax
  const int32_t* expert_ids = nullptr;   // [tokens, top_k] chosen experts, by decreasing probability
  const float* gate_weights = nullptr;   // [tokens, top_k] weights applied (renormalized when the arch does)
  // [tokens, top_k, hidden] each chosen expert's own output (before its gate
  // weight); only when the observer wants_expert_outputs(), else null.
  const float* expert_outputs = nullptr;
  const float* shared_output = nullptr;  // [tokens, hidden] (gated) shared expert output, else null
  const float* output = nullptr;         // [tokens, hidden] block output, before the residual add
};

class MoeObserver {
 public:
  virtual ~MoeObserver() = default;
  virtual bool wants_expert_outputs() const { return false; }
  virtual void on_moe_block(const MoeObservation& obs) = 0;
};

}  // namespace eq::model
