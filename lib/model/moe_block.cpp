#include "model/moe_block.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/thread_pool.h"
#include "model/mlp.h"
#include "model/ops.h"
#include "model/routing.h"

namespace eq::model {
namespace {

// Rows of one expert per matmul call (bounds the gather buffers; the split
// depends only on the row count).
constexpr int64_t kExpertRowChunk = 128;

}  // namespace

void ReferenceMoeBlock::forward(const MoeCall& call, const float* x, float* out) {
  const int64_t n = call.batch * call.seq_len, H = c_.hidden_size, E = c_.num_experts, K = c_.top_k;
  const int64_t layer = call.layer;

  FloatBuffer logits(n * E);
  Tensor32Ptr router = w_.get(router_name(c_, layer), {E, H});
  linear(x, n, H, router->data.data(), E, nullptr, logits.data());
  const Routing routing = route_tokens(logits.data(), n, E, K, renormalizes_top_k(c_));
  const ExpertGroups groups = group_by_expert(routing, E);

  // One task per used expert: it converts that expert's weights (unless the
  // store caches them) and runs its rows in chunks, so conversion is parallel
  // too and at most one expert per thread is alive in float32.
  std::vector<int64_t> used;
  for (int64_t e = 0; e < E; ++e)
    if (groups.offsets[e + 1] > groups.offsets[e]) used.push_back(e);
  FloatBuffer slot_out(n * K * H);  // each slot's unweighted expert output
  default_pool().run(used.size(), [&](size_t i) {
    const int64_t e = used[i];
    const MlpWeights ew = load_expert(w_, c_, layer, e);
    FloatBuffer xin, y, scratch;
    for (int64_t b = groups.offsets[e]; b < groups.offsets[e + 1]; b += kExpertRowChunk) {
      const int64_t rows = std::min(kExpertRowChunk, groups.offsets[e + 1] - b);
      xin.resize(rows * H);
      y.resize(rows * H);
      for (int64_t r = 0; r < rows; ++r)
        std::memcpy(xin.data() + r * H, x + (groups.slots[b + r] / K) * H, H * sizeof(float));
      mlp_forward_serial(ew, xin.data(), rows, H, y.data(), scratch);
      for (int64_t r = 0; r < rows; ++r)
        std::memcpy(slot_out.data() + groups.slots[b + r] * H, y.data() + r * H, H * sizeof(float));
    }
  });

  // Combine in slot order (independent of which thread ran which expert).
  default_pool().parallel_for(static_cast<size_t>(n), 64, [&](size_t t0, size_t t1) {
    for (size_t t = t0; t < t1; ++t) {
      float* o = out + t * H;
      std::fill(o, o + H, 0.0f);
      for (int64_t j = 0; j < K; ++j) {
        const float wj = routing.weights[t * K + j];
        const float* y = slot_out.data() + (t * K + j) * H;
        for (int64_t i = 0; i < H; ++i) o[i] += wj * y[i];
      }
    }
  });

  FloatBuffer shared;
  if (c_.shared_expert_intermediate_size > 0) {
    const int64_t I = c_.shared_expert_intermediate_size;
    MlpWeights se;
    se.intermediate = I;
    se.gate = w_.get(shared_expert_name(c_, layer, Proj::kGate), {I, H});
    se.up = w_.get(shared_expert_name(c_, layer, Proj::kUp), {I, H});
    se.down = w_.get(shared_expert_name(c_, layer, Proj::kDown), {H, I});
    const Tensor32Ptr se_gate = w_.get(shared_expert_gate_name(c_, layer), {1, H});
    shared.resize(n * H);
    FloatBuffer gate_logit(n);
    mlp_forward(se, x, n, H, shared.data());
    linear(x, n, H, se_gate->data.data(), 1, nullptr, gate_logit.data());
    for (int64_t t = 0; t < n; ++t) {
      const float g = 1.0f / (1.0f + std::exp(-gate_logit[t]));
      for (int64_t i = 0; i < H; ++i) {
        shared[t * H + i] *= g;
        out[t * H + i] += shared[t * H + i];
      }
    }
  }

  if (call.observer) {
    MoeObservation obs;
    obs.layer = layer;
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
    obs.expert_outputs = call.observer->wants_expert_outputs() ? slot_out.data() : nullptr;
    obs.shared_output = shared.empty() ? nullptr : shared.data();
    obs.output = out;
    call.observer->on_moe_block(obs);
  }
}

}  // namespace eq::model
