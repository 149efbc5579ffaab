// A packed folder runs on its own (docs/design.md, "Dispatch"): the forward pass is built from
// the folder's config.json and non-expert tensors, the source checkpoint is
// only needed for comparisons; `pack --attn-format` packs run their
// quantized attention and lm_head through the format's matmul.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "eval/quality.h"
#include "exec/dispatch.h"
#include "exec/packed_model.h"
#include "model/forward.h"
#include "model/generate.h"
#include "packed_fixture.h"

namespace eq::exec {
namespace {

namespace fs = std::filesystem;

PackedModelOptions alone(bool verify = true) { return test::open_options(verify, ""); }

double rel_l2(const model::FloatBuffer& a, const model::FloatBuffer& b) {
  double d = 0, m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    m += static_cast<double>(b[i]) * b[i];
  }
  return m > 0 ? std::sqrt(d / m) : std::sqrt(d);
}

// Prefill of 2 × 96 tokens, then 6 decode steps of one token per sequence:
// every logit row, concatenated.
model::FloatBuffer run_logits(model::Model& m) {
  const std::vector<int32_t> text = test::corpus_tokens("c", 400);
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

bool bit_equal(const model::FloatBuffer& a, const model::FloatBuffer& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(Standalone, SourceCheckpointIsGone) {
  const test::StandalonePacks& p = test::standalone_packs();
  for (const std::string& folder : {p.mixed, p.bf16, p.attn}) {
    const pack::Manifest m = pack::load_manifest(folder);
    EXPECT_EQ(m.source.path, p.source_path_in_manifest);
    EXPECT_FALSE(fs::exists(m.source.path)) << m.source.path;
    EXPECT_TRUE(fs::exists(fs::path(folder) / "config.json"));
  }
}

TEST(Standalone, PackedLogitsEqualThoseLoadedWithTheSource) {
  const test::StandalonePacks& p = test::standalone_packs();
  for (const std::string& folder : {p.mixed, p.attn}) {
    auto pm_alone = PackedModel::open(folder, alone());
    auto pm_with = PackedModel::open(folder, test::open_options(true, p.source));
    EXPECT_FALSE(pm_alone->has_reference());
    EXPECT_TRUE(pm_with->has_reference());
    EXPECT_THROW(pm_alone->use_reference(true), Error);
    for (auto kind : {DispatchKind::kSorted, DispatchKind::kAuto}) {
      pm_alone->set_dispatch(make_dispatch(kind, 1));
      pm_with->set_dispatch(make_dispatch(kind, 1));
      const model::FloatBuffer a = run_logits(pm_alone->model());
      const model::FloatBuffer b = run_logits(pm_with->model());
      EXPECT_TRUE(bit_equal(a, b)) << folder << ": rel L2 " << rel_l2(a, b);
    }
    model::GenerateOptions g;
    g.max_new_tokens = 32;
    const std::vector<int32_t> prompt = test::corpus_tokens("prose", 48);
    EXPECT_EQ(model::generate(pm_alone->model(), prompt, g).tokens,
              model::generate(pm_with->model(), prompt, g).tokens);
  }
}

TEST(Standalone, Bf16PassthroughAloneReproducesTheReferenceForward) {
  const test::StandalonePacks& p = test::standalone_packs();
  auto pm = PackedModel::open(p.bf16, alone());
  auto ref = model::Model::open(p.source);
  const model::FloatBuffer want = run_logits(*ref);
  for (auto kind : {DispatchKind::kMaskCombine, DispatchKind::kSorted, DispatchKind::kAuto}) {
    pm->set_dispatch(make_dispatch(kind, 1));
    const double diff = rel_l2(run_logits(pm->model()), want);
    std::printf("  %-13s bf16 pack alone vs reference forward: |diff|_2 / |logits|_2 = %.3g\n",
                make_dispatch(kind, 1)->name().c_str(), diff);
    EXPECT_LE(diff, 1e-6);
  }
}

// Attention and lm_head quantized (int8_row), experts bf16: the only
// quantization is the attention's, so the packed model's bits per byte on
// the bundled prose text stay within 1% of the unquantized model's
// (measured: see the printed figures).
TEST(Standalone, AttnFormatPackRunsItsQuantizedAttention) {
  const test::StandalonePacks& p = test::standalone_packs();
  const pack::Manifest m = pack::load_manifest(p.attn);
  EXPECT_EQ(m.policy.attn_format, "int8_row");
  int quantized = 0;
  for (const auto& t : m.tensors) quantized += t.kind == "quantized";
  const model::ModelConfig c = model::load_config(p.attn);
  // q, k, v, o per layer (each int8_row: qweight + scales), and lm_head when not tied.
  const int matrices = static_cast<int>(4 * c.num_layers) + (c.tie_word_embeddings ? 0 : 1);
  EXPECT_EQ(quantized, 2 * matrices);

  auto pm = PackedModel::open(p.attn, test::open_options(true, p.source));
  // The quantized projections are used: the logits differ from the bf16 pack's
  // (same experts, attention copied).
  auto plain = PackedModel::open(p.bf16, alone());
  const model::FloatBuffer a = run_logits(pm->model()), b = run_logits(plain->model());
  const double diff = rel_l2(a, b);
  std::printf("  attn int8_row vs copied attention: |diff|_2 / |logits|_2 = %.3g\n", diff);
  EXPECT_GT(diff, 1e-6);
  EXPECT_LT(diff, 0.05);

  eval::QualityOptions qo;
  qo.ctx = 256;
  const std::vector<eval::LabeledTokens> texts = {eval::LabeledTokens{"prose", test::corpus_tokens("prose", 2048)}};
  const eval::QualityResult q = eval::compare_quality(*pm, texts, qo);
  ASSERT_TRUE(q.compared);
  const double delta = q.overall.bits_packed / q.overall.bits_reference - 1.0;
  std::printf("  attn int8_row: bpb %.5f -> %.5f (%+.3f%%), KL mean %.3g, top-1 %.4f\n", q.overall.bits_reference,
              q.overall.bits_packed, 100 * delta, q.overall.kl_mean, q.overall.top1_agreement);
  EXPECT_LT(std::fabs(delta), 0.01);
  EXPECT_GT(q.overall.kl_mean, 0.0);
  EXPECT_GT(q.overall.top1_agreement, 0.9);
  // bf16 experts: the per-layer MoE error is the bf16 kernel's rounding only.
  for (const eval::LayerError& e : q.layers) EXPECT_LT(e.rel_l2, 1e-5) << "layer " << e.layer;
}

TEST(Standalone, QualityAloneScoresThePackedModelOnly) {
  const test::StandalonePacks& p = test::standalone_packs();
  auto alone_pm = PackedModel::open(p.mixed, alone(false));
  auto with_pm = PackedModel::open(p.mixed, test::open_options(false, p.source));
  eval::QualityOptions qo;
  qo.ctx = 128;
  const std::vector<eval::LabeledTokens> texts = {eval::LabeledTokens{"c", test::corpus_tokens("c", 300)}};
  const eval::QualityResult a = eval::compare_quality(*alone_pm, texts, qo);
  const eval::QualityResult b = eval::compare_quality(*with_pm, texts, qo);
  EXPECT_FALSE(a.compared);
  EXPECT_TRUE(a.layers.empty());
  EXPECT_EQ(a.overall.scored_tokens, b.overall.scored_tokens);
  EXPECT_EQ(a.overall.bits_packed, b.overall.bits_packed);  // the same packed forward
  EXPECT_GT(a.overall.bits_packed, 0.5);
}

TEST(Standalone, RejectsASourceWhoseConfigDiffers) {
  const test::StandalonePacks& p = test::standalone_packs();
  const fs::path other = test::temp_dir("standalone-config") / "model";
  fs::copy(p.source, other, fs::copy_options::recursive);
  nlohmann::json cfg;
  {
    std::ifstream f(other / "config.json");
    cfg = nlohmann::json::parse(f);
  }
  cfg["rope_theta"] = cfg.value("rope_theta", 10000.0) * 2;
  std::ofstream(other / "config.json") << cfg.dump(2);
  try {
    PackedModel::open(p.mixed, test::open_options(false, other.string()));
    FAIL() << "a source with another config was accepted";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("rope_theta"), std::string::npos) << msg;
    EXPECT_NE(msg.find("config.json"), std::string::npos) << msg;
  }
}

// config.json is what the forward is built from: the manifest records its
// size and checksum (and the side files'); an edited copy is rejected, with or
// without verification, and by `verify`.
TEST(Standalone, ConfigJsonIsCheckedAgainstTheManifest) {
  const test::StandalonePacks& p = test::standalone_packs();
  const pack::Manifest m = pack::load_manifest(p.bf16);
  std::vector<std::string> names;
  for (const auto& f : m.files) names.push_back(f.file);
  EXPECT_NE(std::find(names.begin(), names.end(), "config.json"), names.end());
  EXPECT_EQ(names.size(), pack::describe_files(test::tinymoe_path()).size());  // config + the source's side files
  EXPECT_TRUE(pack::check_files(m, p.bf16).empty());

  const fs::path copy = test::temp_dir("standalone-editedconfig") / "packed";
  fs::copy(p.bf16, copy, fs::copy_options::recursive);
  nlohmann::json cfg;
  {
    std::ifstream f(copy / "config.json");
    cfg = nlohmann::json::parse(f);
  }
  cfg["rms_norm_eps"] = 1e-3;
  std::ofstream(copy / "config.json") << cfg.dump(2);
  try {
    PackedModel::open(copy.string(), alone(true));
    FAIL() << "an edited config.json was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("manifest.json"), std::string::npos) << e.what();
  }
  // Without verification too: config.json and the side files are small, and an
  // edited one runs another model.
  try {
    PackedModel::open(copy.string(), alone(false));
    FAIL() << "an edited config.json was accepted without verification";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find((copy / "config.json").string() + ": "), std::string::npos) << e.what();
  }
  EXPECT_EQ(pack::check_files(pack::load_manifest(copy.string()), copy.string()).size(), 1u);
}

TEST(Standalone, RejectsAFolderWithoutConfigJson) {
  const test::StandalonePacks& p = test::standalone_packs();
  const fs::path copy = test::temp_dir("standalone-noconfig") / "packed";
  fs::copy(p.bf16, copy, fs::copy_options::recursive);
  fs::remove(copy / "config.json");
  try {
    PackedModel::open(copy.string(), alone(false));
    FAIL() << "a folder without config.json was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace eq::exec
