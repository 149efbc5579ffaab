#include "exec/packed_moe_block.h"

#include <cmath>

#include "core/thread_pool.h"
#include "model/mlp.h"
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
  dispatch_->run(work, scratch_);

  // Combine in slot order, as the reference does (independent of the strategy).
  default_pool().parallel_for(static_cast<size_t>(n), 64, [&](size_t t0, size_t t1) {
    for (size_t t = t0; t < t1; ++t) {
      float* o = out + t * H;
      std::fill(o, o + H, 0.0f);
      for (int64_t j = 0; j < K; ++j) {
        const float wj = routing.weights[t * K + j];
        const float* y = slot_out_.data() + (t * K + j) * H;
        for (int64_t i = 0; i < H; ++i) o[i] += wj * y[i];
      }
    }
  });

  model::FloatBuffer shared;
  if (c_.shared_expert_intermediate_size > 0) {
    const int64_t I = c_.shared_expert_intermediate_size;
    model::MlpWeights se;
    se.intermediate = I;
    se.gate = w_.get(model::shared_expert_name(c_, l, model::Proj::kGate), {I, H});
    se.up = w_.get(model::shared_expert_name(c_, l, model::Proj::kUp), {I, H});
    se.down = w_.get(model::shared_expert_name(c_, l, model::Proj::kDown), {H, I});
    const model::Tensor32Ptr se_gate = w_.get(model::shared_expert_gate_name(c_, l), {1, H});
    shared.resize(static_cast<size_t>(n * H));
    model::FloatBuffer gate_logit(static_cast<size_t>(n));
    model::mlp_forward(se, x, n, H, shared.data());
    model::linear(x, n, H, se_gate->data.data(), 1, nullptr, gate_logit.data());
    for (int64_t t = 0; t < n; ++t) {
      const float g = 1.0f / (1.0f + std::exp(-gate_logit[t]));
      for (int64_t i = 0; i < H; ++i) {
        shared[t * H + i] *= g;
        out[t * H + i] += shared[t * H + i];
      }
    }
  }

  if (call.observer) {
    model::MoeObservation obs;
    obs.layer = l;
    obs.tokens = n;
    obs.batch = call.batch;
    obs.seq_len = call.seq_len;
    obs.start_pos = call.start_pos;
    obs.hidden = H;
    obs.num_experts = E;
    obs.top_k = K;
    obs.input = x;
    obs.router_logits = logits.data();
    obs.expert_ids = routing.expert_ids.data();
    obs.gate_weights = routing.weights.data();
    obs.expert_outputs = call.observer->wants_expert_outputs() ? slot_out_.data() : nullptr;
    obs.shared_output = shared.empty() ? nullptr : shared.data();
    obs.output = out;
    call.observer->on_moe_block(obs);
  }
}

}  // namespace eq::exec
