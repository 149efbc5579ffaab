// Which experts an export removes: the ranking, the ties, router groups and
// the profile's own pruned class, on statistics made up for the purpose.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "profile/profile.h"
#include "prune/selection.h"

namespace eq::prune {
namespace {

// Two MoE layers of 8 experts, top-2. Layer l, expert e: routed
// tokens[l][e] times with saliency sums giving REAP reap[l][e].
struct Fixture {
  model::ModelConfig c;
  profile::Profile p;
  Fixture(const std::vector<std::vector<int64_t>>& tokens, const std::vector<std::vector<double>>& reap,
          int64_t groups = 1) {
    c.num_layers = 2;
    c.num_experts = 8;
    c.top_k = 2;
    c.layer_is_moe = {true, true};
    c.router_groups = groups;
    c.router_topk_groups = 1;
    p.policy = profile::default_policy();
    p.policy.min_tokens = 1;
    p.stats = profile::RoutingStats::make({0, 1}, 4, 4, 8, 2, true, true);
    p.classification.layers.assign(2, std::vector<profile::ExpertDecision>(8));
    for (size_t l = 0; l < 2; ++l) {
      auto& ls = p.stats.layers[l];
      int64_t sum = 0;
      for (size_t e = 0; e < 8; ++e) {
        ls.experts[e].tokens = tokens[l][e];
        ls.experts[e].saliency_sum = reap[l][e] * double(tokens[l][e]);
        sum += tokens[l][e];
      }
      ls.tokens = sum / 2;
    }
  }
};

const std::vector<std::vector<int64_t>> kTokens = {{10, 20, 30, 40, 50, 60, 70, 80}, {80, 70, 60, 50, 40, 30, 20, 10}};
// REAP orders the experts otherwise than usage does.
const std::vector<std::vector<double>> kReap = {{8, 7, 6, 5, 4, 3, 2, 1}, {1, 1, 1, 1, 5, 6, 7, 8}};

TEST(Selection, ReapDropsTheLowestSaliencyUsageTheLeastRouted) {
  Fixture f(kTokens, kReap);
  SelectionOptions o;
  o.keep_experts = 5;
  const Selection s = select_experts(f.c, f.p, o, "p");
  ASSERT_EQ(s.layers.size(), 2u);
  EXPECT_EQ(s.rule, "reap");
  EXPECT_EQ(s.experts_after, 5);
  EXPECT_EQ(s.layers[0].dropped, (std::vector<int64_t>{5, 6, 7}));
  // Layer 1: four experts tie at REAP 1; the less routed go first (3, then 2).
  EXPECT_EQ(s.layers[1].dropped, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(s.layers[1].kept, (std::vector<int64_t>{0, 4, 5, 6, 7}));
  EXPECT_NEAR(s.layers[0].dropped_usage_share, (60.0 + 70 + 80) / 360.0, 1e-12);
  EXPECT_NEAR(s.layers[0].dropped_reap_share, (3.0 + 2 + 1) / 36.0, 1e-12);
  o.rank_by = RankBy::kUsage;
  const Selection u = select_experts(f.c, f.p, o, "p");
  EXPECT_EQ(u.layers[0].dropped, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(u.layers[1].dropped, (std::vector<int64_t>{5, 6, 7}));
}

TEST(Selection, FractionCountsAsTheReferenceDoesAndRandomIsSeeded) {
  Fixture f(kTokens, kReap);
  SelectionOptions o;
  o.prune_fraction = 0.3;  // floor(2.4) = 2 removed
  EXPECT_EQ(select_experts(f.c, f.p, o, "p").experts_after, 6);
  o.rank_by = RankBy::kRandom;
  const Selection a = select_experts(f.c, f.p, o, "p");
  EXPECT_EQ(a.layers[0].dropped, select_experts(f.c, f.p, o, "p").layers[0].dropped);
  EXPECT_EQ(a.layers[0].dropped.size(), 2u);
  bool differs = false;
  for (uint64_t seed = 1; seed < 8 && !differs; ++seed) {
    o.seed = seed;
    differs = select_experts(f.c, f.p, o, "p").layers[0].dropped != a.layers[0].dropped;
  }
  EXPECT_TRUE(differs) << "the seed changes the shuffle";
}

TEST(Selection, RouterGroupsLoseTheSameNumberEach) {
  Fixture f(kTokens, kReap, /*groups=*/2);
  SelectionOptions o;
  o.keep_experts = 4;  // two from each group of four
  const Selection s = select_experts(f.c, f.p, o, "p");
  EXPECT_EQ(s.layers[0].dropped, (std::vector<int64_t>{2, 3, 6, 7}));
  o.keep_experts = 5;
  EXPECT_THROW(
      {
        try {
          select_experts(f.c, f.p, o, "p");
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("not a multiple of the 2 router groups"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
  o.keep_experts = 2;  // a group of one: its score needs two
  EXPECT_THROW(select_experts(f.c, f.p, o, "p"), Error);
}

TEST(Selection, TheProfilesPrunedClassWhenEveryLayerPrunesAlike) {
  Fixture f(kTokens, kReap);
  auto prune = [&](size_t l, size_t e) { f.p.classification.layers[l][e].cls = plan::ExpertClass::kPruned; };
  prune(0, 1);
  prune(0, 4);
  prune(1, 0);
  prune(1, 7);
  const Selection s = select_experts(f.c, f.p, {}, "p");
  EXPECT_EQ(s.rule, "profile");
  EXPECT_EQ(s.experts_after, 6);
  EXPECT_EQ(s.layers[0].dropped, (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(s.layers[1].dropped, (std::vector<int64_t>{0, 7}));
  prune(1, 3);
  try {
    select_experts(f.c, f.p, {}, "profile P");
    ADD_FAILURE() << "3 and 2 pruned experts accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("removes 3 experts in layer 1 and 2 in an earlier one"), std::string::npos)
        << e.what();
  }
}

TEST(Selection, RefusesCountsOutsideTheModel) {
  Fixture f(kTokens, kReap);
  SelectionOptions o;
  o.keep_experts = 1;  // top-2
  EXPECT_THROW(select_experts(f.c, f.p, o, "p"), Error);
  o.keep_experts.reset();
  for (double bad : {1.0, -0.5, std::nan("")}) {
    o.prune_fraction = bad;
    EXPECT_THROW(select_experts(f.c, f.p, o, "p"), Error) << bad;
  }
  o.keep_experts = 4;
  o.prune_fraction = 0.5;
  EXPECT_THROW(select_experts(f.c, f.p, o, "p"), Error) << "both options";
}

}  // namespace
}  // namespace eq::prune
