#include "exec/packed_moe_block.h"

#include <cmath>

#include "core/thread_pool.h"
#include "model/mlp.h"
#include "model/moe_combine.h"
#include "model/ops.h"

namespace eq::exec {

model::Routing route_survivors(const model::ModelConfig& c, const PackedLayer& layer, const float* logits,
                               int64_t tokens) {
  const int64_t E = c.num_experts;
  const bool renorm = model::renormalizes_top_k(c);
  if (!layer.any_pruned()) return model::route_tokens(logits, tokens, E, c.top_k, renorm);
  // Compacting the logits to the survivors is exactly a softmax with pruned
  // logits at -inf, and keeps the lower-id-first tie rule (survivors ascend).
  const int64_t S = static_cast<int64_t>(layer.survivors.size());
  model::FloatBuffer compact(static_cast<size_t>(tokens * S));
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t i = 0; i < S; ++i) compact[t * S + i] = logits[t * E + layer.survivors[i]];
  model::Routing r = model::route_tokens(compact.data(), tokens, S, c.top_k, renorm);
  for (int32_t& id : r.expert_ids) id = layer.survivors[static_cast<size_t>(id)];
  return r;
}

PackedMoeBlock::PackedMoeBlock(const model::ModelConfig& c, const model::WeightStore& weights,
                               const PackedLayer& layer, std::shared_ptr<const Dispatch> dispatch)
    : c_(c), w_(weights), layer_(layer), dispatch_(std::move(dispatch)) {}

void PackedMoeBlock::forward(const model::MoeCall& call, const float* x, float* out) {
  const int64_t n = call.batch * call.seq_len, H = c_.hidden_size, E = c_.num_experts, K = c_.top_k;
  const int64_t l = call.layer;

  model::FloatBuffer logits(static_cast<size_t>(n * E));
  const model::Tensor32Ptr router = w_.get(model::router_name(c_, l), {E, H});
  model::linear(x, n, H, router->data.data(), E, nullptr, logits.data());
  const model::Routing routing = route_survivors(c_, layer_, logits.data(), n);

  slot_out_.resize(static_cast<size_t>(n * K * H));
  MoeWork work{&layer_, x, n, H, K, routing.expert_ids.data(), slot_out_.data()};
  work.kernel = select_mlp_kernel(n, thresholds_);
  dispatch_->run(work, scratch_);

  // Combine, shared expert and observer exactly as the reference block does.
  model::combine_slots(routing, slot_out_.data(), n, K, H, out);
  const model::FloatBuffer shared = model::add_shared_expert(c_, w_, l, x, n, out);
  model::report_moe_block(call, c_, x, logits.data(), routing, slot_out_.data(), shared, out);
}

}  // namespace eq::exec
