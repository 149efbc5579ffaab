// Synthetic layers for bench/moe_layer: shared experts are stored after the
// routed ones and every token is routed to them besides its top-k.
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

}  // namespace
}  // namespace eq::exec
