// A uniform mxfp4 pack of ../shared/models/gpt_oss-small-mxfp4 (the MXFP4
// release layout, whose expert codes and scales are imported bit for bit) in
// the packed executor: stacked expert biases, the clamped SwiGLU and the
// biased top-k-softmax router, behind sink and sliding-window attention.
// Each packed expert through its format's float matmul equals the release's
// expert; each packed MoE block (integer kernels: int8 activations) stays
// within that rounding of the reference block; the whole model follows the
// reference logits under every dispatch strategy, and decode through the
// window follows prefill.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "exec/dispatch.h"
#include "exec/expert_mlp.h"
#include "exec/packed_model.h"
#include "io/safetensors.h"
#include "model/expert_reader.h"
#include "model/mlp.h"
#include "packed_fixture.h"

namespace eq::exec {
namespace {

std::string gpt_oss_mxfp4() { return (test::shared_dir() / "models" / "gpt_oss-small-mxfp4").string(); }

std::unique_ptr<PackedModel> open_uniform_pack() {
  const auto dir = test::temp_dir("gpt_oss_pack");
  pack::PackRequest rq;
  rq.model_path = gpt_oss_mxfp4();
  rq.out_path = (dir / "packed").string();
  rq.uniform_format = "mxfp4";
  rq.force = true;
  pack::run_pack(rq);
  return PackedModel::open(rq.out_path, test::open_options(false, gpt_oss_mxfp4()));
}

double rel_l2(const float* got, const std::vector<float>& want) {
  double d = 0, n = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    d += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    n += double(want[i]) * want[i];
  }
  return std::sqrt(d / n);
}

// Each packed MoE block on the reference's own block input (window 0): the
// reference's block output within the int8 activation rounding, under every
// dispatch strategy. The float32 reference block on the same input is the
// control (float rounding only).
TEST(GptOssPack, PackedMoeBlocksMatchTheReferenceBlocks) {
  EQ_REQUIRE_SHARED();
  auto ref = io::SafetensorsFile::open(gpt_oss_mxfp4() + "/reference/reference.safetensors");
  auto pm = open_uniform_pack();
  model::Model& m = pm->model();
  const model::ModelConfig& c = m.config();
  auto source = model::Model::open(gpt_oss_mxfp4());
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::vector<float> x = ref->view(*ref->find("moe_input." + std::to_string(l))).to_f32();
    const std::vector<float> want = ref->view(*ref->find("moe_output." + std::to_string(l))).to_f32();
    const int64_t rows = static_cast<int64_t>(x.size()) / c.hidden_size;
    const model::MoeCall call{l, 1, rows, 0, nullptr};
    std::vector<float> out(x.size());
    source->moe_block(l).forward(call, x.data(), out.data());
    const double control = rel_l2(out.data(), want);
    EXPECT_LT(control, 1e-5) << "reference block, layer " << l;
    for (auto kind : {DispatchKind::kSorted, DispatchKind::kMaskCombine, DispatchKind::kAuto}) {
      pm->set_dispatch(make_dispatch(kind, 0));
      std::fill(out.begin(), out.end(), 0.0f);
      m.moe_block(l).forward(call, x.data(), out.data());
      const double r = rel_l2(out.data(), want);
      std::printf("  layer %lld %-12s packed block rel L2 %.3g (reference block %.3g)\n", (long long)l,
                  make_dispatch(kind, 0)->name().c_str(), r, control);
      EXPECT_LT(r, 0.015) << "layer " << l << " dispatch " << int(kind);
    }
  }
}

// Every packed expert through its format's own float matmul (run_expert) on
// the reference's block inputs: the float32 reference expert (the release's
// dequantized weights, biases, clamped SwiGLU) to float rounding, since the
// codes and scales were imported bit for bit.
TEST(GptOssPack, PackedExpertsEqualTheReleaseExperts) {
  EQ_REQUIRE_SHARED();
  auto ref = io::SafetensorsFile::open(gpt_oss_mxfp4() + "/reference/reference.safetensors");
  auto pm = open_uniform_pack();
  auto source = model::Model::open(gpt_oss_mxfp4());
  const model::ModelConfig& c = source->config();
  const int64_t H = c.hidden_size;
  double worst = 0;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::vector<float> x = ref->view(*ref->find("moe_input." + std::to_string(l))).to_f32();
    const int64_t rows = static_cast<int64_t>(x.size()) / H;
    const PackedLayer& layer = pm->layers().at(static_cast<size_t>(l));
    for (int32_t e = 0; e < c.num_experts; ++e) {
      const ExpertWeights& w = layer.expert(e);
      ASSERT_NE(w.down_bias, nullptr) << "layer " << l << " expert " << e;
      EXPECT_EQ(w.act, c.expert_activation);
      std::vector<float> got(x.size()), want(x.size());
      model::FloatBuffer scratch;
      run_expert(w, x.data(), rows, got.data(), scratch);
      model::mlp_forward_serial(model::load_expert(source->weights(), c, l, e), x.data(), rows, H, want.data(),
                                scratch);
      worst = std::max(worst, rel_l2(got.data(), want));
      EXPECT_LT(rel_l2(got.data(), want), 1e-5) << "layer " << l << " expert " << e;
    }
  }
  std::printf("  worst packed expert rel L2 %.3g\n", worst);
}

// The mxfp4 class holds the release's bytes: every 4-byte word of every
// expert's E2M1 blocks and every E8M0 scale byte, in the format's column
// order (docs/formats.md, mxfp4: release bytes 4q..4q+3 of block (n, g) are
// qweight[4g + q, n]; scale (n, g) is scales[g, n]), compared as bytes with
// the checkpoint's *_blocks / *_scales (gate and up de-interleaved).
TEST(GptOssPack, Mxfp4ClassHoldsTheReleaseBytes) {
  EQ_REQUIRE_SHARED();
  auto pm = open_uniform_pack();
  auto source = model::Model::open(gpt_oss_mxfp4());
  const model::ModelConfig& c = source->config();
  int64_t words = 0, scales = 0, differing = 0;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const PackedLayer& layer = pm->layers().at(static_cast<size_t>(l));
    for (int32_t e = 0; e < c.num_experts; ++e) {
      const ExpertWeights& w = layer.expert(e);
      const quant::PackedMatrix* mats[3] = {&w.gate, &w.up, &w.down};
      for (model::Proj p : {model::Proj::kGate, model::Proj::kUp, model::Proj::kDown}) {
        const quant::PackedMatrix& m = *mats[static_cast<int>(p)];
        ASSERT_EQ(m.format->name, "mxfp4");
        const model::ExpertMxfp4 want = model::read_expert_mxfp4(c, source->source(), l, e, p);
        const int64_t N = want.rows, G = want.cols / 32;
        ASSERT_EQ(m.rows, N);
        ASSERT_EQ(m.parts.size(), 2u);
        const auto* q = static_cast<const uint8_t*>(m.parts[0].data);
        const auto* sc = static_cast<const uint8_t*>(m.parts[1].data);
        for (int64_t n = 0; n < N; ++n)
          for (int64_t g = 0; g < G; ++g) {
            for (int64_t k = 0; k < 4; ++k, ++words)
              differing += std::memcmp(want.blocks.data() + (n * G + g) * 16 + 4 * k, q + ((4 * g + k) * N + n) * 4, 4) != 0;
            ++scales;
            differing += want.scales[static_cast<size_t>(n * G + g)] != sc[g * N + n];
          }
      }
    }
  }
  std::printf("  %lld code words and %lld scale bytes compared, %lld differ\n", (long long)words, (long long)scales,
              (long long)differing);
  EXPECT_EQ(differing, 0);
  EXPECT_EQ(words, 4 * scales);
  EXPECT_GT(scales, 0);
}

// The whole packed model on the four reference windows: near the reference
// logits (a token whose top-k set flips under the rounding moves its own
// logits and, through attention, later ones: the mean and the argmax are
// checked, not the maximum), the same function under every strategy, and
// one-token decode through the sliding window equal to prefill.
TEST(GptOssPack, PackedModelFollowsTheReferenceLogits) {
  EQ_REQUIRE_SHARED();
  auto ref = io::SafetensorsFile::open(gpt_oss_mxfp4() + "/reference/reference.safetensors");
  const io::TensorInfo* tok = ref->find("tokens");
  ASSERT_NE(tok, nullptr);
  const int64_t B = tok->shape[0], T = tok->shape[1];
  std::vector<int32_t> tokens(B * T);
  std::memcpy(tokens.data(), ref->view(*tok).data, tokens.size() * sizeof(int32_t));
  const std::vector<float> ref_logits = ref->view(*ref->find("logits")).to_f32();

  auto pm = open_uniform_pack();
  model::Model& m = pm->model();
  const int64_t V = m.config().vocab_size;
  model::FloatBuffer first;
  for (auto kind : {DispatchKind::kSorted, DispatchKind::kMaskCombine, DispatchKind::kAuto}) {
    pm->set_dispatch(make_dispatch(kind, 0));
    model::KvCache cache = m.new_cache(B, T);
    const model::FloatBuffer logits = m.forward(tokens, B, T, cache);
    ASSERT_EQ(logits.size(), ref_logits.size());
    double sum_abs = 0;
    int64_t same_top1 = 0;
    for (int64_t r = 0; r < B * T; ++r) {
      const float* a = logits.data() + r * V;
      const float* b = ref_logits.data() + r * V;
      for (int64_t i = 0; i < V; ++i) sum_abs += std::abs(double(a[i]) - b[i]);
      same_top1 += std::max_element(a, a + V) - a == std::max_element(b, b + V) - b;
    }
    const double mean_abs = sum_abs / double(logits.size()), top1 = double(same_top1) / double(B * T);
    std::printf("  %-12s logits vs reference: mean abs %.3g, same argmax %.1f%%\n",
                make_dispatch(kind, 0)->name().c_str(), mean_abs, 100 * top1);
    EXPECT_LT(mean_abs, 0.03);
    EXPECT_GE(top1, 0.95);
    if (first.size() == 0) {
      first = logits;
    } else {
      double d = 0;
      for (size_t i = 0; i < logits.size(); ++i) d = std::max(d, std::abs(double(logits[i]) - first[i]));
      EXPECT_LE(d, 1e-4) << "dispatch " << int(kind);
    }
  }

  // Window 0 again, one token at a time (the sliding layers see 32 of its 64 positions).
  model::KvCache cache = m.new_cache(1, T);
  double decode_vs_prefill = 0;
  for (int64_t t = 0; t < T; ++t) {
    const model::FloatBuffer step = m.forward(std::span<const int32_t>(&tokens[t], 1), 1, 1, cache);
    for (int64_t i = 0; i < V; ++i)
      decode_vs_prefill = std::max(decode_vs_prefill, std::abs(double(step[i]) - first[t * V + i]));
  }
  std::printf("  decode vs prefill: max abs %.3g\n", decode_vs_prefill);
  EXPECT_LT(decode_vs_prefill, 1e-3);
}

}  // namespace
}  // namespace eq::exec
