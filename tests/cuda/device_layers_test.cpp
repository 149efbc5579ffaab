// The decoder layers on the GPU (exec/cuda/device_layers.h, `--device cuda`;
// ctest label `cuda`): a packed model whose layers run there gives the logits
// of the same model with only its products on the GPU, for the bundled model
// and every shared architecture (grouped-query attention with q/k norms,
// partial RoPE, sinks and a sliding window, an output gate, biases, shared
// experts and dense layers; latent attention with interleaved RoPE; the gated
// delta net, fused and separate projections, its states carried from the
// prefill to the decode steps), over more keys than one chunk of the attention
// kernel, and takes every layer. device_delta_net_test.cpp checks the gated
// delta net's kernels at the real models' head widths.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "exec/cuda/cuda_dispatch.h"
#include "exec/cuda/device_exec.h"
#include "exec/cuda/device_layers.h"
#include "exec/packed_fixture.h"
#include "exec/packed_model.h"
#include "logit_agreement.h"
#include "model/config.h"
#include "model/forward.h"
#include "bit_differences.h"
#include "plain_launches.h"
#include "quantize_once.h"
#include "quant/cuda/cuda_gpus.h"

namespace eq::exec {
namespace {

namespace fs = std::filesystem;

#define EQ_REQUIRE_GPU()                                                        \
  do {                                                                          \
    const std::string why = cuda::unavailable_reason();                         \
    if (!why.empty()) GTEST_SKIP() << "no GPU: " << why;                        \
  } while (0)

// `model` packed as bf16 (a format of every shape; the experts' format is not
// what these tests check) through the binary (not in this process: a pack
// sets the process's trellis search, which other tests of this binary read).
std::string pack_of(const std::string& model, const std::string& tag) {
  const fs::path out = test::temp_dir("device_layers_" + tag) / "packed";
  std::string output;
  const int rc = test::run_command(
      test::binary() + " pack --model " + model + " --uniform bf16 --force -o " + out.string(), &output);
  if (rc != 0) throw std::runtime_error("pack of " + model + " failed (" + std::to_string(rc) + "): " + output);
  return out.string();
}

// The bundled model's pack, made once for the tests that use it.
const std::string& tinymoe_pack() {
  static const std::string folder = pack_of(test::tinymoe_path(), "tinymoe");
  return folder;
}

// Opened with its float matrices and routed experts on the GPU; its layers
// there too unless EXPERTQUANT_GPU_LAYERS=0 (read when it opens).
std::unique_ptr<PackedModel> open_on_gpu(const std::string& folder, bool layers) {
  struct Env {
    explicit Env(bool off) {
      if (off) ::setenv("EXPERTQUANT_GPU_LAYERS", "0", 1);
    }
    ~Env() { ::unsetenv("EXPERTQUANT_GPU_LAYERS"); }
  } env(!layers);
  PackedModelOptions o = test::open_options(false);
  o.model_path.clear();  // the pack alone
  o.dense_device = quant::Device::kCuda;
  auto pm = PackedModel::open(folder, o);
  pm->set_dispatch(cuda::make_cuda_dispatch(DispatchKind::kAuto, 4));
  return pm;
}

// One pack opened twice: its layers on the GPU, and only its products.
struct WithAndWithout {
  explicit WithAndWithout(const std::string& folder)
      : with(open_on_gpu(folder, true)), without(open_on_gpu(folder, false)) {}
  std::unique_ptr<PackedModel> with, without;
};

// Logits of the GPU layers (b) against those of the products only (a), as
// distributions: KL at most `kl_bound` nats at 19 in 20 positions, their mean
// at most 10 * kl_bound, and the same top token at 19 in 20 positions;
// printed under `tag`, with the positions past the bound. A routing choice
// that flips is one position far past it, whose later positions barely move
// (qwen3moe-small at 75 of 106: 2.4e-3 nats, the rest at most 3.7e-6; a
// wrong rotation, mask, norm or cache position is past it everywhere).
void expect_agree(const model::FloatBuffer& a, const model::FloatBuffer& b, int64_t vocab, double kl_bound,
                  const std::string& tag) {
  ASSERT_EQ(a.size(), b.size()) << tag;
  const test::LogitAgreement g = test::logit_agreement(a, b, vocab);
  std::printf("%s: mean KL(products only || layers) %.3g nats over %lld positions, same top token at %lld\n",
              tag.c_str(), g.kl_mean, static_cast<long long>(g.rows), static_cast<long long>(g.same_top));
  int64_t past = 0;
  std::string where;
  for (size_t r = 0; r < g.kl_rows.size(); ++r)
    if (g.kl_rows[r] > kl_bound) ++past, where += " " + std::to_string(r) + ": " + std::to_string(g.kl_rows[r]);
  if (past > 0) std::printf("  past %.3g nats at%s\n", kl_bound, where.c_str());
  EXPECT_LE(past * 20, g.rows) << tag << ": " << past << " positions past " << kl_bound << " nats:" << where;
  EXPECT_LE(g.kl_mean, 10 * kl_bound) << tag;
  EXPECT_GE(g.same_top * 20, g.rows * 19) << tag << ": " << g.same_top << " of " << g.rows;
}

// Logits of a prefill of 2 x 48 tokens and 5 decode steps of both sequences
// (past gpt_oss-small's window of 32), with the decode rows after the prefill's.
model::FloatBuffer run(PackedModel& pm) {
  model::Model& m = pm.model();
  const int64_t V = m.config().vocab_size;
  std::vector<int32_t> text = test::corpus_tokens("c", 400);
  for (int32_t& t : text) t %= static_cast<int32_t>(V);
  std::vector<int32_t> prompt(text.begin(), text.begin() + 96);
  model::KvCache cache = m.new_cache(2, 64);
  model::FloatBuffer all = m.forward(prompt, 2, 48, cache);
  for (int step = 0; step < 5; ++step) {
    const std::vector<int32_t> next = {text[200 + step], text[300 + step]};
    const model::FloatBuffer l = m.forward(next, 2, 1, cache);
    all.insert(all.end(), l.begin(), l.end());
  }
  return all;
}

// The model with its layers on the GPU against the same model with only its
// products there: a position whose router sees two experts within the
// products' rounding of each other may pick the other one (and later
// positions see it through attention), so logits are compared as
// distributions (expect_agree): KL at most 1e-5 nats at 19 in 20 positions
// (measured with bf16 experts: at most 3.7e-6 at every position but one of
// qwen3moe-small's) and the same top token at 19 in 20 (a wrong rotation,
// mask, norm or cache position is far from both). Every call runs the
// expected layers there, with their feed-forward part on the GPU.
void expect_layers_match(const std::string& folder, const std::string& tag) {
  const WithAndWithout p(folder);
  const model::ModelConfig& c = p.with->config();
  const cuda::DeviceLayerStats before = cuda::device_layer_stats();
  const model::FloatBuffer a = run(*p.with);
  const cuda::DeviceLayerStats after = cuda::device_layer_stats();
  const model::FloatBuffer b = run(*p.without);
  // 6 forward calls; consecutive layers run in one call, counted each.
  EXPECT_EQ(after.layers_run - before.layers_run, 6 * c.num_layers) << tag;
  EXPECT_EQ(after.feed_forward_on_cpu - before.feed_forward_on_cpu, 0) << tag;
  // The 5 decode steps (2 tokens, auto's cutoff 4) route on the GPU, except
  // where the experts' activation is not a plain SwiGLU (gpt-oss's clamped
  // one, with biases: device_moe.h, routed decode).
  int64_t moe_layers = 0;
  for (int64_t l = 0; l < c.num_layers; ++l) moe_layers += c.layer_is_moe[static_cast<size_t>(l)];
  const bool routes = c.expert_activation.kind == model::ActivationKind::kSwiGlu;
  EXPECT_EQ(after.moe_routed - before.moe_routed, routes ? 5 * moe_layers : 0) << tag;
  EXPECT_EQ(cuda::device_layer_stats().layers_run, after.layers_run) << tag << ": the runner ran with it off";
  expect_agree(b, a, c.vocab_size, 1e-5,
               tag + " (" + std::to_string(c.num_layers) + " layers on the GPU)");
}

TEST(DeviceLayers, BundledModelMatchesProductsOnly) {
  EQ_REQUIRE_GPU();
  expect_layers_match(tinymoe_pack(), "tinymoe");
}

TEST(DeviceLayers, SharedArchitecturesMatchProductsOnly) {
  EQ_REQUIRE_GPU();
  EQ_REQUIRE_SHARED();
  for (const char* name : {"qwen3moe-small", "glm4_moe-small", "gpt_oss-small", "qwen3_5_moe-small",
                           "qwen3_next-small", "deepseek_v3-small"}) {
    const fs::path model = test::shared_dir() / "models" / name;
    if (!fs::exists(model / "config.json")) {
      std::printf("%s: absent, skipped\n", name);
      continue;
    }
    expect_layers_match(pack_of(model.string(), name), name);
  }
}

// A decode step replayed from its CUDA graph (step_graph.h) runs the kernels
// of the step it was captured from on the same buffers, so the logits equal
// those of the same pack with graphs off bit for bit. Two caches one after the
// other on one runner: each has its first decode step run as it is, the
// second captured (the second cache's updates the first's graph) and the other
// three replayed; where a MoE layer does not route on the GPU (gpt-oss), no
// step is captured.
void expect_graph_steps_equal(const std::string& folder, const std::string& tag) {
  auto graphs = open_on_gpu(folder, true);
  std::unique_ptr<PackedModel> as_is;
  {
    ::setenv("EXPERTQUANT_GPU_GRAPH", "0", 1);  // read when the runner is made
    as_is = open_on_gpu(folder, true);
    ::unsetenv("EXPERTQUANT_GPU_GRAPH");
  }
  const cuda::DeviceLayerStats before = cuda::device_layer_stats();
  const model::FloatBuffer a1 = run(*graphs), a2 = run(*graphs);
  const cuda::DeviceLayerStats after = cuda::device_layer_stats();
  const model::FloatBuffer b = run(*as_is);
  const cuda::DeviceLayerStats last = cuda::device_layer_stats();
  const bool routes = graphs->config().expert_activation.kind == model::ActivationKind::kSwiGlu;
  EXPECT_EQ(after.graph_captures - before.graph_captures, routes ? 2 : 0) << tag;
  EXPECT_EQ(after.graph_replays - before.graph_replays, routes ? 6 : 0) << tag;
  EXPECT_EQ(last.graph_captures + last.graph_replays, after.graph_captures + after.graph_replays)
      << tag << ": a runner made with EXPERTQUANT_GPU_GRAPH=0 used a graph";
  ASSERT_EQ(a1.size(), b.size()) << tag;
  ASSERT_EQ(a2.size(), b.size()) << tag;
  int64_t first1 = -1, first2 = -1;
  const int64_t differ1 = test::bit_differences(a1, b, &first1), differ2 = test::bit_differences(a2, b, &first2);
  EXPECT_EQ(differ1, 0) << tag << ": first cache, first at logit " << first1;
  EXPECT_EQ(differ2, 0) << tag << ": second cache, first at logit " << first2;
  std::printf("%s: %lld graph captures, %lld replays, %lld and %lld of %zu logits differ from the steps run as "
              "they are\n",
              tag.c_str(), static_cast<long long>(after.graph_captures - before.graph_captures),
              static_cast<long long>(after.graph_replays - before.graph_replays), static_cast<long long>(differ1),
              static_cast<long long>(differ2), b.size());
}

TEST(DeviceLayers, DecodeGraphEqualsStepsAsTheyAre) {
  EQ_REQUIRE_GPU();
  expect_graph_steps_equal(tinymoe_pack(), "tinymoe");
  if (test::shared_dir().empty()) return;  // ../shared absent: the bundled model only
  for (const char* name : {"qwen3moe-small", "glm4_moe-small", "gpt_oss-small", "qwen3_5_moe-small",
                           "qwen3_next-small", "deepseek_v3-small"}) {
    const fs::path model = test::shared_dir() / "models" / name;
    if (fs::exists(model / "config.json")) expect_graph_steps_equal(pack_of(model.string(), name), name);
  }
}

// Programmatic dependent launch (quant/cuda/cuda_common.cuh) places a
// kernel of the step while the one before still runs, and each waits for the
// one before ahead of its first read or write: the logits of the prefill and
// the decode steps equal those of plain launches bit for bit, replayed from a
// graph (the default; two runs on one runner, the second updating the first's
// graph) or launched one by one. With graphs, each runner captures and
// replays its steps (a capture that failed would turn graphs off unseen).
void expect_programmatic_launches_change_nothing(const std::string& folder, const std::string& tag) {
  struct GraphsOff {  // EXPERTQUANT_GPU_GRAPH=0 for the runners made in its life
    explicit GraphsOff(bool off) : off(off) {
      if (off) ::setenv("EXPERTQUANT_GPU_GRAPH", "0", 1);
    }
    ~GraphsOff() {
      if (off) ::unsetenv("EXPERTQUANT_GPU_GRAPH");
    }
    bool off;
  };
  for (bool graph : {true, false}) {
    const std::string what = tag + (graph ? " (graphs)" : " (no graphs)");
    const GraphsOff graphs_off(!graph);
    const bool on = quant::cuda::programmatic_launches();
    const cuda::DeviceLayerStats s0 = cuda::device_layer_stats();
    auto overlapped = open_on_gpu(folder, true);
    const model::FloatBuffer a1 = run(*overlapped), a2 = run(*overlapped);
    const cuda::DeviceLayerStats s1 = cuda::device_layer_stats();
    model::FloatBuffer b;
    {
      const test::PlainLaunches plain_launches;
      EXPECT_FALSE(quant::cuda::programmatic_launches());
      auto plain = open_on_gpu(folder, true);
      b = run(*plain);
    }
    const cuda::DeviceLayerStats s2 = cuda::device_layer_stats();
    const bool routes = overlapped->config().expert_activation.kind == model::ActivationKind::kSwiGlu;
    const int64_t step_graphs = graph && routes ? 1 : 0;  // a run: one step captured, three replayed
    EXPECT_EQ(s1.graph_captures - s0.graph_captures, 2 * step_graphs) << what;
    EXPECT_EQ(s1.graph_replays - s0.graph_replays, 6 * step_graphs) << what;
    EXPECT_EQ(s2.graph_captures - s1.graph_captures, step_graphs) << what << ", plain launches";
    EXPECT_EQ(s2.graph_replays - s1.graph_replays, 3 * step_graphs) << what << ", plain launches";
    ASSERT_EQ(a1.size(), b.size()) << what;
    ASSERT_EQ(a2.size(), b.size()) << what;
    int64_t first1 = -1, first2 = -1;
    const int64_t differ1 = test::bit_differences(a1, b, &first1), differ2 = test::bit_differences(a2, b, &first2);
    EXPECT_EQ(differ1, 0) << what << ": first run, first at logit " << first1;
    EXPECT_EQ(differ2, 0) << what << ": second run, first at logit " << first2;
    std::printf("%s: programmatic launches %s, %lld and %lld of %zu logits differ from plain launches\n", what.c_str(),
                on ? "on" : "off (not this GPU's code)", static_cast<long long>(differ1),
                static_cast<long long>(differ2), b.size());
  }
}

TEST(DeviceLayers, ProgrammaticLaunchesChangeNoBit) {
  EQ_REQUIRE_GPU();
  expect_programmatic_launches_change_nothing(tinymoe_pack(), "tinymoe bf16");
  const fs::path out = test::temp_dir("device_layers_fp4") / "packed";
  std::string output;
  ASSERT_EQ(test::run_command(test::binary() + " pack --model " + test::tinymoe_path() +
                                  " --uniform fp4_g32 --force -o " + out.string(),
                              &output),
            0)
      << output;
  expect_programmatic_launches_change_nothing(out.string(), "tinymoe fp4_g32");
  if (test::shared_dir().empty()) return;  // ../shared absent: the bundled model only
  for (const char* name : {"qwen3moe-small", "glm4_moe-small", "gpt_oss-small", "qwen3_5_moe-small",
                           "qwen3_next-small", "deepseek_v3-small"}) {
    const fs::path model = test::shared_dir() / "models" / name;
    if (fs::exists(model / "config.json"))
      expect_programmatic_launches_change_nothing(pack_of(model.string(), name), name);
  }
}

// x quantized once for all the blocks of a decode launch (forced:
// quant::cuda::set_quantize_once(1); the routed launches' blocks then read
// the ids the GPU's router wrote before their wait) or by each block (0):
// the same logits bit for bit, replayed from graphs, two runs, on the
// bundled model packed as fp4_g32 and the shared architectures.
TEST(DeviceLayers, QuantizedOnceChangesNoBit) {
  EQ_REQUIRE_GPU();
  auto expect_same = [](const std::string& folder, const std::string& what) {
    model::FloatBuffer once1, once2, staged;
    {
      const test::QuantizeOnce once(1);
      auto on_gpu = open_on_gpu(folder, true);
      once1 = run(*on_gpu), once2 = run(*on_gpu);
    }
    {
      const test::QuantizeOnce each_block(0);
      auto on_gpu = open_on_gpu(folder, true);
      staged = run(*on_gpu);
    }
    ASSERT_EQ(once1.size(), staged.size()) << what;
    int64_t first1 = -1, first2 = -1;
    EXPECT_EQ(test::bit_differences(once1, staged, &first1), 0) << what << ": first run, first at logit " << first1;
    EXPECT_EQ(test::bit_differences(once2, staged, &first2), 0) << what << ": second run, first at logit " << first2;
  };
  const fs::path out = test::temp_dir("device_layers_once") / "packed";
  std::string output;
  ASSERT_EQ(test::run_command(test::binary() + " pack --model " + test::tinymoe_path() +
                                  " --uniform fp4_g32 --force -o " + out.string(),
                              &output),
            0)
      << output;
  expect_same(out.string(), "tinymoe fp4_g32");
  if (test::shared_dir().empty()) return;  // ../shared absent: the bundled model only
  for (const char* name : {"qwen3moe-small", "glm4_moe-small", "qwen3_5_moe-small", "deepseek_v3-small"}) {
    const fs::path model = test::shared_dir() / "models" / name;
    if (fs::exists(model / "config.json")) expect_same(pack_of(model.string(), name), name);
  }
}

// With an observer on the model, each layer's feed-forward part runs on the
// CPU on the rows copied over (the block reports its values there), and the
// logits are those of the layers without one.
TEST(DeviceLayers, ObserverTakesTheFeedForwardToTheCpu) {
  EQ_REQUIRE_GPU();
  struct Count final : model::MoeObserver {
    int64_t blocks = 0;
    void on_moe_block(const model::MoeObservation&) override { ++blocks; }
  } count;
  auto observed = open_on_gpu(tinymoe_pack(), true);
  auto plain = open_on_gpu(tinymoe_pack(), true);
  observed->model().set_observer(&count);
  const cuda::DeviceLayerStats before = cuda::device_layer_stats();
  const model::FloatBuffer a = run(*observed);
  const cuda::DeviceLayerStats after = cuda::device_layer_stats();
  const model::FloatBuffer b = run(*plain);
  const model::ModelConfig& c = plain->config();
  int64_t moe_layers = 0;
  for (int64_t l = 0; l < c.num_layers; ++l) moe_layers += c.layer_is_moe[static_cast<size_t>(l)];
  EXPECT_EQ(count.blocks, 6 * moe_layers);
  EXPECT_EQ(after.feed_forward_on_cpu - before.feed_forward_on_cpu, 6 * moe_layers);
  expect_agree(b, a, c.vocab_size, 1e-3, "under an observer");
}

// One sequence of 700 tokens then 3 decode steps: each query of the last
// 188 prefill rows and of the decode steps sees more keys than one chunk of
// the attention kernel (512), so the running maximum and sum are rescaled
// across chunks.
TEST(DeviceLayers, LongContextMatchesProductsOnly) {
  EQ_REQUIRE_GPU();
  const WithAndWithout p(tinymoe_pack());
  auto run_long = [](PackedModel& pm) {
    model::Model& m = pm.model();
    const std::vector<int32_t> text = test::corpus_tokens("c", 720);
    EXPECT_GE(text.size(), 703u);
    model::KvCache cache = m.new_cache(1, 704);
    model::FloatBuffer all = m.forward(std::vector<int32_t>(text.begin(), text.begin() + 700), 1, 700, cache);
    for (int step = 0; step < 3; ++step) {
      const model::FloatBuffer l = m.forward(std::vector<int32_t>{text[700 + step]}, 1, 1, cache);
      all.insert(all.end(), l.begin(), l.end());
    }
    return all;
  };
  const model::FloatBuffer a = run_long(*p.with), b = run_long(*p.without);
  expect_agree(b, a, p.with->config().vocab_size, 1e-5, "700 + 3 tokens");
}

// A cache that already holds positions stored without the runner (by the
// same pack opened with its layers on the CPU) is refused, not read as if
// its keys were on the GPU.
TEST(DeviceLayers, CacheFilledElsewhereIsRefused) {
  EQ_REQUIRE_GPU();
  const WithAndWithout p(tinymoe_pack());
  const std::vector<int32_t> text = test::corpus_tokens("c", 20);
  model::KvCache cache = p.without->model().new_cache(1, 32);
  (void)p.without->model().forward(std::vector<int32_t>(text.begin(), text.begin() + 16), 1, 16, cache);
  try {
    (void)p.with->model().forward(std::vector<int32_t>{text[16]}, 1, 1, cache);
    FAIL() << "a cache of 16 positions stored on the CPU was used by the GPU layers";
  } catch (const eq::Error& e) {
    EXPECT_NE(std::string(e.what()).find("stored without them"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace eq::exec
