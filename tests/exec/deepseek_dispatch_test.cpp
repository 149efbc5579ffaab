// The dispatch strategies on a deepseek_v3 pack (../shared/models/deepseek_v3-small:
// grouped sigmoid router with a correction bias, a shared expert, a dense
// first layer) with four formats and pruned experts per MoE layer: mask-combine,
// sorted and auto compute the same function, as they do for qwen3_moe; and the
// packed router removes a pruned expert before group selection (checked
// against the rule written out in float64 on the pack's own router logits).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "exec/dispatch.h"
#include "exec/packed_model.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "model/generate.h"
#include "packed_fixture.h"

namespace eq::exec {
namespace {

std::string deepseek_small() { return (test::shared_dir() / "models" / "deepseek_v3-small").string(); }

std::unique_ptr<PackedModel> open_mixed_pack() {
  const auto dir = test::temp_dir("deepseek_dispatch");
  pack::PackRequest rq;
  rq.model_path = deepseek_small();
  rq.out_path = (dir / "packed").string();
  rq.allocation_path = (dir / "allocation.json").string();
  io::write_file_atomic(rq.allocation_path, test::mixed_allocation(model::load_config(rq.model_path), {"int8_row", "fp4_g16", "trellis2", "nvfp4"},
                                                    {"critical", "standard", "deprioritized", "standard"})
                                 .dump(1));
  set_num_threads(1);  // trellis quantization runs inside the packer's pool tasks (as in pack_once)
  pack::run_pack(rq);
  set_num_threads(0);
  return PackedModel::open(rq.out_path, test::open_options(false, deepseek_small()));
}

std::vector<std::shared_ptr<const Dispatch>> all_strategies() {
  return {make_dispatch(DispatchKind::kMaskCombine, 0), make_dispatch(DispatchKind::kSorted, 0),
          make_dispatch(DispatchKind::kAuto, 0), make_dispatch(DispatchKind::kAuto, 1),
          make_dispatch(DispatchKind::kAuto, 64)};
}

std::string label(const Dispatch& d) {
  if (d.kind() == DispatchKind::kAuto)
    return d.name() + "(cutoff " + std::to_string(static_cast<const AutoDispatch&>(d).sort_cutoff()) + ")";
  return d.name();
}

// Prefill of 2 x 48 tokens, then 4 decode steps of one token per sequence.
model::FloatBuffer run_logits(PackedModel& pm) {
  model::Model& m = pm.model();
  const std::vector<int32_t> text = test::corpus_tokens("c", 200);
  std::vector<int32_t> prompt(text.begin(), text.begin() + 96);
  model::KvCache cache = m.new_cache(2, 64);
  model::FloatBuffer all = m.forward(prompt, 2, 48, cache);
  for (int step = 0; step < 4; ++step) {
    std::vector<int32_t> next = {text[100 + step], text[150 + step]};
    const auto l = m.forward(next, 2, 1, cache);
    all.insert(all.end(), l.begin(), l.end());
  }
  return all;
}

// max |a - b| / max |b|
double rel_diff(const model::FloatBuffer& a, const model::FloatBuffer& b) {
  double d = 0, m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, std::fabs(static_cast<double>(a[i]) - b[i]));
    m = std::max(m, std::fabs(static_cast<double>(b[i])));
  }
  return m > 0 ? d / m : d;
}

TEST(DeepseekDispatch, StrategiesProduceTheSameLogitsAndGenerations) {
  EQ_REQUIRE_SHARED();
  auto pm = open_mixed_pack();
  // The two MoE layers, each with four bit groups and two pruned experts.
  ASSERT_EQ(pm->layers().size(), 2u);
  for (const auto& l : pm->layers()) {
    EXPECT_EQ(l.groups.size(), 4u);
    EXPECT_EQ(l.survivors.size(), 30u);
  }
  pm->set_dispatch(make_dispatch(DispatchKind::kSorted, 0));
  const model::FloatBuffer base = run_logits(*pm);
  const std::vector<int32_t> prompt = test::corpus_tokens("c", 24);
  model::GenerateOptions g;
  g.max_new_tokens = 16;
  std::vector<int32_t> first;
  for (const auto& d : all_strategies()) {
    pm->set_dispatch(d);
    const model::FloatBuffer got = run_logits(*pm);
    ASSERT_EQ(got.size(), base.size());
    const double diff = rel_diff(got, base);
    std::printf("  %-20s max |logit diff| / max |logit| vs sorted = %.3g\n", label(*d).c_str(), diff);
    EXPECT_LE(diff, 1e-5) << label(*d);
    const std::vector<int32_t> ids = model::generate(pm->model(), prompt, g).tokens;
    ASSERT_EQ(ids.size(), 16u);
    if (first.empty())
      first = ids;
    else
      EXPECT_EQ(ids, first) << label(*d);
  }
}

// The grouped sigmoid rule over the survivors, in float64 with no code shared
// with routing.cpp: a pruned expert takes no part in its group's score (the
// sum of the two largest biased scores among the survivors) nor in the top-k.
std::vector<int32_t> grouped_top_k(const float* logits, const float* bias, const std::vector<bool>& alive,
                                   const model::ModelConfig& c) {
  const int64_t E = c.num_experts, per = E / c.router_groups;
  std::vector<double> score(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e) score[e] = 1.0 / (1.0 + std::exp(-double(logits[e]))) + bias[e];
  std::vector<std::pair<double, int64_t>> groups;
  for (int64_t g = 0; g < c.router_groups; ++g) {
    std::vector<double> v;
    for (int64_t e = g * per; e < (g + 1) * per; ++e)
      if (alive[e]) v.push_back(score[e]);
    std::sort(v.rbegin(), v.rend());
    groups.push_back({v.empty() ? INFINITY : v.size() == 1 ? -v[0] : -(v[0] + v[1]), g});
  }
  std::sort(groups.begin(), groups.end());
  std::vector<bool> kept(static_cast<size_t>(c.router_groups), false);
  for (int64_t j = 0; j < c.router_topk_groups; ++j) kept[groups[j].second] = true;
  std::vector<int64_t> order;
  for (int64_t e = 0; e < E; ++e) {
    if (!kept[e / per]) score[e] = 0.0;
    if (alive[e]) order.push_back(e);
  }
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return score[a] > score[b]; });
  return std::vector<int32_t>(order.begin(), order.begin() + c.top_k);
}

class RoutingRecorder : public model::MoeObserver {
 public:
  void on_moe_block(const model::MoeObservation& o) override {
    auto& r = by_layer[o.layer];
    r.logits.assign(o.router_logits, o.router_logits + o.tokens * o.num_experts);
    r.ids.assign(o.expert_ids, o.expert_ids + o.tokens * o.top_k);
    r.tokens = o.tokens;
  }
  struct Layer {
    std::vector<float> logits;
    std::vector<int32_t> ids;
    int64_t tokens = 0;
  };
  std::map<int64_t, Layer> by_layer;
};

TEST(DeepseekDispatch, PrunedExpertsLeaveGroupSelection) {
  EQ_REQUIRE_SHARED();
  auto pm = open_mixed_pack();
  const model::ModelConfig& c = pm->config();
  ASSERT_GT(c.router_groups, 1);
  RoutingRecorder rec;
  pm->model().set_observer(&rec);
  const std::vector<int32_t> text = test::corpus_tokens("c", 128);
  model::KvCache cache = pm->model().new_cache(1, 128);
  pm->model().forward(text, 1, static_cast<int64_t>(text.size()), cache);
  pm->model().set_observer(nullptr);
  const auto ckpt = io::Checkpoint::open(deepseek_small());
  int64_t checked = 0;
  for (const auto& layer : pm->layers()) {
    const auto& r = rec.by_layer.at(layer.layer);
    std::vector<bool> alive(static_cast<size_t>(c.num_experts), false);
    for (int32_t e : layer.survivors) alive[e] = true;
    const std::string bias_name = "model.layers." + std::to_string(layer.layer) + ".mlp.gate.e_score_correction_bias";
    ASSERT_EQ(ckpt->info(bias_name).dtype, DType::kF32);
    const float* bias = reinterpret_cast<const float*>(ckpt->view(bias_name).data);
    for (int64_t t = 0; t < r.tokens; ++t) {
      const float* l = r.logits.data() + t * c.num_experts;
      const std::vector<int32_t> want = grouped_top_k(l, bias, alive, c);
      const std::vector<int32_t> got(r.ids.begin() + t * c.top_k, r.ids.begin() + (t + 1) * c.top_k);
      ASSERT_EQ(got, want) << "layer " << layer.layer << " token " << t;
      ++checked;
    }
  }
  std::printf("  %lld tokens x layers routed as the float64 rule over the survivors\n", (long long)checked);
  EXPECT_EQ(checked, 2 * 128);
}

}  // namespace
}  // namespace eq::exec
