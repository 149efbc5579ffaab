// Routing statistics and REAP saliency under the grouped sigmoid router
// (deepseek_v3-small, shared): the profile's per-expert token counts, gate
// sums and saliency (Σ gate · ‖expert output‖) on the reference's captured
// MoE inputs equal a float64 computation from the reference's own top-k ids
// and combine weights. Those weights are the plain sigmoid scores of the
// chosen experts (renormalized, times routed_scaling_factor): the correction
// bias picks the experts and never enters a weight, so a profile that took
// the biased scores as gates would miss the gate sums by the bias.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/config.h"
#include "profile/run.h"
#include "test_support.h"

namespace eq::profile {
namespace {

std::vector<double> as_f64(const std::vector<float>& v) { return {v.begin(), v.end()}; }

std::vector<int32_t> as_i32(const io::TensorView& v) {
  std::vector<int32_t> out(v.info->numel());
  std::memcpy(out.data(), v.data, out.size() * sizeof(int32_t));
  return out;
}

TEST(ReapSaliency, SigmoidRouterUsesTheUnbiasedWeightsOfTheBiasedSelection) {
  EQ_REQUIRE_SHARED();
  const auto model_dir = test::shared_dir() / "models" / "deepseek_v3-small";
  const std::string ref_path = (model_dir / "reference" / "reference.safetensors").string();
  ProfileRequest r;
  r.model_path = model_dir.string();
  r.source = SourceKind::kHidden;
  r.input_path = ref_path;
  r.policy = default_policy();
  r.sensitivity = false;
  r.min_tokens = 1;
  r.thresholds = true;
  const Profile p = run_profile(r);

  const model::ModelConfig c = model::load_config(model_dir.string());
  auto ref = io::SafetensorsFile::open(ref_path);
  auto ckpt = io::Checkpoint::open(model_dir.string());
  const int64_t H = c.hidden_size, I = c.moe_intermediate_size, E = c.num_experts, K = c.top_k;
  int layers_checked = 0;
  for (const LayerStats& ls : p.stats.layers) {
    SCOPED_TRACE("layer " + std::to_string(ls.layer));
    const std::string l = std::to_string(ls.layer);
    const std::vector<double> x = as_f64(ref->view(*ref->find("moe_input." + l)).to_f32());
    const int64_t T = static_cast<int64_t>(x.size()) / H;  // window 0: the first T routing rows
    ASSERT_EQ(ls.tokens, T);
    const std::vector<int32_t> ids = as_i32(ref->view(*ref->find("topk_ids." + l)));
    const std::vector<double> weights = as_f64(ref->view(*ref->find("topk_weights." + l)).to_f32());
    const std::vector<double> bias =
        as_f64(ckpt->load_f32("model.layers." + l + ".mlp.gate.e_score_correction_bias"));
    std::vector<int64_t> tokens(E, 0);
    std::vector<double> gate_sum(E, 0), biased_gate_sum(E, 0), saliency(E, 0);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < K; ++j) {
        const int64_t e = ids[t * K + j];
        const double w = weights[t * K + j];
        // The expert in float64 from the checkpoint's weights: down(silu(gate x) * up x).
        const std::string pre = "model.layers." + l + ".mlp.experts." + std::to_string(e) + ".";
        const std::vector<double> wg = as_f64(ckpt->load_f32(pre + "gate_proj.weight"));
        const std::vector<double> wu = as_f64(ckpt->load_f32(pre + "up_proj.weight"));
        const std::vector<double> wd = as_f64(ckpt->load_f32(pre + "down_proj.weight"));
        std::vector<double> mid(I);
        for (int64_t i = 0; i < I; ++i) {
          double g = 0, u = 0;
          for (int64_t h = 0; h < H; ++h) {
            g += wg[i * H + h] * x[t * H + h];
            u += wu[i * H + h] * x[t * H + h];
          }
          mid[i] = g / (1.0 + std::exp(-g)) * u;
        }
        double yy = 0;
        for (int64_t h = 0; h < H; ++h) {
          double y = 0;
          for (int64_t i = 0; i < I; ++i) y += wd[h * I + i] * mid[i];
          yy += y * y;
        }
        ++tokens[e];
        gate_sum[e] += w;
        saliency[e] += w * std::sqrt(yy);
        // A gate taken from the biased score (score + bias) is off by about
        // the bias on every routed slot (before renormalization).
        biased_gate_sum[e] += w + bias[e];
      }
    double max_gate_diff = 0, max_biased_diff = 0, max_saliency_rel = 0;
    for (int64_t e = 0; e < E; ++e) {
      const ExpertStats& es = ls.experts[e];
      EXPECT_EQ(es.tokens, tokens[e]) << "expert " << e;
      EXPECT_NEAR(es.gate_sum, gate_sum[e], 1e-4 * (1 + gate_sum[e])) << "expert " << e;
      EXPECT_NEAR(es.saliency_sum, saliency[e], 1e-4 * (1 + saliency[e])) << "expert " << e;
      max_gate_diff = std::max(max_gate_diff, std::abs(es.gate_sum - gate_sum[e]));
      max_biased_diff = std::max(max_biased_diff, std::abs(biased_gate_sum[e] - gate_sum[e]));
      if (saliency[e] > 0) max_saliency_rel = std::max(max_saliency_rel, std::abs(es.saliency_sum / saliency[e] - 1));
    }
    std::printf("layer %s: max |gate_sum diff| %.3g (biased gates would differ by up to %.3g), "
                "max saliency rel diff %.3g\n",
                l.c_str(), max_gate_diff, max_biased_diff, max_saliency_rel);
    // The check can fail: the correction bias is large enough to show.
    EXPECT_GT(max_biased_diff, 100 * (max_gate_diff + 1e-9));
    ++layers_checked;
  }
  EXPECT_EQ(layers_checked, 2);
}

}  // namespace
}  // namespace eq::profile
