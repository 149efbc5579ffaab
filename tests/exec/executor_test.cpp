// The packed executor: loading, pruning, and the equivalence of the three
// dispatch strategies (docs/design.md, "Dispatch": every strategy computes the
// same function, so their outputs agree to rounding).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <set>

#include "core/error.h"
#include "exec/dispatch.h"
#include "exec/packed_model.h"
#include "exec/packed_moe_block.h"
#include "exec/runtime_config.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "io/tokens.h"
#include "io/text_file.h"
#include "model/generate.h"
#include "packed_fixture.h"

namespace eq::exec {
namespace {

std::vector<int32_t> eval_tokens(size_t n) {
  return test::corpus_tokens("c", n);
}

// ‖a − b‖₂ / ‖b‖₂ over all logits (the relative error of the whole output).
double rel_l2(const model::FloatBuffer& a, const model::FloatBuffer& b) {
  double d = 0, m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    m += static_cast<double>(b[i]) * b[i];
  }
  return m > 0 ? std::sqrt(d / m) : std::sqrt(d);
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

// Prefill of 2 × 96 tokens (M = 192), then 6 decode steps (M = 2 each, one
// token per sequence): every logit row, concatenated.
model::FloatBuffer run_logits(PackedModel& pm) {
  model::Model& m = pm.model();
  const std::vector<int32_t> text = eval_tokens(400);
  std::vector<int32_t> prompt(text.begin(), text.begin() + 192);
  model::KvCache cache = m.new_cache(2, 128);
  model::FloatBuffer all = m.forward(prompt, 2, 96, cache);
  for (int step = 0; step < 6; ++step) {
    std::vector<int32_t> next = {text[200 + step], text[300 + step]};
    const auto l = m.forward(next, 2, 1, cache);
    all.insert(all.end(), l.begin(), l.end());
  }
  return all;
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

TEST(PackedModel, LoadsGroupsSlotsAndPrunedMask) {
  auto pm = PackedModel::open(test::mixed_pack());
  const model::ModelConfig& c = pm->config();
  ASSERT_EQ(static_cast<int64_t>(pm->layers().size()), c.num_moe_layers());
  std::set<std::string> formats;
  for (const PackedLayer& l : pm->layers()) {
    EXPECT_GE(l.groups.size(), 3u) << "layer " << l.layer;
    int64_t pruned = 0;
    for (int64_t e = 0; e < c.num_experts; ++e) {
      const ExpertLocation& at = l.experts[static_cast<size_t>(e)];
      if (at.group < 0) {
        ++pruned;
        EXPECT_EQ((e + l.layer) % 16, 15) << "expert " << e;
        continue;
      }
      const BitGroup& g = l.groups[static_cast<size_t>(at.group)];
      EXPECT_EQ(g.expert_ids[static_cast<size_t>(at.slot)], e);
      formats.insert(std::string(g.format->name));
      EXPECT_EQ(l.expert(static_cast<int32_t>(e)).gate.rows, c.moe_intermediate_size);
      EXPECT_EQ(l.expert(static_cast<int32_t>(e)).down.rows, c.hidden_size);
    }
    EXPECT_EQ(pruned, c.num_experts / 16);
    EXPECT_EQ(static_cast<int64_t>(l.survivors.size()), c.num_experts - pruned);
  }
  EXPECT_EQ(formats, (std::set<std::string>{"int8_row", "fp4_g32", "trellis2", "int2_g32"}));
  EXPECT_GT(pm->load_stats().verified_bytes, 0u);
}

TEST(PackedModel, PrunedExpertsAreNeverRoutedAndWeightsRenormalize) {
  auto pm = PackedModel::open(test::mixed_pack(), test::open_options(false));
  const model::ModelConfig& c = pm->config();
  const PackedLayer& l = pm->layers().front();
  // Logits that favour the pruned experts strongly.
  const int64_t tokens = 64;
  std::vector<float> logits(static_cast<size_t>(tokens * c.num_experts));
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t e = 0; e < c.num_experts; ++e)
      logits[t * c.num_experts + e] = (l.experts[e].group < 0 ? 20.0f : 0.0f) + 0.01f * static_cast<float>((t * 7 + e * 3) % 11);
  const model::Routing r = route_survivors(c, model::load_router(c, pm->packed_model().weights(), l.layer), l, logits.data(), tokens);
  for (int64_t t = 0; t < tokens; ++t) {
    float sum = 0;
    for (int64_t j = 0; j < c.top_k; ++j) {
      const int32_t id = r.expert_ids[t * c.top_k + j];
      EXPECT_GE(l.experts[id].group, 0) << "pruned expert " << id << " was routed";
      sum += r.weights[t * c.top_k + j];
    }
    if (c.norm_topk_prob) {
      EXPECT_NEAR(sum, 1.0f, 1e-6f);
    }
  }
}

TEST(Dispatch, StrategiesProduceTheSameLogits) {
  auto pm = PackedModel::open(test::mixed_pack(), test::open_options(false));
  pm->set_dispatch(make_dispatch(DispatchKind::kSorted, 0));
  const model::FloatBuffer base = run_logits(*pm);
  for (const auto& d : all_strategies()) {
    pm->set_dispatch(d);
    const model::FloatBuffer got = run_logits(*pm);
    ASSERT_EQ(got.size(), base.size());
    const double diff = rel_diff(got, base);
    std::printf("  %-20s max |logit diff| / max |logit| vs sorted = %.3g\n", label(*d).c_str(), diff);
    EXPECT_LE(diff, 1e-5) << label(*d);
  }
}

TEST(Dispatch, GreedyGenerationsAreIdentical) {
  auto pm = PackedModel::open(test::mixed_pack(), test::open_options(false));
  const std::vector<int32_t> prompt = eval_tokens(48);
  model::GenerateOptions g;
  g.max_new_tokens = 64;
  std::vector<int32_t> first;
  for (const auto& d : all_strategies()) {
    pm->set_dispatch(d);
    const std::vector<int32_t> got = model::generate(pm->model(), prompt, g).tokens;
    ASSERT_EQ(got.size(), 64u);
    if (first.empty())
      first = got;
    else
      EXPECT_EQ(got, first) << label(*d);
  }
}

TEST(Dispatch, IndexShapeDoesNotMatter) {
  // The same rows as [2, 8] (prefill-like) and [16, 1] (decode-like batch).
  auto pm = PackedModel::open(test::mixed_pack(), test::open_options(false));
  const model::ModelConfig& c = pm->config();
  std::vector<float> x(static_cast<size_t>(16 * c.hidden_size));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  for (const auto& d : all_strategies()) {
    pm->set_dispatch(d);
    const int64_t layer = pm->layers().front().layer;
    std::vector<float> a(x.size()), b(x.size());
    pm->block(layer).forward({layer, 2, 8, 0, nullptr}, x.data(), a.data());
    pm->block(layer).forward({layer, 16, 1, 3, nullptr}, x.data(), b.data());
    EXPECT_EQ(a, b) << label(*d);
  }
}

TEST(PackedModel, Bf16PassthroughReproducesTheReference) {
  auto pm = PackedModel::open(test::bf16_pack(), test::open_options(false));
  pm->use_reference(true);
  const model::FloatBuffer ref = run_logits(*pm);
  pm->use_reference(false);
  for (const auto& d : all_strategies()) {
    pm->set_dispatch(d);
    const model::FloatBuffer got = run_logits(*pm);
    // Not bit-for-bit: the bf16 format's matmul sums each dot product in a
    // different order than the reference's float GEMM.
    const double diff = rel_l2(got, ref);
    std::printf("  %-20s bf16 pack vs reference: |logits diff|_2 / |logits|_2 = %.3g (max-norm %.3g)\n",
                label(*d).c_str(), diff, rel_diff(got, ref));
    EXPECT_LE(diff, 1e-6) << label(*d);
  }
}

TEST(PackedModel, RejectsCorruptShardsUnlessVerificationIsOff) {
  namespace fs = std::filesystem;
  const fs::path copy = test::temp_dir("exec-corrupt") / "packed";
  fs::copy(test::mixed_pack(), copy, fs::copy_options::recursive);
  const pack::Manifest m = pack::load_manifest(copy.string());
  const pack::ManifestTensor* t = nullptr;
  for (const auto& x : m.tensors)
    if (x.kind == "group_part") t = &x;
  ASSERT_NE(t, nullptr);
  // Flip one byte in the middle of that tensor (data starts after the header;
  // the tensors tile the rest of the file).
  uint64_t at = 0;
  std::string path;
  {
    auto ckpt = io::Checkpoint::open(copy.string());
    const io::SafetensorsFile& shard = ckpt->shard_of(t->name);
    uint64_t data_bytes = 0;
    for (const auto& info : shard.tensors()) data_bytes = std::max(data_bytes, info.end);
    at = shard.file_size() - data_bytes + shard.find(t->name)->begin + t->bytes / 2;
    path = shard.path();
  }
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(at));
  char ch = 0;
  f.read(&ch, 1);
  ch = static_cast<char>(ch ^ 0x5a);
  f.seekp(static_cast<std::streamoff>(at));
  f.write(&ch, 1);
  f.close();
  try {
    PackedModel::open(copy.string(), test::open_options(true, test::tinymoe_path()));
    FAIL() << "corrupt shard accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(t->name), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(PackedModel::open(copy.string(), test::open_options(false, test::tinymoe_path())));
}

TEST(PackedModel, RejectsAnotherSourceCheckpoint) {
  EQ_REQUIRE_SHARED();
  const std::string other = (test::shared_dir() / "models" / "qwen3moe-small").string();
  try {
    PackedModel::open(test::mixed_pack(), test::open_options(true, other));
    FAIL() << "wrong source accepted";
  } catch (const Error& e) {
    // The configs differ (the first differing field is named) before the fingerprint is checked.
    EXPECT_NE(std::string(e.what()).find("config.json: field"), std::string::npos) << e.what();
  }
}

TEST(RuntimeConfig, ParsesAndRejects) {
  const RuntimeConfig r = parse_runtime_config(nlohmann::json::parse(R"({"version":1,"sort_cutoff":8})"), "x.json");
  EXPECT_EQ(r.sort_cutoff, 8);
  try {
    parse_runtime_config(nlohmann::json::parse(R"({"version":1,"sort_cutoff":-1})"), "x.json");
    FAIL() << "a negative sort_cutoff was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_EQ(std::string(e.what()), "x.json: field 'sort_cutoff': expected an integer >= 0, got -1");
  }
  EXPECT_THROW(parse_runtime_config(nlohmann::json::parse(R"({"version":2,"sort_cutoff":1})"), "x.json"), Error);
  // A file as `tune` writes it: the reader returns the values its text holds,
  // and the writer gives them back unchanged.
  const std::string path = (test::temp_dir("runtime_config") / "runtime.json").string();
  const std::string text = R"({"schema": "expertquant.runtime", "version": 1, "sort_cutoff": 6,
      "tuned": {"cpu": "x", "points": [{"m": 1, "per_token_ms": 0.126, "sorted_ms": 0.124}], "threads": 2}})";
  io::write_file_atomic(path, text);
  const RuntimeConfig file = load_runtime_config(path);
  EXPECT_EQ(file.sort_cutoff, 6);
  EXPECT_EQ(file.tuned, nlohmann::json::parse(text).at("tuned"));
  const RuntimeConfig back = parse_runtime_config(runtime_config_to_json(file), "round trip");
  EXPECT_EQ(back.sort_cutoff, 6);
  EXPECT_EQ(back.tuned, file.tuned);
  // A cutoff far from the default survives exactly.
  RuntimeConfig wide;
  wide.sort_cutoff = (int64_t(1) << 40) + 3;
  EXPECT_EQ(parse_runtime_config(runtime_config_to_json(wide), "round trip").sort_cutoff, (int64_t(1) << 40) + 3);
}

// The GPU's section: its cutoff and record read back, the CPU's values
// untouched; a negative cutoff named with its field; absent, the default.
TEST(RuntimeConfig, CudaSectionRoundTrips) {
  const RuntimeConfig r = parse_runtime_config(
      nlohmann::json::parse(R"({"version":1,"sort_cutoff":8,"cuda":{"sort_cutoff":3,"tuned":{"gpu":"G"}}})"), "x.json");
  EXPECT_EQ(r.sort_cutoff, 8);
  EXPECT_EQ(r.cuda_sort_cutoff, 3);
  EXPECT_EQ(r.cuda_tuned, nlohmann::json::parse(R"({"gpu":"G"})"));
  EXPECT_EQ(r.device, quant::Device::kCpu);  // never from the file
  const RuntimeConfig back = parse_runtime_config(runtime_config_to_json(r), "round trip");
  EXPECT_EQ(back.cuda_sort_cutoff, 3);
  EXPECT_EQ(back.cuda_tuned, r.cuda_tuned);
  EXPECT_EQ(parse_runtime_config(nlohmann::json::parse(R"({"version":1,"sort_cutoff":2})"), "x.json").cuda_sort_cutoff,
            kDefaultCudaSortCutoff);
  EXPECT_FALSE(runtime_config_to_json(RuntimeConfig{}).contains("cuda"));
  try {
    parse_runtime_config(nlohmann::json::parse(R"({"version":1,"sort_cutoff":1,"cuda":{"sort_cutoff":-2}})"), "x.json");
    FAIL() << "a negative cuda sort_cutoff was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_NE(std::string(e.what()).find("sort_cutoff"), std::string::npos) << e.what();
  }
  RuntimeConfig gpu = r;
  gpu.device = quant::Device::kCuda;
  EXPECT_EQ(active_sort_cutoff(gpu), 3);
  EXPECT_EQ(active_sort_cutoff(r), 8);
}

TEST(Dispatch, AutoBranchFollowsTheCutoff) {
  AutoDispatch a(4);
  EXPECT_FALSE(a.sorts(1));
  EXPECT_FALSE(a.sorts(4));
  EXPECT_TRUE(a.sorts(5));
  EXPECT_TRUE(AutoDispatch(0).sorts(1));
  EXPECT_EQ(SortedDispatch().sort_cutoff(), -1);  // only auto has a cutoff
  EXPECT_EQ(parse_dispatch_kind("mask-combine"), DispatchKind::kMaskCombine);
  EXPECT_FALSE(parse_dispatch_kind("masked").has_value());
}

}  // namespace
}  // namespace eq::exec
