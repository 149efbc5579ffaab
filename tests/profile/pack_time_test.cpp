// What an allocation is predicted to cost to pack, and a bit budget under a
// pack-time limit: on a tiny random model profiled once, with quantize rates
// fixed by the test (the allocation depends on nothing else), the format mix
// counts the decisions, the prediction follows pack's schedule (by hand), a limit is respected
// at the same byte budget and changes nothing when the allocation already
// fits, and a limit below the fastest allocation is an error.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "profile/bit_budget.h"
#include "profile/pack_time.h"
#include "profile/profile.h"
#include "profile/run.h"
#include "support/random_moe.h"
#include "support/small_profile_request.h"
#include "test_support.h"

namespace eq::profile {
namespace {

// 2 layers x 16 experts of 64 x 64, the default policy, 256 calibration tokens.
const Profile& tiny_profile() {
  static const Profile p = test::default_policy_profile("pack_time", 16);
  return p;
}

// Every measured format fast (1e7 weights/s of one thread, two threads),
// except `slow` (1e4): on this tiny random model the allocation picks scalar
// formats, so the test makes the ones it picks slow.
PackRates fixed_rates(const Profile& p, const std::vector<std::string>& slow = {}) {
  PackRates r;
  r.threads = 2;
  for (const auto& f : p.sensitivity.formats)
    r.per_thread.emplace_back(f, std::find(slow.begin(), slow.end(), f) != slow.end() ? 1e4 : 1e7);
  return r;
}

// The two formats the unlimited 4-bit allocation uses most.
std::vector<std::string> most_used_formats(const Profile& tiny) {
  Profile p = tiny;
  p.pack_rates = fixed_rates(p);
  reclassify(p, 4.0, 0);
  std::vector<std::string> out;
  for (const auto& c : p.classification.format_mix.counts())
    if (!c.format.empty() && out.size() < 2) out.push_back(c.format);
  return out;
}

// Pack's schedule by hand: per layer one group per format, its experts dealt
// round-robin to the threads; a lone expert spread over all of them.
double seconds_by_hand(const Classification& c, const PackRates& r) {
  const double weights = 3.0 * 64 * 64;
  double s = 0;
  for (const auto& row : c.layers) {
    std::map<std::string, int64_t> group;
    for (const auto& d : row)
      if (!d.format.empty()) ++group[d.format];
    for (const auto& [format, n] : group)
      for (const auto& [f, rate] : r.per_thread)
        if (f == format) {
          const int64_t rounds = (n + r.threads - 1) / r.threads;
          s += n == 1 ? weights / (rate * r.threads) : double(rounds) * weights / rate;
        }
  }
  return s;
}

TEST(PackTime, FormatMixCountsTheDecisions) {
  const Profile& p = tiny_profile();
  const Classification& c = p.classification;
  std::map<std::string, int64_t> experts;
  std::map<std::string, uint64_t> bytes;
  for (const auto& row : c.layers)
    for (const auto& d : row) {
      ++experts[d.format];
      bytes[d.format] += expert_bytes(p.dims(), d.format);
    }
  const auto counts = c.format_mix.counts();
  ASSERT_EQ(counts.size(), experts.size());
  int64_t total = 0;
  uint64_t total_bytes = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    EXPECT_EQ(counts[i].experts, experts[counts[i].format]) << counts[i].format;
    EXPECT_EQ(counts[i].bytes, bytes[counts[i].format]) << counts[i].format;
    if (i > 0 && !counts[i].format.empty()) {
      EXPECT_GE(counts[i - 1].bytes, counts[i].bytes);  // most bytes first
    }
    total += counts[i].experts;
    total_bytes += counts[i].bytes;
  }
  EXPECT_EQ(total, 2 * 16);
  EXPECT_EQ(total_bytes, c.expert_bytes);
  const auto j = c.format_mix.json();
  ASSERT_EQ(j.size(), counts.size());
  EXPECT_EQ(j[0]["experts"].get<int64_t>(), counts[0].experts);
}

TEST(PackTime, GroupsTakeRoundsOfOneExpertPerThread) {
  model::ModelConfig c;
  c.hidden_size = 64;
  c.moe_intermediate_size = 32;
  PackRates r;
  r.threads = 2;
  r.per_thread = {{"trellis4", 1e4}};
  const double one = 3.0 * 64 * 32 / 1e4;  // one expert, one thread
  EXPECT_DOUBLE_EQ(r.group_seconds(c, "trellis4", 1), one / 2);
  EXPECT_DOUBLE_EQ(r.group_seconds(c, "trellis4", 2), one);
  EXPECT_DOUBLE_EQ(r.group_seconds(c, "trellis4", 3), 2 * one);
  EXPECT_DOUBLE_EQ(r.group_seconds(c, "trellis4", 4), 2 * one);
  EXPECT_DOUBLE_EQ(r.group_seconds(c, "", 5), 0.0);
  // Three experts in one layer take two rounds; one in each of three layers, half a round each.
  EXPECT_DOUBLE_EQ(predicted_pack_seconds({{0, "trellis4"}, {0, "trellis4"}, {0, "trellis4"}}, c, r), 2 * one);
  EXPECT_DOUBLE_EQ(predicted_pack_seconds({{0, "trellis4"}, {1, "trellis4"}, {2, "trellis4"}, {2, ""}}, c, r),
                   1.5 * one);
}

TEST(PackTime, PredictionFollowsPacksSchedule) {
  Profile p = tiny_profile();
  p.pack_rates = fixed_rates(p);
  reclassify(p, 4.0, 0);
  EXPECT_DOUBLE_EQ(p.classification.predicted_pack_seconds, seconds_by_hand(p.classification, p.pack_rates));
  EXPECT_GT(p.classification.predicted_pack_seconds, 0);
  EXPECT_THROW(PackRates{}.expert_seconds(p.dims(), "trellis4"), Error);
  EXPECT_EQ(PackRates{}.expert_seconds(p.dims(), ""), 0.0);  // pruned
}

TEST(PackTime, ALimitIsRespectedAtTheSameByteBudget) {
  Profile p = tiny_profile();
  const std::vector<std::string> slow = most_used_formats(p);
  ASSERT_EQ(slow.size(), 2u);
  p.pack_rates = fixed_rates(p, slow);
  reclassify(p, 4.0, 0);
  const Classification free = p.classification;
  ASSERT_GT(free.predicted_pack_seconds, 1.0) << "the slow formats are the ones the allocation uses most";

  for (double share : {0.5, 0.2}) {
    SCOPED_TRACE(share);
    const double limit = share * free.predicted_pack_seconds;
    reclassify(p, 4.0, 0, false, limit);
    const Classification& c = p.classification;
    EXPECT_LE(c.predicted_pack_seconds, limit);
    EXPECT_DOUBLE_EQ(c.predicted_pack_seconds, seconds_by_hand(c, p.pack_rates));
    EXPECT_LE(c.avg_bits, 4.0 + 1e-9);
    EXPECT_GE(c.predicted_error, free.predicted_error);  // the unlimited allocation is the best at these bytes
    EXPECT_EQ(c.max_pack_seconds, limit);
    // Deterministic given the rates.
    Profile again = tiny_profile();
    again.pack_rates = fixed_rates(again, slow);
    reclassify(again, 4.0, 0, false, limit);
    for (size_t li = 0; li < c.layers.size(); ++li)
      for (size_t e = 0; e < c.layers[li].size(); ++e)
        EXPECT_EQ(again.classification.layers[li][e].format, c.layers[li][e].format);
  }

  // A limit the unlimited allocation meets changes nothing.
  reclassify(p, 4.0, 0, false, 2 * free.predicted_pack_seconds);
  for (size_t li = 0; li < free.layers.size(); ++li)
    for (size_t e = 0; e < free.layers[li].size(); ++e)
      EXPECT_EQ(p.classification.layers[li][e].format, free.layers[li][e].format);

  // The scalar formats alone take 32 experts x 12,288 weights / 2e7 per second:
  // a limit below that cannot be met at any byte budget.
  EXPECT_THROW(reclassify(p, 4.0, 0, false, 1e-3), Error);
  // Thresholds have no budget to limit.
  EXPECT_THROW(reclassify(p, 0, 0, true, 10.0), Error);
}

TEST(PackTime, MeasuredRatesNameEveryFormat) {
  model::ModelConfig c;
  c.hidden_size = 64;
  c.moe_intermediate_size = 32;
  const PackRates r = measure_pack_rates({"int8_row", "trellis2"}, c, quant::Device::kCpu, 3);
  EXPECT_EQ(r.threads, 3);
  EXPECT_EQ(r.device, "cpu");
  ASSERT_EQ(r.per_thread.size(), 2u);
  EXPECT_EQ(r.per_thread[0].first, "int8_row");
  EXPECT_EQ(r.per_thread[1].first, "trellis2");
  for (const auto& [f, rate] : r.per_thread) EXPECT_GT(rate, 0) << f;
}

}  // namespace
}  // namespace eq::profile
