// Synthetic layers for bench/moe_layer: shared experts are stored after the
// routed ones and every token is routed to them besides its top-k; gpt-oss
// shapes give every expert its biases and the clamped SwiGLU.
#include <gtest/gtest.h>

#include <algorithm>

#include "exec/synthetic_layer.h"

namespace eq::exec {
namespace {

TEST(SyntheticLayer, SharedExpertsFollowTheRoutedOnesInLayerAndRouting) {
  const LayerShape shape{"small-shared", 16, 3, 64, 32, 2};
  const auto layer = make_synthetic_layer(shape, *find_format_mix("int8_row"), 5);
  EXPECT_EQ(layer->layer().num_experts, 18);
  const std::vector<int32_t> routed = random_expert_ids(shape.experts, shape.top_k, 7, 11);
  ASSERT_EQ(routed.size(), 21u);
  EXPECT_TRUE(std::all_of(routed.begin(), routed.end(), [](int32_t e) { return e >= 0 && e < 16; }));
  const std::vector<int32_t> all = with_shared_experts(routed, shape);
  ASSERT_EQ(all.size(), 7u * 5);
  for (size_t t = 0; t < 7; ++t) {
    EXPECT_TRUE(std::equal(routed.begin() + 3 * t, routed.begin() + 3 * t + 3, all.begin() + 5 * t)) << t;
    EXPECT_EQ(all[5 * t + 3], 16);
    EXPECT_EQ(all[5 * t + 4], 17);
  }
  const LayerShape* ds = find_layer_shape("deepseek-v3");
  ASSERT_NE(ds, nullptr);
  EXPECT_EQ(ds->experts + ds->shared_experts, 257);
  EXPECT_NE(find_layer_shape("glm-4.5"), nullptr);
}

TEST(SyntheticLayer, BiasedClampedExpertsPointIntoTheLayersBiases) {
  const LayerShape shape{"small-biased", 8, 2, 64, 32, 0, true};
  const auto layer = make_synthetic_layer(shape, *find_format_mix("mix842"), 3);
  const PackedLayer& L = layer->layer();
  ASSERT_EQ(L.expert_bias[0].size(), 8u * 32);
  ASSERT_EQ(L.expert_bias[2].size(), 8u * 64);
  EXPECT_TRUE(std::any_of(L.expert_bias[1].begin(), L.expert_bias[1].end(), [](float v) { return v != 0; }));
  for (int32_t e = 0; e < 8; ++e) {
    const ExpertWeights& w = L.expert(e);
    EXPECT_EQ(w.gate_bias, L.expert_bias[0].data() + e * 32) << e;
    EXPECT_EQ(w.up_bias, L.expert_bias[1].data() + e * 32) << e;
    EXPECT_EQ(w.down_bias, L.expert_bias[2].data() + e * 64) << e;
    EXPECT_EQ(w.act.kind, model::ActivationKind::kSwiGluClamped) << e;
  }
  const LayerShape* oss = find_layer_shape("gpt-oss-120b");
  ASSERT_NE(oss, nullptr);
  EXPECT_EQ(oss->experts, 128);
  EXPECT_EQ(oss->top_k, 4);
  EXPECT_TRUE(oss->biased_clamped);
}

}  // namespace
}  // namespace eq::exec
