// The MoE block of one layer as a replaceable component: the forward pass
// calls MoeBlock::forward for every MoE layer, and a packed executor swaps in
// its own implementation per layer (Model::set_moe_block). ReferenceMoeBlock
// is the float32 reference:
//   logits = x · routerᵀ; p = softmax(logits) over all experts (float32);
//   top-k of p; renormalize the k weights when the arch does (routing.h);
//   out = Σ_j w_j · down_e(silu(gate_e x) ⊙ up_e x)   (summed in slot order j)
//       + g · shared_mlp(x)   (when the architecture has a shared expert;
//                              g = sigmoid(x · shared_gateᵀ) if gated, else 1).
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/moe_observer.h"
#include "model/routing.h"
#include "model/weights.h"

namespace eq::model {

struct MoeCall {
  int64_t layer = 0;
  int64_t batch = 0, seq_len = 0, start_pos = 0;  // rows = batch * seq_len
  MoeObserver* observer = nullptr;                // may be null
};

class MoeBlock {
 public:
  virtual ~MoeBlock() = default;
  // x: [rows, H] post-attention-normalized hidden states; out: [rows, H], the
  // block output before the residual add. Reports to call.observer if set.
  virtual void forward(const MoeCall& call, const float* x, float* out) = 0;
};

class ReferenceMoeBlock : public MoeBlock {
 public:
  // `allowed` [num_experts] (empty = all): experts with 0 are masked in the
  // router (route_tokens), the model a checkpoint with those experts removed
  // computes (lib/prune).
  ReferenceMoeBlock(const ModelConfig& c, const WeightStore& weights, std::vector<uint8_t> allowed = {});
  void forward(const MoeCall& call, const float* x, float* out) override;

 private:
  // logits [n, E] of the allowed experts (the others -inf).
  void masked_router_logits(const LayerRouter& r, const float* x, int64_t n, float* logits) const;

  const ModelConfig& c_;
  const WeightStore& w_;
  std::vector<uint8_t> allowed_;
};

}  // namespace eq::model
