#include "exec/dispatch_cost.h"

#include <vector>

namespace eq::exec {
namespace {

uint64_t matrix_bytes(const quant::PackedMatrix& m) {
  uint64_t b = 0;
  for (const quant::PartView& p : m.parts) b += p.nbytes;
  return b;
}

}  // namespace

uint64_t expert_bytes(const ExpertWeights& w) { return matrix_bytes(w.gate) + matrix_bytes(w.up) + matrix_bytes(w.down); }

BytesRead estimate_bytes_read(const Dispatch& dispatch, const PackedLayer& layer, const int32_t* expert_ids,
                              int64_t tokens, int64_t top_k, int64_t hidden) {
  const int64_t pairs = tokens * top_k;
  const uint64_t row = static_cast<uint64_t>(hidden) * sizeof(float);
  BytesRead b;
  auto distinct_weights = [&](auto&& id_of) {
    std::vector<char> seen(static_cast<size_t>(layer.num_experts), 0);
    uint64_t w = 0;
    for (int64_t s = 0; s < pairs; ++s) {
      const int32_t e = id_of(s);
      if (seen[static_cast<size_t>(e)]) continue;
      seen[static_cast<size_t>(e)] = 1;
      w += expert_bytes(layer.expert(e));
    }
    return w;
  };
  bool sorted = dispatch.kind() == DispatchKind::kSorted;
  if (dispatch.kind() == DispatchKind::kAuto) sorted = dispatch.sorts(tokens);
  if (dispatch.kind() == DispatchKind::kMaskCombine) {
    for (const BitGroup& g : layer.groups) {
      if (g.expert_ids.empty()) continue;
      const int32_t fallback = static_cast<int32_t>(g.expert_ids.front());
      b.weights += distinct_weights([&](int64_t s) {
        const int32_t e = expert_ids[s];
        return layer.experts[static_cast<size_t>(e)].group == g.id ? e : fallback;
      });
      b.activations += static_cast<uint64_t>(pairs) * row * (4 + 3);
    }
  } else if (sorted) {
    b.weights = distinct_weights([&](int64_t s) { return expert_ids[s]; });
    b.activations = static_cast<uint64_t>(pairs) * row * 4;
  } else {
    for (int64_t s = 0; s < pairs; ++s) b.weights += expert_bytes(layer.expert(expert_ids[s]));
    b.activations = static_cast<uint64_t>(pairs) * row * 2;
  }
  return b;
}

}  // namespace eq::exec
