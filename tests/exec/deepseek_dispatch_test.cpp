// The dispatch strategies on a deepseek_v3 pack (../shared/models/deepseek_v3-small:
// grouped sigmoid router with a correction bias, a shared expert, a dense
// first layer) with four formats and pruned experts per MoE layer: mask-combine,
// sorted and auto compute the same function, as they do for qwen3_moe.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "exec/dispatch.h"
#include "exec/packed_model.h"
#include "io/atomic_file.h"
#include "model/generate.h"
#include "packed_fixture.h"

namespace eq::exec {
namespace {

std::string deepseek_small() { return (test::shared_dir() / "models" / "deepseek_v3-small").string(); }

// Expert e of MoE layer l: pruned when (e + l) % 16 == 15, else one of four
// formats that fit the 16-wide expert matrices, by e % 4.
nlohmann::json allocation(const model::ModelConfig& c) {
  static const char* kFormats[4] = {"int8_row", "fp4_g16", "trellis2", "nvfp4"};
  static const char* kClasses[4] = {"critical", "standard", "deprioritized", "standard"};
  nlohmann::json layers = nlohmann::json::array();
  for (int64_t l = 0; l < c.num_layers; ++l) {
    if (!c.layer_is_moe[static_cast<size_t>(l)]) continue;
    nlohmann::json experts = nlohmann::json::array();
    for (int64_t e = 0; e < c.num_experts; ++e)
      if ((e + l) % 16 == 15)
        experts.push_back({{"class", "pruned"}});
      else
        experts.push_back({{"class", kClasses[e % 4]}, {"format", kFormats[e % 4]}});
    layers.push_back({{"layer", l}, {"experts", experts}});
  }
  return {{"schema", "expertquant.allocation"}, {"version", 1}, {"layers", layers}};
}

std::unique_ptr<PackedModel> open_mixed_pack() {
  const auto dir = test::temp_dir("deepseek_dispatch");
  pack::PackRequest rq;
  rq.model_path = deepseek_small();
  rq.out_path = (dir / "packed").string();
  rq.allocation_path = (dir / "allocation.json").string();
  io::write_file_atomic(rq.allocation_path, allocation(model::load_config(rq.model_path)).dump(1));
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

}  // namespace
}  // namespace eq::exec
