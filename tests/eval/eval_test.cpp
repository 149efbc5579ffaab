// lib/eval: quality metrics, collapse heuristics, latency harness structure,
// report rendering, and `expertquant eval` end to end. No timing thresholds.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "eval/collapse.h"
#include "eval/latency.h"
#include "eval/perplexity.h"
#include "eval/quality.h"
#include "eval/report.h"
#include "exec/moe_inputs.h"
#include "exec/packed_model.h"
#include "exec/runtime_config.h"
#include "io/text_file.h"
#include "io/tokens.h"
#include "exec/packed_fixture.h"

namespace eq::eval {
namespace {

std::vector<LabeledTokens> two_texts(size_t n) {
  std::vector<LabeledTokens> out;
  for (const char* d : {"c", "prose"}) {
    out.push_back({d, test::corpus_tokens(d, n)});
  }
  return out;
}

TEST(Collapse, RepeatedNgramCoverage) {
  std::vector<int32_t> loop;
  for (int i = 0; i < 60; ++i) loop.push_back("abcdef"[i % 6]);
  EXPECT_GT(repeated_ngram_coverage(loop, 8), 0.95);
  std::vector<int32_t> distinct;
  for (int i = 0; i < 60; ++i) distinct.push_back(i);
  EXPECT_EQ(repeated_ngram_coverage(distinct, 8), 0.0);
  EXPECT_EQ(repeated_ngram_coverage({1, 2}, 8), 0.0);
}

TEST(Collapse, ClassDivergence) {
  const auto a = io::bytes_to_tokens("the quick brown fox jumps over the lazy dog\n");
  EXPECT_NEAR(class_divergence(a, a, true, 256), 0.0, 1e-12);
  const auto digits = io::bytes_to_tokens("0123456789012345678901234567890123456789012");
  EXPECT_GT(class_divergence(a, digits, true, 256), 0.5);
  EXPECT_LE(class_divergence(a, digits, true, 256), 1.0);
}

TEST(Quality, Bf16PackMatchesTheReference) {
  auto pm = exec::PackedModel::open(test::bf16_pack(), test::open_options(false));
  const auto texts = two_texts(300);
  QualityOptions o;
  o.ctx = 128;
  const QualityResult q = compare_quality(*pm, texts, o);
  EXPECT_EQ(q.overall.scored_tokens, 2 * (300 - 3));  // windows 128, 128, 44: one unscored token each
  EXPECT_NEAR(q.overall.bits_packed, q.overall.bits_reference, 1e-5);
  EXPECT_LT(q.overall.kl_max, 1e-8);
  EXPECT_EQ(q.overall.top1_agreement, 1.0);
  ASSERT_EQ(q.layers.size(), 4u);
  for (const LayerError& e : q.layers) {
    EXPECT_LT(e.rel_l2, 1e-5) << "layer " << e.layer;
    EXPECT_GT(e.cosine_min, 0.99999) << "layer " << e.layer;
  }
  // The reference bits equal eval::perplexity's (same window rule).
  pm->use_reference(true);
  PerplexityOptions po;
  po.ctx = 128;
  const PerplexityResult p = perplexity(pm->model(), {texts[0].tokens}, po);
  EXPECT_NEAR(q.texts[0].bits_reference, p.bits_per_token(), 1e-6);
  pm->use_reference(false);
}

TEST(Quality, MixedPackHasMeasurableError) {
  auto pm = exec::PackedModel::open(test::mixed_pack(), test::open_options(false));
  QualityOptions o;
  o.ctx = 128;
  const QualityResult q = compare_quality(*pm, two_texts(260), o);
  EXPECT_GT(q.overall.kl_mean, 0.0);
  EXPECT_GE(q.overall.kl_p99, q.overall.kl_mean * 0.5);
  EXPECT_GT(q.overall.top1_agreement, 0.3);
  for (const LayerError& e : q.layers) {
    EXPECT_GT(e.rel_l2, 0.0);
    EXPECT_LT(e.rel_l2, 1.0);
  }
}

TEST(Latency, SweepFillsEveryStrategyAndPoint) {
  auto pm = exec::PackedModel::open(test::mixed_pack(), test::open_options(false));
  const auto text = two_texts(200)[0].tokens;
  const exec::MoeInputs in = exec::capture_moe_inputs(*pm, text, 8, 64);
  LatencyOptions o;
  o.sweep = {1, 8};
  o.reps = 1;
  o.warmup = 0;
  o.decode_tokens = 4;
  o.decode_prompt = 4;
  o.prefill_tokens = 16;
  const std::vector<std::shared_ptr<const exec::Dispatch>> ds = {
      exec::make_dispatch(exec::DispatchKind::kMaskCombine, 0), exec::make_dispatch(exec::DispatchKind::kSorted, 0),
      exec::make_dispatch(exec::DispatchKind::kAuto, 4)};
  const LatencyResult r = measure_latency(*pm, in, text, ds, o);
  ASSERT_EQ(r.strategies.size(), 3u);
  for (const auto& s : r.strategies) {
    ASSERT_EQ(s.points.size(), 2u);
    for (const auto& p : s.points) {
      EXPECT_EQ(p.per_layer.size(), 4u);
      EXPECT_GT(p.moe_step.median, 0.0);
      EXPECT_GT(p.model_step.median, 0.0);
      EXPECT_GT(p.bytes.weights, 0u);
    }
    EXPECT_GT(s.decode_tokens_per_second, 0.0);
    EXPECT_GT(s.prefill_tokens_per_second, 0.0);
  }
  EXPECT_FALSE(r.strategies[2].points[0].sorted_branch);  // auto, M = 1 <= 4
  EXPECT_TRUE(r.strategies[2].points[1].sorted_branch);   // auto, M = 8 > 4
  // Mask-combine streams every group's weights: more bytes than sorted.
  EXPECT_GT(r.strategies[0].points[1].bytes.total(), r.strategies[1].points[1].bytes.total());
}

// Runs the CLI once for the report tests below.
const std::filesystem::path& cli_report_dir() {
  static const std::filesystem::path dir = [] {
    const auto d = test::temp_dir("eval-cli");
    const std::string text = test::shared_dir().empty()
                                 ? (test::data_dir() / "corpus" / "eval_python.txt.zst").string()
                                 : (test::shared_dir() / "corpus" / "eval_python.txt").string();
    const std::string cmd = test::binary() + " eval --packed " + test::mixed_pack() + " --model " +
                            test::tinymoe_path() + " --text " + text +
                            " --max-tokens 400 --ctx 128 --sweep 1,4 --reps 1 --warmup 0 --decode-tokens 4"
                            " --prefill-tokens 16 --prompts-per-domain 1 --new-tokens 16 --baseline " +
                            test::bf16_pack() + " --json-out " + (d / "report.json").string() + " --html " +
                            (d / "report.html").string();
    std::string out;
    const int rc = test::run_command(cmd, &out);
    std::ofstream((d / "stdout.txt").string()) << out;
    if (rc != 0) ADD_FAILURE() << cmd << "\n" << out;
    return d;
  }();
  return dir;
}

TEST(EvalCli, WritesJsonWithEveryStrategy) {
  std::ifstream f(cli_report_dir() / "report.json");
  ASSERT_TRUE(f.good());
  const nlohmann::json j = nlohmann::json::parse(f);
  EXPECT_EQ(j["schema"], "expertquant.eval_report");
  EXPECT_EQ(j["version"], 1);
  EXPECT_TRUE(j["quality"]["overall"]["kl_mean"].is_number());
  EXPECT_EQ(j["collapse"]["total"], 1);
  ASSERT_EQ(j["latency"]["strategies"].size(), 3u);
  EXPECT_EQ(j["latency"]["strategies"][0]["dispatch"], "mask-combine");
  EXPECT_EQ(j["latency"]["ratios"]["mask_combine_over_sorted"].size(), 2u);
  EXPECT_EQ(j["baseline_latency"]["strategies"].size(), 3u);
  EXPECT_EQ(j["packed_over_baseline"].size(), 6u);
  EXPECT_EQ(j["packed"]["classes"].size(), 4u);
  std::ifstream so(cli_report_dir() / "stdout.txt");
  std::stringstream ss;
  ss << so.rdbuf();
  EXPECT_NE(ss.str().find("mask-combine"), std::string::npos);
  EXPECT_NE(ss.str().find("collapse "), std::string::npos);
}

// Every phase of the run is measured apart, in the order it ran (the
// reference pass reads the source, the latency sweep only the pack).
TEST(EvalCli, ReportsEachPhasesTimeReadsAndMemory) {
  std::ifstream f(cli_report_dir() / "report.json");
  ASSERT_TRUE(f.good());
  const nlohmann::json j = nlohmann::json::parse(f);
  const std::vector<std::string> want = {"load", "quality reference", "quality packed", "collapse", "source check",
                                         "latency"};
  ASSERT_EQ(j["phases"].size(), want.size());
  double seconds = 0;
  uint64_t peak = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const auto& p = j["phases"][i];
    EXPECT_EQ(p["name"], want[i]);
    EXPECT_GE(p["seconds"].get<double>(), 0.0);
    EXPECT_GE(p["cpu_seconds"].get<double>(), 0.0);
    EXPECT_TRUE(p["read_bytes"].is_number_unsigned());
    EXPECT_GT(p["peak_rss_bytes"].get<uint64_t>(), 0u);
    EXPECT_GE(p["peak_rss_bytes"].get<uint64_t>(), p["rss_anon_bytes"].get<uint64_t>());
    seconds += p["seconds"].get<double>();
    peak = std::max(peak, p["peak_rss_bytes"].get<uint64_t>());
  }
  EXPECT_LE(seconds, j["seconds"].get<double>());
  EXPECT_GE(j["machine"]["peak_rss_bytes"].get<uint64_t>(), peak);
  std::ifstream so(cli_report_dir() / "stdout.txt");
  std::stringstream ss;
  ss << so.rdbuf();
  EXPECT_NE(ss.str().find("quality reference"), std::string::npos);
}

// `eval --packed OUT` without --model on a pack whose source folder no longer
// exists: the packed model's own bits per byte, latency, comparisons skipped.
TEST(EvalCli, PackedAloneReportsItsOwnBitsAndSkipsTheComparison) {
  const test::StandalonePacks& p = test::standalone_packs();
  const auto d = test::temp_dir("eval-alone");
  const std::string text = (test::data_dir() / "corpus" / "eval_prose.txt.zst").string();
  const std::string cmd = test::binary() + " eval --packed " + p.mixed + " --text " + text +
                          " --max-tokens 300 --ctx 128 --sweep 1,4 --reps 1 --warmup 0 --decode-tokens 4"
                          " --prefill-tokens 16 --json-out " + (d / "report.json").string() + " 2>&1";
  std::string out;
  ASSERT_EQ(test::run_command(cmd, &out), 0) << cmd << "\n" << out;
  EXPECT_NE(out.find("skipped"), std::string::npos) << out;
  std::ifstream f(d / "report.json");
  ASSERT_TRUE(f.good());
  const nlohmann::json j = nlohmann::json::parse(f);
  EXPECT_TRUE(j["model"].is_null());
  EXPECT_EQ(j["comparison"]["status"], "skipped");
  EXPECT_TRUE(j["comparison"]["reason"].is_string());
  const auto& overall = j["quality"]["overall"];
  EXPECT_EQ(overall["scored_tokens"], 300 - 3);  // windows 128, 128, 44
  EXPECT_TRUE(overall["bits_reference"].is_null());
  EXPECT_TRUE(overall["kl_mean"].is_null());
  EXPECT_EQ(j["quality"]["compared"], false);
  EXPECT_TRUE(j["quality"]["layers"].empty());
  EXPECT_EQ(j["collapse"]["total"], 0);
  EXPECT_EQ(j["latency"]["strategies"].size(), 3u);

  // The same bits as the library's packed-alone score of the same text,
  // with the expert-MLP kernels the CLI takes from the runtime config (its
  // 128-token windows are small-batch calls under the default thresholds).
  auto pm = exec::PackedModel::open(p.mixed, test::open_options(false, ""));
  pm->set_mlp_kernel_thresholds(exec::default_runtime_config().mlp_kernels);
  QualityOptions qo;
  qo.ctx = 128;
  std::vector<int32_t> toks = io::bytes_to_tokens(io::read_file_bytes(text));
  toks.resize(300);
  const std::vector<LabeledTokens> texts = {LabeledTokens{"prose", toks}};
  const QualityResult q = compare_quality(*pm, texts, qo);
  std::printf("  eval --packed alone: bpb %.6f (library %.6f)\n", overall["bits_packed"].get<double>(),
              q.overall.bits_packed);
  EXPECT_NEAR(overall["bits_packed"].get<double>(), q.overall.bits_packed, 1e-9);
}

TEST(EvalCli, GenerateRunsThePackedFolderAlone) {
  const test::StandalonePacks& p = test::standalone_packs();
  const std::string cmd = test::binary() + " generate --packed " + p.attn +
                          " --prompt 'def main():' -n 12 --json 2>&1";
  std::string out;
  ASSERT_EQ(test::run_command(cmd, &out), 0) << cmd << "\n" << out;
  const nlohmann::json j = nlohmann::json::parse(out.substr(out.find('{')));
  EXPECT_EQ(j["tokens"].size(), 12u);
  EXPECT_TRUE(j["model"].is_null());
}

TEST(EvalCli, HtmlIsSelfContained) {
  std::ifstream f(cli_report_dir() / "report.html");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string html = ss.str();
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("id='quality'"), std::string::npos);
  EXPECT_NE(html.find("aria-label='class heatmap'"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
}

TEST(EvalCli, HtmlRendersInHeadlessChromium) {
  const char* chromium = "/usr/bin/chromium";
  if (!std::filesystem::exists(chromium)) GTEST_SKIP() << "/usr/bin/chromium not installed: HTML render test skipped";
  const auto png = cli_report_dir() / "report.png";
  std::string out;
  const int rc = test::run_command(std::string(chromium) +
                                       " --headless --no-sandbox --disable-gpu --window-size=1200,2000 --screenshot=" +
                                       png.string() + " file://" + (cli_report_dir() / "report.html").string(),
                                   &out);
  EXPECT_EQ(rc, 0) << out;
  ASSERT_TRUE(std::filesystem::exists(png)) << out;
  EXPECT_GT(std::filesystem::file_size(png), 10000u);
}

}  // namespace
}  // namespace eq::eval
