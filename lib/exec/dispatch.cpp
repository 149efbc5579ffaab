#include "exec/dispatch.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "exec/expert_mlp.h"

namespace eq::exec {
namespace {

// Counting sort of flat expert ids: order[i] is the i-th pair when pairs are
// grouped by expert (token order within an expert); offsets[e]..offsets[e+1]
// are expert e's rows.
void sort_by_expert(const int32_t* ids, int64_t pairs, int64_t num_experts, std::vector<int64_t>& order,
                    std::vector<int64_t>& offsets) {
  offsets.assign(static_cast<size_t>(num_experts + 1), 0);
  for (int64_t s = 0; s < pairs; ++s) ++offsets[static_cast<size_t>(ids[s]) + 1];
  for (int64_t e = 0; e < num_experts; ++e) offsets[e + 1] += offsets[e];
  order.resize(static_cast<size_t>(pairs));
  std::vector<int64_t> next(offsets.begin(), offsets.end() - 1);
  for (int64_t s = 0; s < pairs; ++s) order[static_cast<size_t>(next[static_cast<size_t>(ids[s])]++)] = s;
}

// The grouped matmul shared by sorted and mask-combine: sort pairs by
// `ids`, gather their token rows, run one batch per expert, scatter each row
// back to its pair's slot of `out` (out[order[i]] = rows_out[i], i.e. via the
// inverse permutation).
void grouped_matmul(const MoeWork& w, const int32_t* ids, float* out, DispatchScratch& s) {
  const int64_t pairs = w.tokens * w.top_k, H = w.hidden, E = w.layer->num_experts;
  sort_by_expert(ids, pairs, E, s.order, s.offsets);
  s.rows_in.resize(static_cast<size_t>(pairs * H));
  s.rows_out.resize(static_cast<size_t>(pairs * H));
  for (int64_t i = 0; i < pairs; ++i)
    std::memcpy(s.rows_in.data() + i * H, w.x + (s.order[i] / w.top_k) * H, H * sizeof(float));
  std::vector<ExpertBatch> batches;
  for (int64_t e = 0; e < E; ++e) {
    const int64_t b = s.offsets[e], end = s.offsets[e + 1];
    if (b == end) continue;
    const int32_t id = static_cast<int32_t>(e);
    batches.push_back({&w.layer->expert(id), &w.layer->format_of(id), s.rows_in.data() + b * H,
                       s.rows_out.data() + b * H, end - b});
  }
  run_expert_batches(batches, w.kernel, batch_options_for(w.tokens, w.top_k, w.layer->num_experts));
  for (int64_t i = 0; i < pairs; ++i)
    std::memcpy(out + s.order[i] * H, s.rows_out.data() + i * H, H * sizeof(float));
}

}  // namespace

void run_sorted(const MoeWork& work, DispatchScratch& scratch) {
  grouped_matmul(work, work.expert_ids, work.slot_out, scratch);
}

void run_per_token(const MoeWork& work) {
  const int64_t pairs = work.tokens * work.top_k, H = work.hidden;
  std::vector<ExpertBatch> batches(static_cast<size_t>(pairs));
  for (int64_t s = 0; s < pairs; ++s) {
    const int32_t id = work.expert_ids[s];
    batches[static_cast<size_t>(s)] = {&work.layer->expert(id), &work.layer->format_of(id),
                                       work.x + (s / work.top_k) * H, work.slot_out + s * H, 1};
  }
  run_expert_batches(batches, work.kernel, batch_options_for(work.tokens, work.top_k, work.layer->num_experts));
}

void SortedDispatch::run(const MoeWork& work, DispatchScratch& scratch) const { run_sorted(work, scratch); }

void AutoDispatch::run(const MoeWork& work, DispatchScratch& scratch) const {
  if (sorts(work.tokens))
    run_sorted(work, scratch);
  else
    run_per_token(work);
}

void MaskCombineDispatch::run(const MoeWork& work, DispatchScratch& scratch) const {
  const int64_t pairs = work.tokens * work.top_k, H = work.hidden;
  const PackedLayer& layer = *work.layer;
  std::fill(work.slot_out, work.slot_out + pairs * H, 0.0f);
  scratch.remapped.resize(static_cast<size_t>(pairs));
  scratch.group_out.resize(static_cast<size_t>(pairs * H));
  std::vector<float> mask(static_cast<size_t>(pairs));
  for (const BitGroup& g : layer.groups) {
    if (g.expert_ids.empty()) continue;
    const int32_t fallback = static_cast<int32_t>(g.expert_ids.front());
    for (int64_t s = 0; s < pairs; ++s) {
      const int32_t id = work.expert_ids[s];
      const bool member = layer.experts[static_cast<size_t>(id)].group == g.id;
      mask[static_cast<size_t>(s)] = member ? 1.0f : 0.0f;
      scratch.remapped[static_cast<size_t>(s)] = member ? id : fallback;
    }
    // Every pair through this group's experts, whether it belongs or not.
    grouped_matmul(work, scratch.remapped.data(), scratch.group_out.data(), scratch);
    // out += group_out × mask: members get their exact value (x + 0 = x),
    // non-members add an exact zero.
    for (int64_t s = 0; s < pairs; ++s) {
      const float m = mask[static_cast<size_t>(s)];
      const float* src = scratch.group_out.data() + s * H;
      float* dst = work.slot_out + s * H;
      for (int64_t i = 0; i < H; ++i) dst[i] += src[i] * m;
    }
  }
}

std::optional<DispatchKind> parse_dispatch_kind(std::string_view name) {
  if (name == "mask-combine") return DispatchKind::kMaskCombine;
  if (name == "sorted") return DispatchKind::kSorted;
  if (name == "auto") return DispatchKind::kAuto;
  return std::nullopt;
}

std::vector<DispatchKind> parse_dispatch_option(const std::string& value, bool list) {
  std::vector<DispatchKind> out;
  size_t i = 0;
  while (i <= value.size()) {
    const size_t j = list ? std::min(value.find(',', i), value.size()) : value.size();
    const std::string name = value.substr(i, j - i);
    const auto kind = parse_dispatch_kind(name);
    if (!kind) invalid("--dispatch: unknown strategy '" + name + "' (mask-combine, sorted, auto)");
    out.push_back(*kind);
    i = j + 1;
  }
  return out;
}

std::string_view dispatch_kind_name(DispatchKind kind) {
  switch (kind) {
    case DispatchKind::kMaskCombine: return "mask-combine";
    case DispatchKind::kSorted: return "sorted";
    case DispatchKind::kAuto: return "auto";
  }
  return "?";
}

std::unique_ptr<Dispatch> make_dispatch(DispatchKind kind, int64_t sort_cutoff) {
  switch (kind) {
    case DispatchKind::kMaskCombine: return std::make_unique<MaskCombineDispatch>();
    case DispatchKind::kSorted: return std::make_unique<SortedDispatch>();
    case DispatchKind::kAuto:
      if (sort_cutoff < 0) invalid("sort_cutoff " + std::to_string(sort_cutoff) + " must be >= 0");
      return std::make_unique<AutoDispatch>(sort_cutoff);
  }
  EQ_CHECK(false, "unknown dispatch kind");
}

}  // namespace eq::exec
