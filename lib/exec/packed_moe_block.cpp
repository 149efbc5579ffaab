#include "exec/packed_moe_block.h"

#include <cmath>

#include "core/thread_pool.h"
#include "model/mlp.h"
#include "model/moe_combine.h"
#include "model/ops.h"

namespace eq::exec {

model::Routing route_survivors(const model::ModelConfig& c, const model::LayerRouter& router,
                               const PackedLayer& layer, const float* logits, int64_t tokens) {
  if (!layer.any_pruned()) return model::route_layer(c, router, logits, tokens);
  // Pruned experts are never chosen; a softmax router spreads all mass over
  // the survivors (as if the pruned logits were -inf).
  std::vector<uint8_t> allowed(static_cast<size_t>(c.num_experts), 0);
  for (int32_t e : layer.survivors) allowed[static_cast<size_t>(e)] = 1;
  return model::route_layer(c, router, logits, tokens, allowed.data());
}

PackedMoeBlock::PackedMoeBlock(const model::ModelConfig& c, const model::WeightStore& weights,
                               const PackedLayer& layer, std::shared_ptr<const Dispatch> dispatch)
    : c_(c), w_(weights), layer_(layer), dispatch_(std::move(dispatch)) {}

void PackedMoeBlock::forward(const model::MoeCall& call, const float* x, float* out) {
  const int64_t n = call.batch * call.seq_len, H = c_.hidden_size, E = c_.num_experts, K = c_.top_k;
  const int64_t l = call.layer;

  model::FloatBuffer logits(static_cast<size_t>(n * E));
  const model::LayerRouter router = model::load_router(c_, w_, l);
  model::router_logits(c_, router, x, n, logits.data());
  const model::Routing routing = route_survivors(c_, router, layer_, logits.data(), n);

  slot_out_.resize(static_cast<size_t>(n * K * H));
  MoeWork work{&layer_, x, n, H, K, routing.expert_ids.data(), slot_out_.data()};
  work.kernel = select_mlp_kernel(n, thresholds_);
  dispatch_->run(work, scratch_);

  // Combine, shared expert and observer exactly as the reference block does.
  model::combine_slots(routing, slot_out_.data(), n, K, H, out);
  const model::FloatBuffer shared = model::add_shared_expert(c_, w_, l, x, n, out);
  model::report_moe_block(call, c_, x, logits.data(), routing, slot_out_.data(), shared, out);
  // Every layer has its own block: buffers kept after a prefill of thousands
  // of tokens (268 MB a layer for 4,096 tokens of a 2,048-wide top-8 model)
  // would add up over the layers. Decode-sized calls keep theirs for reuse.
  if (n > kKeptBufferTokens) {
    model::FloatBuffer().swap(slot_out_);
    scratch_ = DispatchScratch();
  }
}

}  // namespace eq::exec
