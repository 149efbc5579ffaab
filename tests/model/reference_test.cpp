// The float32 forward against the HF transformers float32 references shipped
// with ../shared/models/{tinymoe,qwen3moe-small,deepseek_v3-small,
// deepseek_v3-small-fp8,glm4_moe-small,gpt_oss-small,gpt_oss-small-mxfp4,
// qwen3_next-small,qwen3_5_moe-small}
// (see each model's README): logits,
// router logits, top-k sets, MoE inputs and outputs, greedy generation, and
// bits per byte on the corpus files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <numeric>

#include <nlohmann/json.hpp>

#include "core/build_info.h"
#include "eval/perplexity.h"
#include "io/safetensors.h"
#include "io/text_file.h"
#include "io/tokens.h"
#include "model/forward.h"
#include "model/generate.h"
#include "test_support.h"

namespace eq::model {
namespace {

std::filesystem::path model_dir(const std::string& name) { return test::shared_dir() / "models" / name; }

nlohmann::json reference_json(const std::string& name) {
  std::ifstream in(model_dir(name) / "reference" / "reference.json");
  return nlohmann::json::parse(in);
}

struct Recorder : MoeObserver {
  std::map<int64_t, std::vector<float>> input, logits, output;
  std::map<int64_t, std::vector<int32_t>> ids;
  void on_moe_block(const MoeObservation& o) override {
    input[o.layer].assign(o.input, o.input + o.tokens * o.hidden);
    logits[o.layer].assign(o.router_logits, o.router_logits + o.tokens * o.num_experts);
    output[o.layer].assign(o.output, o.output + o.tokens * o.hidden);
    ids[o.layer].assign(o.expert_ids, o.expert_ids + o.tokens * o.top_k);
  }
};

// Over the reference's values: a reference may hold fewer rows (window 0 only).
template <typename A, typename B>
double max_abs_diff(const A& ours, const B& ref) {
  EXPECT_GE(ours.size(), ref.size());
  double m = 0;
  for (size_t i = 0; i < std::min(ours.size(), ref.size()); ++i)
    m = std::max(m, std::abs(static_cast<double>(ours[i]) - ref[i]));
  return m;
}

class ReferenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceTest, TensorsMatch) {
  EQ_REQUIRE_SHARED();
  const std::string name = GetParam();
  auto ref = io::SafetensorsFile::open((model_dir(name) / "reference" / "reference.safetensors").string());
  const io::TensorInfo* tok_info = ref->find("tokens");
  ASSERT_NE(tok_info, nullptr);
  ASSERT_EQ(tok_info->dtype, DType::kI32);
  const int64_t B = tok_info->shape[0], T = tok_info->shape[1];
  std::vector<int32_t> tokens(B * T);
  std::memcpy(tokens.data(), ref->view(*tok_info).data, tokens.size() * sizeof(int32_t));
  auto ref_f32 = [&](const std::string& t) { return ref->view(*ref->find(t)).to_f32(); };

  auto model = Model::open(model_dir(name).string());
  const ModelConfig& c = model->config();
  Recorder rec;
  model->set_observer(&rec);
  KvCache cache = model->new_cache(B, T);
  const auto logits = model->forward(tokens, B, T, cache);

  const std::vector<float> ref_logits = ref_f32("logits");
  ASSERT_EQ(logits.size(), ref_logits.size());
  double mean = 0;
  for (size_t i = 0; i < logits.size(); ++i) mean += std::abs(static_cast<double>(logits[i]) - ref_logits[i]);
  mean /= static_cast<double>(logits.size());
  const double max_logit = max_abs_diff(logits, ref_logits);
  std::printf("[%s] logits max abs %.3g, mean abs %.3g\n", name.c_str(), max_logit, mean);
  EXPECT_LE(max_logit, 2e-3);
  EXPECT_LE(mean, 2e-4);

  int64_t moe_layers = 0;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    ASSERT_EQ(c.layer_is_moe[l], ref->find("router_logits." + std::to_string(l)) != nullptr) << "layer " << l;
    if (!c.layer_is_moe[l]) continue;
    ++moe_layers;
    const auto rl = ref_f32("router_logits." + std::to_string(l));
    const auto rin = ref_f32("moe_input." + std::to_string(l));
    const auto rout = ref_f32("moe_output." + std::to_string(l));
    const double d_logits = max_abs_diff(rec.logits[l], rl);
    EXPECT_LE(d_logits, 1e-4) << "router_logits." << l;
    ASSERT_LE(rout.size(), rec.output[l].size());
    double num = 0, den = 0;
    for (size_t i = 0; i < rout.size(); ++i) {
      const double d = static_cast<double>(rec.output[l][i]) - rout[i];
      num += d * d;
      den += static_cast<double>(rout[i]) * rout[i];
    }
    const double rel = std::sqrt(num / den);
    EXPECT_LE(rel, 1e-4) << "moe_output." << l;
    const int64_t E = c.num_experts, K = c.top_k;
    int64_t mismatches = 0, near_ties = 0;
    if (const io::TensorInfo* ids = ref->find("topk_ids." + std::to_string(l))) {
      // The reference's chosen experts, as sets: equal for every token.
      ASSERT_EQ(ids->dtype, DType::kI32);
      std::vector<int32_t> want_all(B * T * K);
      std::memcpy(want_all.data(), ref->view(*ids).data, want_all.size() * sizeof(int32_t));
      for (int64_t t = 0; t < B * T; ++t) {
        std::vector<int32_t> want(want_all.begin() + t * K, want_all.begin() + (t + 1) * K),
            got(rec.ids[l].begin() + t * K, rec.ids[l].begin() + (t + 1) * K);
        std::sort(want.begin(), want.end());
        std::sort(got.begin(), got.end());
        mismatches += want != got;
      }
    } else {
      // Top-k of a softmax: the reference's own logit ranking decides, except at near ties.
      for (int64_t t = 0; t < B * T; ++t) {
        std::vector<int32_t> order(E);
        std::iota(order.begin(), order.end(), 0);
        const float* r = rl.data() + t * E;
        std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return r[a] > r[b]; });
        std::vector<int32_t> want(order.begin(), order.begin() + K), got(rec.ids[l].begin() + t * K,
                                                                          rec.ids[l].begin() + (t + 1) * K);
        std::sort(want.begin(), want.end());
        std::sort(got.begin(), got.end());
        if (want == got) continue;
        if (std::abs(r[order[K - 1]] - r[order[K]]) <= 1e-4) {
          ++near_ties;
          continue;
        }
        ++mismatches;
      }
    }
    EXPECT_EQ(mismatches, 0) << "layer " << l;
    std::printf("[%s] layer %lld: router max abs %.3g, moe_input max abs %.3g, moe_output rel L2 %.3g, "
                "top-k near ties %lld\n",
                name.c_str(), static_cast<long long>(l), d_logits, max_abs_diff(rec.input[l], rin), rel,
                static_cast<long long>(near_ties));
  }
  EXPECT_EQ(moe_layers, c.num_moe_layers());
}

TEST_P(ReferenceTest, GreedyGeneration) {
  EQ_REQUIRE_SHARED();
  const std::string name = GetParam();
  const nlohmann::json j = reference_json(name)["greedy"];
  const std::vector<int32_t> prompt = j["prompt_ids"].get<std::vector<int32_t>>();
  const std::vector<int32_t> want = j["new_ids"].get<std::vector<int32_t>>();
  auto model = Model::open(model_dir(name).string());
  GenerateOptions opt;
  opt.max_new_tokens = static_cast<int64_t>(want.size());
  const GenerateResult got = generate(*model, prompt, opt);
  EXPECT_EQ(got.tokens, want);
}

INSTANTIATE_TEST_SUITE_P(SharedModels, ReferenceTest,
                         ::testing::Values("tinymoe", "qwen3moe-small", "deepseek_v3-small", "deepseek_v3-small-fp8",
                                           "glm4_moe-small", "gpt_oss-small", "gpt_oss-small-mxfp4",
                                           "qwen3_next-small", "qwen3_5_moe-small"),
                         [](const auto& info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

// Bits per byte over whole corpus files, window rule of the README.
struct BpbCase {
  std::string model, file;
};

class BitsPerByteTest : public ::testing::TestWithParam<BpbCase> {};

TEST_P(BitsPerByteTest, MatchesReference) {
  EQ_REQUIRE_SHARED();
  const BpbCase& p = GetParam();
  const double want = reference_json(p.model)["bits_per_byte"][p.file]["bits_per_byte"].get<double>();
  auto model = Model::open(model_dir(p.model).string());
  const std::vector<int32_t> tokens =
      io::bytes_to_tokens(io::read_file_bytes((test::shared_dir() / "corpus" / p.file).string()));
  const eval::PerplexityResult r = eval::perplexity(*model, {tokens});
  std::printf("[%s] %s: bpb %.6f (reference %.6f), %.1f s\n", p.model.c_str(), p.file.c_str(), r.bits_per_token(),
              want, r.seconds);
  EXPECT_NEAR(r.bits_per_token(), want, 0.002);
}

std::vector<BpbCase> bpb_cases() {
  std::vector<BpbCase> v;
  if (eq::built_with_sanitizers()) {
    // Under ASan+UBSan (5-10x slower) one whole file exercises the same code; the
    // plain build checks every file.
    v.push_back({"tinymoe", "eval_python.txt"});
    return v;
  }
  for (const char* f : {"eval_python.txt", "eval_c.txt", "eval_prose.txt", "eval_troff.txt", "calib_mixed.txt"})
    v.push_back({"tinymoe", f});
  // qwen3moe-small is ~2.5x slower per token: one file here, the rest via the CLI
  // (docs/benchmarks-history.md, "Bits per byte on the corpus").
  v.push_back({"qwen3moe-small", "eval_python.txt"});
  // Multi-head latent attention and the grouped sigmoid router (the FP8 twin
  // read through its block scales), and partial RoPE with q/k norm and biases.
  // Attention sinks, sliding-window layers and YaRN with biased top-k-softmax
  // routing and clamped SwiGLU experts (the MXFP4 twin read through its blocks
  // and scales).
  for (const char* m : {"deepseek_v3-small", "deepseek_v3-small-fp8", "glm4_moe-small", "gpt_oss-small",
                        "gpt_oss-small-mxfp4"})
    for (const char* f : {"eval_c.txt", "eval_prose.txt"}) v.push_back({m, f});
  // Gated delta net layers beside gated attention, zero-centred norms, a gated shared expert.
  for (const char* m : {"qwen3_next-small", "qwen3_5_moe-small"})
    for (const char* f : {"eval_python.txt", "eval_c.txt"}) v.push_back({m, f});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Corpus, BitsPerByteTest, ::testing::ValuesIn(bpb_cases()), [](const auto& info) {
  std::string s = info.param.model + "_" + info.param.file;
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
});

}  // namespace
}  // namespace eq::model
