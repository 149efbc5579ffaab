#include "model/moe_block.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/thread_pool.h"
#include "model/mlp.h"
#include "model/moe_combine.h"
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
  const LayerRouter router = load_router(c_, w_, layer);
  router_logits(c_, router, x, n, logits.data());
  const Routing routing = route_layer(c_, router, logits.data(), n);
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

  combine_slots(routing, slot_out.data(), n, K, H, out);  // slot order: independent of threads
  const FloatBuffer shared = add_shared_expert(c_, w_, layer, x, n, out);
  report_moe_block(call, c_, x, logits.data(), routing, slot_out.data(), shared, out);
}

}  // namespace eq::model
