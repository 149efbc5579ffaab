// eval's quality pass and perplexity give the same figures, bit for bit, in
// the layer-major order (every window through layer l before layer l+1), the
// window-major order and with the hidden states spilled to a file (a bound of
// one byte).
#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "eval/perplexity.h"
#include "eval/quality.h"
#include "exec/packed_fixture.h"
#include "exec/packed_model.h"
#include "model/forward.h"
#include "pack/manifest.h"
#include "test_support.h"

namespace eq::eval {
namespace {

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

void expect_same(const TextQuality& a, const TextQuality& b, const std::string& what) {
  EXPECT_EQ(a.scored_tokens, b.scored_tokens) << what;
  EXPECT_TRUE(same_bits(a.bits_reference, b.bits_reference)) << what << ": " << a.bits_reference << " vs " << b.bits_reference;
  EXPECT_TRUE(same_bits(a.bits_packed, b.bits_packed)) << what << ": " << a.bits_packed << " vs " << b.bits_packed;
  EXPECT_TRUE(same_bits(a.kl_mean, b.kl_mean)) << what << ": " << a.kl_mean << " vs " << b.kl_mean;
  EXPECT_TRUE(same_bits(a.kl_p99, b.kl_p99)) << what;
  EXPECT_TRUE(same_bits(a.kl_max, b.kl_max)) << what;
  EXPECT_TRUE(same_bits(a.top1_agreement, b.top1_agreement)) << what;
}

void expect_same(const QualityResult& a, const QualityResult& b, const std::string& what) {
  expect_same(a.overall, b.overall, what + " overall");
  ASSERT_EQ(a.texts.size(), b.texts.size());
  for (size_t t = 0; t < a.texts.size(); ++t) expect_same(a.texts[t], b.texts[t], what + " " + a.texts[t].label);
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t l = 0; l < a.layers.size(); ++l) {
    EXPECT_EQ(a.layers[l].tokens, b.layers[l].tokens) << what;
    EXPECT_TRUE(same_bits(a.layers[l].rel_l2, b.layers[l].rel_l2)) << what << " layer " << l;
    EXPECT_TRUE(same_bits(a.layers[l].cosine_mean, b.layers[l].cosine_mean)) << what << " layer " << l;
    EXPECT_TRUE(same_bits(a.layers[l].cosine_min, b.layers[l].cosine_min)) << what << " layer " << l;
  }
}

// Resident bytes of the process's mappings of files under `folder` (/proc/self/smaps).
uint64_t mapped_rss_under(const std::string& folder) {
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool inside = false;
  uint64_t kb = 0;
  while (std::getline(in, line)) {
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) && line.find('-') < 17) {
      inside = line.find(folder) != std::string::npos;
      continue;
    }
    unsigned long long v = 0;
    if (inside && std::sscanf(line.c_str(), "Rss: %llu kB", &v) == 1) kb += v;
  }
  return kb * 1024;
}

// A layer-major pass lets each layer's mapped experts go as it leaves the
// layer (PackedModel::release_layer_pages); a window-major pass keeps every
// page it touched mapped.
TEST(PassOrder, LayerPassLeavesThePacksPagesUnmapped) {
  const std::string folder = std::filesystem::canonical(test::mixed_pack()).string();
  std::vector<LabeledTokens> texts{{"prose", test::corpus_tokens("prose", 300)}};
  const auto resident_after = [&](model::PassOrder order) {
    auto pm = exec::PackedModel::open(folder, test::open_options(false));
    QualityOptions o;
    o.ctx = 64;
    o.pass_order = order;
    compare_quality(*pm, texts, o);
    return mapped_rss_under(folder);
  };
  const uint64_t window = resident_after(model::PassOrder::kWindow);
  const uint64_t layer = resident_after(model::PassOrder::kLayer);
  // What may stay: the tensors of no layer (embeddings, final norm, head) and
  // the partly used pages at the two ends of each layer tensor.
  uint64_t expert_bytes = 0, outside_layers = 0, layer_tensors = 0;
  for (const auto& t : pack::load_manifest(folder).tensors) {
    if (t.kind == "group_part") expert_bytes += t.bytes;
    if (t.layer < 0) outside_layers += t.bytes;
    else ++layer_tensors;
  }
  std::printf("pack pages mapped after the pass: window order %llu, layer order %llu; expert bytes %llu, "
              "outside layers %llu, %llu layer tensors\n",
              static_cast<unsigned long long>(window), static_cast<unsigned long long>(layer),
              static_cast<unsigned long long>(expert_bytes), static_cast<unsigned long long>(outside_layers),
              static_cast<unsigned long long>(layer_tensors));
  EXPECT_GT(window, expert_bytes / 2);
  EXPECT_LE(layer, outside_layers + layer_tensors * 2 * 4096 + 4096);
  EXPECT_LT(layer + expert_bytes / 2, window);
}

TEST(PassOrder, QualityIdenticalInBothOrders) {
  auto pm = exec::PackedModel::open(test::mixed_pack(), test::open_options(false));
  std::vector<LabeledTokens> texts;
  for (const char* d : {"c", "prose"}) texts.push_back({d, test::corpus_tokens(d, 150)});
  const auto run = [&](model::PassOrder order, uint64_t hidden_memory) {
    QualityOptions o;
    o.ctx = 64;
    o.batch_windows = 2;
    o.pass_order = order;
    o.hidden_memory = hidden_memory;
    o.spill_dir = test::temp_dir("quality_spill").string();
    return compare_quality(*pm, texts, o);
  };
  const QualityResult window = run(model::PassOrder::kWindow, 0);
  const QualityResult layer = run(model::PassOrder::kLayer, 0);
  const QualityResult spilled = run(model::PassOrder::kLayer, 1);
  ASSERT_EQ(window.overall.scored_tokens, 2 * (150 - 3));
  ASSERT_GT(window.overall.kl_mean, 0.0);
  ASSERT_FALSE(window.layers.empty());
  expect_same(window, layer, "layer order");
  expect_same(window, spilled, "spilled");
  std::printf("quality: KL mean %.9g, packed bits %.9g identical in both orders and spilled\n",
              window.overall.kl_mean, window.overall.bits_packed);
}

void check_perplexity(const std::string& model_name) {
  const auto m = model::Model::open((test::shared_dir() / "models" / model_name).string());
  const std::vector<std::vector<int32_t>> seqs = {test::corpus_tokens("prose", 140), test::corpus_tokens("c", 75)};
  const auto run = [&](model::PassOrder order, uint64_t hidden_memory) {
    PerplexityOptions o;
    o.ctx = 64;
    o.batch_windows = 2;
    o.pass_order = order;
    o.hidden_memory = hidden_memory;
    o.spill_dir = test::temp_dir("perplexity_spill").string();
    return perplexity(*m, seqs, o);
  };
  const PerplexityResult window = run(model::PassOrder::kWindow, 0);
  const PerplexityResult layer = run(model::PassOrder::kLayer, 0);
  const PerplexityResult spilled = run(model::PassOrder::kLayer, 1);
  ASSERT_EQ(window.scored_tokens, 140 - 3 + 75 - 2);
  EXPECT_TRUE(same_bits(window.total_nats, layer.total_nats)) << window.total_nats << " vs " << layer.total_nats;
  EXPECT_TRUE(same_bits(window.total_nats, spilled.total_nats)) << window.total_nats << " vs " << spilled.total_nats;
  EXPECT_EQ(window.windows, layer.windows);
  std::printf("%s: perplexity %.9g identical in both orders and spilled\n", model_name.c_str(), window.perplexity());
}

TEST(PassOrder, PerplexityTinyMoe) {
  EQ_REQUIRE_SHARED();
  check_perplexity("tinymoe");
}

TEST(PassOrder, PerplexityQwen3MoeSmall) {
  EQ_REQUIRE_SHARED();
  check_perplexity("qwen3moe-small");
}

TEST(PassOrder, PerplexityQwen3NextSmall) {
  EQ_REQUIRE_SHARED();
  check_perplexity("qwen3_next-small");
}

}  // namespace
}  // namespace eq::eval
