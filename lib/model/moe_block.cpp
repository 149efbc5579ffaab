#include "model/moe_block.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/error.h"
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

ReferenceMoeBlock::ReferenceMoeBlock(const ModelConfig& c, const WeightStore& weights, std::vector<uint8_t> allowed)
    : c_(c), w_(weights), allowed_(std::move(allowed)) {
  if (!allowed_.empty() && static_cast<int64_t>(allowed_.size()) != c_.num_experts)
    invalid("MoE block: an expert mask of " + std::to_string(allowed_.size()) + " entries for " +
            std::to_string(c_.num_experts) + " experts");
}

void ReferenceMoeBlock::masked_router_logits(const LayerRouter& r, const float* x, int64_t n, float* logits) const {
  // Only the allowed experts' rows are multiplied: the matrix product rounds
  // a column differently depending on how many columns it computes, and a
  // checkpoint holding only these experts computes exactly these columns.
  const int64_t E = c_.num_experts, H = c_.hidden_size;
  std::vector<int64_t> ids;
  for (int64_t e = 0; e < E; ++e)
    if (allowed_[static_cast<size_t>(e)]) ids.push_back(e);
  const int64_t k = static_cast<int64_t>(ids.size());
  std::vector<float> w(static_cast<size_t>(k * H)), bias;
  for (int64_t i = 0; i < k; ++i)
    std::memcpy(w.data() + i * H, r.weight->data.data() + ids[static_cast<size_t>(i)] * H, H * sizeof(float));
  if (r.bias)
    for (int64_t e : ids) bias.push_back(r.bias->data[static_cast<size_t>(e)]);
  FloatBuffer part(n * k);
  linear(x, n, H, w.data(), k, bias.empty() ? nullptr : bias.data(), part.data());
  for (int64_t t = 0; t < n; ++t) {
    float* row = logits + t * E;
    std::fill(row, row + E, -std::numeric_limits<float>::infinity());
    for (int64_t i = 0; i < k; ++i) row[ids[static_cast<size_t>(i)]] = part[static_cast<size_t>(t * k + i)];
  }
}

void ReferenceMoeBlock::forward(const MoeCall& call, const float* x, float* out) {
  const int64_t n = call.batch * call.seq_len, H = c_.hidden_size, E = c_.num_experts, K = c_.top_k;
  const int64_t layer = call.layer;

  FloatBuffer logits(n * E);
  const LayerRouter router = load_router(c_, w_, layer);
  if (allowed_.empty())
    router_logits(c_, router, x, n, logits.data());
  else
    masked_router_logits(router, x, n, logits.data());
  const Routing routing = route_layer(c_, router, logits.data(), n, allowed_.empty() ? nullptr : allowed_.data());
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
