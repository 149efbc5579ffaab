// The decode expert-MLP kernel (MlpKernel::kDecode) in the packed executor:
// dispatch strategies stay equal with it enabled, results are the same bits
// for any thread count and any grouping of rows, and it agrees with the batch
// kernel up to the int8 rounding of the activations.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "core/thread_pool.h"
#include "exec/dispatch.h"
#include "exec/expert_mlp.h"
#include "exec/packed_model.h"
#include "exec/packed_moe_block.h"
#include "exec/runtime_config.h"
#include "core/error.h"
#include "model/kv_cache.h"
#include "packed_fixture.h"

namespace eq::exec {
namespace {

// Prefill of 2 x 24 tokens, then 6 decode steps of M = 2: every logit row.
model::FloatBuffer run_logits(PackedModel& pm) {
  model::Model& m = pm.model();
  const std::vector<int32_t> text = test::corpus_tokens("c", 400);
  std::vector<int32_t> prompt(text.begin(), text.begin() + 48);
  model::KvCache cache = m.new_cache(2, 64);
  model::FloatBuffer all = m.forward(prompt, 2, 24, cache);
  for (int step = 0; step < 6; ++step) {
    std::vector<int32_t> next = {text[200 + step], text[300 + step]};
    const auto l = m.forward(next, 2, 1, cache);
    all.insert(all.end(), l.begin(), l.end());
  }
  return all;
}

double rel_l2(const model::FloatBuffer& a, const model::FloatBuffer& b) {
  double d = 0, m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    m += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(d / m);
}

std::vector<std::shared_ptr<const Dispatch>> strategies() {
  return {make_dispatch(DispatchKind::kMaskCombine, 0), make_dispatch(DispatchKind::kSorted, 0),
          make_dispatch(DispatchKind::kAuto, 0), make_dispatch(DispatchKind::kAuto, 64)};
}

const std::string& decode_pack();

// One expert's decode MLP on `rows` rows of x at once, and on each row alone.
std::pair<std::vector<float>, std::vector<float>> decode_together_and_alone(const ExpertWeights& w,
                                                                           const quant::FormatTraits* f,
                                                                           const std::vector<float>& x, int64_t rows,
                                                                           int64_t H) {
  std::vector<float> together(x.size()), alone(x.size());
  const ExpertBatch all{&w, f, x.data(), together.data(), rows};
  run_expert_batches({&all, 1}, MlpKernel::kDecode);
  std::vector<ExpertBatch> singles;
  for (int64_t r = 0; r < rows; ++r) singles.push_back({&w, f, x.data() + r * H, alone.data() + r * H, 1});
  run_expert_batches(singles, MlpKernel::kDecode);
  return {together, alone};
}

void check_strategies(const std::string& packed) {
  auto pm = PackedModel::open(packed, test::open_options(false));
  pm->set_dispatch(make_dispatch(DispatchKind::kSorted, 0));
  pm->set_mlp_kernel_thresholds({.decode_max_tokens = 0});
  const model::FloatBuffer batch = run_logits(*pm);
  // Every call (prefill M = 48 too) through the decode kernel.
  pm->set_mlp_kernel_thresholds({.decode_max_tokens = 1000});
  const model::FloatBuffer decode = run_logits(*pm);
  const double err = rel_l2(decode, batch);
  std::printf("  decode vs batch kernel: relative L2 of the logits %.3g\n", err);
  EXPECT_GT(err, 0.0);  // the decode kernel really ran (int8 activations)
  EXPECT_LT(err, 2e-2);
  for (const auto& d : strategies()) {
    pm->set_dispatch(d);
    const model::FloatBuffer got = run_logits(*pm);
    ASSERT_EQ(got.size(), decode.size());
    double max_diff = 0, max_ref = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      max_diff = std::max(max_diff, std::fabs(static_cast<double>(got[i]) - decode[i]));
      max_ref = std::max(max_ref, std::fabs(static_cast<double>(decode[i])));
    }
    std::printf("  %-12s max |logit diff| / max |logit| vs sorted (decode kernel) = %.3g\n", d->name().c_str(),
                max_diff / max_ref);
    // Bit-identical: every row's result depends only on (expert, x row), and
    // SiLU/softmax no longer depend on where a row lives (float_kernels_impl.h).
    EXPECT_EQ(max_diff, 0.0) << d->name();
  }
}

TEST(DecodeMlp, StrategiesAgreeAndDecodeIsCloseToBatch) { check_strategies(test::mixed_pack()); }
TEST(DecodeMlp, StrategiesAgreeWithoutTrellis) { check_strategies(decode_pack()); }

// A uniform int4 pack (the mixed pack, with its trellis2 and int8_row
// experts, is checked the same way below).
const std::string& decode_pack() {
  static const std::string p = test::pack_once("decode-int4", "int4_g32");
  return p;
}

void check_same_bits(const std::string& packed) {
  auto pm = PackedModel::open(packed, test::open_options(false));
  pm->set_mlp_kernel_thresholds({.decode_max_tokens = 64});
  pm->set_dispatch(make_dispatch(DispatchKind::kSorted, 0));
  const model::ModelConfig& c = pm->config();
  std::vector<float> x(static_cast<size_t>(16 * c.hidden_size));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  const int64_t layer = pm->layers().front().layer;
  std::vector<float> first;
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    std::vector<float> a(x.size()), b(x.size());
    pm->block(layer).forward({layer, 2, 8, 0, nullptr}, x.data(), a.data());
    pm->block(layer).forward({layer, 16, 1, 3, nullptr}, x.data(), b.data());
    EXPECT_EQ(a, b) << threads << " threads";
    if (first.empty()) first = a;
    EXPECT_EQ(a, first) << threads << " threads";
  }
  set_num_threads(0);
}

TEST(DecodeMlp, SameBitsForAnyThreadCount) { check_same_bits(decode_pack()); }
TEST(DecodeMlp, SameBitsForAnyThreadCountMixedWithTrellis) { check_same_bits(test::mixed_pack()); }

// The trellis decode kernel (its own rotated input per matrix) through
// run_expert_batches: 16 rows at once equal each row alone, with 1 and 2
// threads, and agree with a float64 expert MLP on the dequantized weights.
TEST(DecodeMlp, TrellisExpertRowsThreadsAndFloat64) {
  auto pm = PackedModel::open(test::mixed_pack(), test::open_options(false));
  const PackedLayer& layer = pm->layers().front();
  const int64_t H = pm->config().hidden_size, rows = 16;
  std::vector<float> x(static_cast<size_t>(rows * H));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) + (i % 97 == 3 ? 6.0f : 0.0f);
  bool found = false;
  for (const BitGroup& g : layer.groups) {
    if (g.format->family != "trellis") continue;
    found = true;
    ASSERT_NE(g.format->gemv, nullptr);
    const ExpertWeights& w = g.slots.front();
    std::vector<float> first;
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      const auto [together, alone] = decode_together_and_alone(w, g.format, x, rows, H);
      EXPECT_EQ(together, alone) << threads << " threads";
      if (first.empty()) first = together;
      EXPECT_EQ(together, first) << threads << " threads";
    }
    set_num_threads(0);
    // float64 SwiGLU MLP on the dequantized weights.
    const int64_t I = w.gate.rows;
    std::vector<float> wg(static_cast<size_t>(I * H)), wu(wg.size()), wd(wg.size());
    g.format->dequantize(w.gate, wg.data());
    g.format->dequantize(w.up, wu.data());
    g.format->dequantize(w.down, wd.data());
    double d = 0, m = 0;
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<double> h(static_cast<size_t>(I));
      for (int64_t i = 0; i < I; ++i) {
        double a = 0, b = 0;
        for (int64_t k = 0; k < H; ++k) a += double{wg[i * H + k]} * x[r * H + k], b += double{wu[i * H + k]} * x[r * H + k];
        h[i] = a / (1.0 + std::exp(-a)) * b;
      }
      for (int64_t n = 0; n < H; ++n) {
        double y = 0;
        for (int64_t i = 0; i < I; ++i) y += double{wd[n * I + i]} * h[i];
        d += std::pow(first[r * H + n] - y, 2), m += y * y;
      }
    }
    std::printf("  %s decode kernel vs float64 expert MLP: relative L2 %.3g\n", std::string(g.format->name).c_str(),
                std::sqrt(d / m));
    EXPECT_LT(std::sqrt(d / m), 2e-2);
  }
  EXPECT_TRUE(found) << "the mixed pack has no trellis group";
}

// One row's result depends only on (expert, x row): the experts of a layer on
// 16 rows at once, and on each row alone, give the same bits.
TEST(DecodeMlp, RowsAreIndependent) {
  auto pm = PackedModel::open(test::mixed_pack(), test::open_options(false));
  const PackedLayer& layer = pm->layers().front();
  const int64_t H = pm->config().hidden_size, rows = 16;
  std::vector<float> x(static_cast<size_t>(rows * H));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  for (const BitGroup& g : layer.groups) {
    if (!g.format->gemv) continue;
    SCOPED_TRACE(std::string(g.format->name));
    const ExpertWeights& w = g.slots.front();
    const auto [together, alone] = decode_together_and_alone(w, g.format, x, rows, H);
    EXPECT_EQ(together, alone);
    // And it is the same MLP as the batch kernel, up to the int8 rounding of x and h.
    std::vector<float> batch(x.size());
    const ExpertBatch ref{&w, g.format, x.data(), batch.data(), rows};
    run_expert_batches({&ref, 1}, MlpKernel::kBatch);
    double d = 0, m = 0;
    for (size_t i = 0; i < x.size(); ++i) d += std::pow(together[i] - batch[i], 2), m += std::pow(batch[i], 2);
    std::printf("  %-10s decode vs batch expert MLP: relative L2 %.3g\n", std::string(g.format->name).c_str(),
                std::sqrt(d / m));
    EXPECT_LT(std::sqrt(d / m), 2e-2);
  }
}

}  // namespace
}  // namespace eq::exec

namespace eq::exec {
namespace {

TEST(DecodeMlp, RuntimeConfigReadsAndWritesMlpKernels) {
  const RuntimeConfig none = parse_runtime_config(nlohmann::json::parse(R"({"version":1,"sort_cutoff":8})"), "x.json");
  EXPECT_EQ(none.mlp_kernels.decode_max_tokens, kDefaultDecodeMaxTokens);
  const RuntimeConfig r = parse_runtime_config(
      nlohmann::json::parse(R"({"version":1,"sort_cutoff":8,"mlp_kernels":{"decode_max_tokens":3}})"), "x.json");
  EXPECT_EQ(r.mlp_kernels.decode_max_tokens, 3);
  EXPECT_EQ(parse_runtime_config(runtime_config_to_json(r), "round trip").mlp_kernels.decode_max_tokens, 3);
  EXPECT_THROW(parse_runtime_config(
                   nlohmann::json::parse(R"({"version":1,"sort_cutoff":8,"mlp_kernels":{"decode_max_tokens":-1}})"), "x"),
               Error);
  EXPECT_THROW(parse_runtime_config(nlohmann::json::parse(R"({"version":1,"sort_cutoff":8,"mlp_kernels":4})"), "x"), Error);
  EXPECT_EQ(select_mlp_kernel(3, r.mlp_kernels), MlpKernel::kDecode);
  // small_batch_max_tokens absent: the built-in default.
  EXPECT_EQ(r.mlp_kernels.small_batch_max_tokens, kDefaultSmallBatchMaxTokens);
  EXPECT_EQ(select_mlp_kernel(4, r.mlp_kernels), MlpKernel::kSmallBatch);
  EXPECT_EQ(select_mlp_kernel(kDefaultSmallBatchMaxTokens + 1, r.mlp_kernels), MlpKernel::kBatch);
  const RuntimeConfig s = parse_runtime_config(
      nlohmann::json::parse(
          R"({"version":1,"sort_cutoff":8,"mlp_kernels":{"decode_max_tokens":2,"small_batch_max_tokens":20}})"),
      "x.json");
  EXPECT_EQ(s.mlp_kernels.small_batch_max_tokens, 20);
  EXPECT_EQ(parse_runtime_config(runtime_config_to_json(s), "round trip").mlp_kernels.small_batch_max_tokens, 20);
  EXPECT_THROW(parse_runtime_config(nlohmann::json::parse(
                                        R"({"version":1,"sort_cutoff":8,"mlp_kernels":{"small_batch_max_tokens":1.5}})"),
                                    "x"),
               Error);
}

}  // namespace
}  // namespace eq::exec

namespace eq::exec {
namespace {

// The small-batch variant (up to 4 rows of an expert per weight pass) gives
// every row exactly the decode kernel's bits: per expert on 1..16 rows, and
// for whole forward passes with any dispatch.
TEST(SmallBatchMlp, SameBitsAsDecodeForEveryFormat) {
  auto pm = PackedModel::open(test::mixed_pack(), test::open_options(false));
  const PackedLayer& layer = pm->layers().front();
  const int64_t H = pm->config().hidden_size;
  for (const BitGroup& g : layer.groups) {
    if (!g.format->gemv) continue;
    SCOPED_TRACE(std::string(g.format->name));
    for (int64_t rows : {1, 3, 4, 7, 16}) {
      std::vector<float> x(static_cast<size_t>(rows * H));
      for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.21f * static_cast<float>(i)) * (1.0f + (i % 5));
      std::vector<float> decode(x.size()), small(x.size());
      const ExpertBatch d{&g.slots.front(), g.format, x.data(), decode.data(), rows};
      run_expert_batches({&d, 1}, MlpKernel::kDecode);
      const ExpertBatch s{&g.slots.front(), g.format, x.data(), small.data(), rows};
      run_expert_batches({&s, 1}, MlpKernel::kSmallBatch);
      EXPECT_EQ(small, decode) << rows << " rows";
    }
  }
}

TEST(SmallBatchMlp, ForwardEqualsDecodeWithEveryDispatch) {
  auto pm = PackedModel::open(test::mixed_pack(), test::open_options(false));
  pm->set_dispatch(make_dispatch(DispatchKind::kSorted, 0));
  pm->set_mlp_kernel_thresholds({.decode_max_tokens = 1000, .small_batch_max_tokens = 1000});
  const model::FloatBuffer decode = run_logits(*pm);
  pm->set_mlp_kernel_thresholds({.decode_max_tokens = 1, .small_batch_max_tokens = 1000});
  for (const auto& d : strategies()) {
    pm->set_dispatch(d);
    EXPECT_EQ(run_logits(*pm), decode) << d->name();
  }
  EXPECT_EQ(select_mlp_kernel(1, {.decode_max_tokens = 1, .small_batch_max_tokens = 64}), MlpKernel::kDecode);
  EXPECT_EQ(select_mlp_kernel(2, {.decode_max_tokens = 1, .small_batch_max_tokens = 64}), MlpKernel::kSmallBatch);
  EXPECT_EQ(select_mlp_kernel(64, {.decode_max_tokens = 1, .small_batch_max_tokens = 64}), MlpKernel::kSmallBatch);
  EXPECT_EQ(select_mlp_kernel(65, {.decode_max_tokens = 1, .small_batch_max_tokens = 64}), MlpKernel::kBatch);
}

}  // namespace
}  // namespace eq::exec
