#include "model/moe_combine.h"

#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"
#include "model/mlp.h"
#include "model/ops.h"

namespace eq::model {

void combine_slots(const Routing& routing, const float* slot_out, int64_t tokens, int64_t top_k, int64_t hidden,
                   float* out) {
  default_pool().parallel_for(static_cast<size_t>(tokens), 64, [&](size_t t0, size_t t1) {
    for (size_t t = t0; t < t1; ++t) {
      float* o = out + t * hidden;
      std::fill(o, o + hidden, 0.0f);
      for (int64_t j = 0; j < top_k; ++j) {
        const float wj = routing.weights[t * top_k + j];
        const float* y = slot_out + (t * top_k + j) * hidden;
        for (int64_t i = 0; i < hidden; ++i) o[i] += wj * y[i];
      }
    }
  });
}

FloatBuffer add_shared_expert(const ModelConfig& c, const WeightStore& w, int64_t layer, const float* x,
                              int64_t tokens, float* out) {
  FloatBuffer shared;
  if (c.shared_expert_intermediate_size == 0) return shared;
  const int64_t I = c.shared_expert_intermediate_size, H = c.hidden_size;
  MlpWeights se;
  se.intermediate = I;
  se.act = c.expert_activation;
  // A packed shared expert runs through its LinearOps (pack --shared-format).
  auto load = [&](Proj p, int64_t rows, int64_t cols, Tensor32Ptr& t, const LinearOp*& op) {
    const std::string name = shared_expert_name(c, layer, p);
    op = w.op(name);
    if (!op) t = w.get(name, {rows, cols});
  };
  load(Proj::kGate, I, H, se.gate, se.gate_op);
  load(Proj::kUp, I, H, se.up, se.up_op);
  load(Proj::kDown, H, I, se.down, se.down_op);
  shared.resize(static_cast<size_t>(tokens * H));
  mlp_forward(se, x, tokens, H, shared.data());
  FloatBuffer gate_logit;
  if (c.shared_expert_gated) {
    const Tensor32Ptr se_gate = w.get(shared_expert_gate_name(c, layer), {1, H});
    gate_logit.resize(static_cast<size_t>(tokens));
    linear(x, tokens, H, se_gate->data.data(), 1, nullptr, gate_logit.data());
  }
  for (int64_t t = 0; t < tokens; ++t) {
    const float g = c.shared_expert_gated ? 1.0f / (1.0f + std::exp(-gate_logit[t])) : 1.0f;
    for (int64_t i = 0; i < H; ++i) {
      shared[t * H + i] *= g;
      out[t * H + i] += shared[t * H + i];
    }
  }
  return shared;
}

void report_moe_block(const MoeCall& call, const ModelConfig& c, const float* x, const float* router_logits,
                      const Routing& routing, const float* slot_out, const FloatBuffer& shared, const float* out) {
  if (!call.observer) return;
  MoeObservation obs;
  obs.layer = call.layer;
  obs.tokens = call.batch * call.seq_len;
  obs.batch = call.batch;
  obs.seq_len = call.seq_len;
  obs.start_pos = call.start_pos;
  obs.hidden = c.hidden_size;
  obs.num_experts = c.num_experts;
  obs.top_k = c.top_k;
  obs.input = x;
  obs.router_logits = router_logits;
  obs.expert_ids = routing.expert_ids.data();
  obs.gate_weights = routing.weights.data();
  obs.expert_outputs = call.observer->wants_expert_outputs() ? slot_out : nullptr;
  obs.shared_output = shared.empty() ? nullptr : shared.data();
  obs.output = out;
  call.observer->on_moe_block(obs);
}

}  // namespace eq::model
