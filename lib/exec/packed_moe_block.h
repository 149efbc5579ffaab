// model::MoeBlock over packed experts: the router in float32 (the same math as
// the reference, restricted to the experts that were not pruned), a Dispatch
// strategy for the routed experts, the gate-weighted combine in slot order,
// and the shared expert from the unquantized weights.
#pragma once

#include <memory>
#include <vector>

#include "exec/bit_group.h"
#include "exec/dispatch.h"
#include "model/config.h"
#include "model/float_buffer.h"
#include "model/moe_block.h"
#include "model/routing.h"
#include "model/weights.h"

namespace eq::exec {

// The layer's router over the survivors only: a pruned expert is never
// chosen (a softmax router gives it probability exactly 0 and the rest
// renormalize).
model::Routing route_survivors(const model::ModelConfig& c, const model::LayerRouter& router,
                               const PackedLayer& layer, const float* logits, int64_t tokens);

class PackedMoeBlock : public model::MoeBlock {
 public:
  // `layer` and `weights` must outlive the block. The dispatch is shared
  // (strategies are stateless).
  PackedMoeBlock(const model::ModelConfig& c, const model::WeightStore& weights, const PackedLayer& layer,
                 std::shared_ptr<const Dispatch> dispatch);
  void forward(const model::MoeCall& call, const float* x, float* out) override;

  void set_dispatch(std::shared_ptr<const Dispatch> dispatch) { dispatch_ = std::move(dispatch); }
  const Dispatch& dispatch() const { return *dispatch_; }
  void set_mlp_kernel_thresholds(const MlpKernelThresholds& t) { thresholds_ = t; }
  const PackedLayer& layer() const { return layer_; }

 private:
  // Calls of up to this many tokens keep their buffers for the next call.
  static constexpr int64_t kKeptBufferTokens = 64;
  const model::ModelConfig& c_;
  const model::WeightStore& w_;
  const PackedLayer& layer_;
  std::shared_ptr<const Dispatch> dispatch_;
  MlpKernelThresholds thresholds_;
  DispatchScratch scratch_;
  model::FloatBuffer slot_out_;
};

}  // namespace eq::exec
