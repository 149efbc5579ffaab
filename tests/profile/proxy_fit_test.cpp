// Calibrated sensitivity proxies: the ratio fit, the choice of the experts it
// is fitted on, the values a profile keeps, and the fit's record in
// profile.json (written, read back, merged, refused when malformed).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "plan/profile_inputs.h"
#include "profile/profile.h"
#include "profile/proxy_fit.h"
#include "profile/run.h"
#include "support/random_moe.h"
#include "support/small_profile_request.h"
#include "test_support.h"

namespace eq::profile {
namespace {

namespace fs = std::filesystem;

TEST(ProxyFit, RecoversAKnownRatioExactly) {
  std::vector<ProxyPoint> points;
  // Proxy errors over four orders of magnitude, the format's a fixed 0.37 of them.
  for (int i = 0; i < 12; ++i) {
    const double proxy = 1e-5 * std::pow(2.3, i);
    points.push_back({i % 3, i, 0.37 * proxy, proxy, 0});
  }
  EXPECT_NEAR(fit_ratio(points), 0.37, 1e-12);
  const ProxyFit fit = fit_proxy("trellis4", "int4_g64", points);
  EXPECT_NEAR(fit.ratio, 0.37, 1e-12);
  ASSERT_EQ(fit.points.size(), points.size());
  for (const auto& p : fit.points) EXPECT_NEAR(p.predicted / p.measured, 1.0, 1e-12);
  const ProxyFitQuality q = fit_quality(fit);
  EXPECT_EQ(q.compared, 12);
  EXPECT_NEAR(q.median_pct, 0.0, 1e-9);
  EXPECT_NEAR(q.max_pct, 0.0, 1e-9);
}

TEST(ProxyFit, GeometricMeanAndLeaveOneOutPredictions) {
  // Ratios 2, 8 and 4: geometric mean 4; without the first point sqrt(8*4).
  const ProxyFit fit = fit_proxy("trellis2", "int2_g64", {{0, 0, 2.0, 1.0, 0}, {0, 1, 16.0, 2.0, 0}, {0, 2, 12.0, 3.0, 0}});
  EXPECT_NEAR(fit.ratio, 4.0, 1e-12);
  EXPECT_NEAR(fit.points[0].predicted, std::sqrt(32.0) * 1.0, 1e-12);
  EXPECT_NEAR(fit.points[1].predicted, std::sqrt(8.0) * 2.0, 1e-12);
  EXPECT_NEAR(fit.points[2].predicted, std::sqrt(16.0) * 3.0, 1e-12);
  // Misses: sqrt(32)/2, 16/sqrt(32), 12/12 -> 182.8%, 182.8%, 0%; median 182.8%.
  const ProxyFitQuality q = fit_quality(fit);
  EXPECT_NEAR(q.max_pct, 100 * (std::sqrt(32.0) / 2 - 1), 1e-9);
  EXPECT_NEAR(q.median_pct, 100 * (std::sqrt(32.0) / 2 - 1), 1e-9);
  EXPECT_EQ(describe_proxy_fit(fit),
            "trellis2 \u2248 4 \u00d7 int2_g64 (fitted on 3 experts; predicted vs measured, leave-one-out: median "
            "182.8%, max 182.8%)");
}

TEST(ProxyFit, PointsWithoutErrorDoNotEnterTheRatio) {
  EXPECT_NEAR(fit_ratio({{0, 0, 0.0, 1.0, 0}, {0, 1, 3.0, 1.5, 0}, {0, 2, 1.0, 0.0, 0}}), 2.0, 1e-12);
  EXPECT_EQ(fit_ratio({}), 1.0);
  EXPECT_EQ(fit_ratio({{0, 0, 0.0, 1.0, 0}}), 1.0);
}

TEST(ProxyFit, CalibrationExpertsAreSpreadOverUsageRanks) {
  // Expert e routed 10*e times: usage rank r holds expert 63 - r.
  std::vector<int64_t> tokens(64);
  for (int64_t e = 0; e < 64; ++e) tokens[e] = 10 * e;
  const std::vector<bool> all(64, true);
  // Ranks 8, 24, 40, 56 -> experts 55, 39, 23, 7 (returned ascending).
  EXPECT_EQ(calibration_experts(tokens, all, 4), (std::vector<int64_t>{7, 23, 39, 55}));
  EXPECT_EQ(calibration_experts(tokens, all, 4), calibration_experts(tokens, all, 4));
  EXPECT_EQ(calibration_experts(tokens, all, 1), (std::vector<int64_t>{31}));
  EXPECT_TRUE(calibration_experts(tokens, all, 0).empty());
  // Only experts with a sample; all of them when there are no more than asked.
  std::vector<bool> some(64, false);
  some[3] = some[60] = some[9] = true;
  EXPECT_EQ(calibration_experts(tokens, some, 4), (std::vector<int64_t>{3, 9, 60}));
  EXPECT_EQ(calibration_experts(tokens, some, 2), (std::vector<int64_t>{3, 60}));  // ranks 0 and 2 of 60, 9, 3
}

TEST(ProxyFit, TiesInUsageBreakByIndex) {
  const std::vector<int64_t> tokens(8, 5);
  EXPECT_EQ(calibration_experts(tokens, std::vector<bool>(8, true), 2), (std::vector<int64_t>{2, 6}));
}

// A tiny random model (one layer of 4 experts, I = 64 so int2_g64 fits)
// profiled twice: with trellis2 proxied by int2_g64 and fitted on 2 experts,
// and with trellis2 measured on every expert.
struct ProxiedAndMeasured {
  Profile proxied, measured;
};

Policy tiny_policy(bool proxied) {
  nlohmann::json j = {{"version", 1},
                      {"formats", {{"critical", "int8_row"}, {"standard", "int2_g64"}, {"deprioritized", "trellis2"}}},
                      {"sensitivity", {{"proxy_calibration_experts", 2}}}};
  if (proxied) j["sensitivity"]["proxies"] = {{"trellis2", "int2_g64"}};
  return parse_policy(j, "tiny policy");
}

const ProxiedAndMeasured& tiny_profiles() {
  static const ProxiedAndMeasured pm = [] {
    test::RandomMoeSpec spec;
    spec.hidden = 64;
    spec.intermediate = 64;
    spec.experts = 4;
    const auto model = test::write_random_moe(test::temp_dir("proxy_fit") / "model", spec);
    ProfileRequest r = test::small_profile_request(model);
    ProxiedAndMeasured out;
    r.policy = tiny_policy(true);
    out.proxied = run_profile(r);
    r.policy = tiny_policy(false);
    out.measured = run_profile(r);
    return out;
  }();
  return pm;
}

TEST(ProxyFit, MeasuredExpertsKeepTheirValuesAndTheOthersArePredicted) {
  const ProxiedAndMeasured& pm = tiny_profiles();
  const SensitivityTable& t = pm.proxied.sensitivity;
  const int f = t.index_of("trellis2"), p = t.index_of("int2_g64");
  ASSERT_GE(f, 0);
  ASSERT_GE(p, 0);
  EXPECT_EQ(t.proxy_of[f], "int2_g64");
  ASSERT_EQ(t.proxy_fits.size(), 1u);
  const ProxyFit& fit = t.proxy_fits[0];
  EXPECT_EQ(fit.format, "trellis2");
  EXPECT_EQ(fit.proxy, "int2_g64");
  ASSERT_EQ(fit.points.size(), 2u);
  EXPECT_GT(fit.ratio, 0.0);
  EXPECT_LT(fit.ratio, 1.0);  // trellis2 has less error than int2_g64
  const int mf = pm.measured.sensitivity.index_of("trellis2");
  std::vector<bool> calibrated(4, false);
  for (const auto& pt : fit.points) {
    calibrated[pt.expert] = true;
    // Measured, not predicted: the value of the run that measures every expert.
    EXPECT_EQ(t.layers[0][pt.expert].rel_mse[f], pm.measured.sensitivity.layers[0][pt.expert].rel_mse[mf]);
    EXPECT_EQ(pt.measured, t.layers[0][pt.expert].rel_mse[f]);
    EXPECT_EQ(pt.proxy, t.layers[0][pt.expert].rel_mse[p]);
  }
  for (int64_t e = 0; e < 4; ++e) {
    if (calibrated[e] || t.layers[0][e].source == SampleSource::kNone) continue;
    EXPECT_DOUBLE_EQ(t.layers[0][e].rel_mse[f], fit.ratio * t.layers[0][e].rel_mse[p]) << "expert " << e;
  }
  // Only the calibration experts were quantized to trellis2.
  EXPECT_GT(t.seconds_per_format(size_t(f)), 0.0);
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_text(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

TEST(ProxyFit, RecordRoundTripsThroughProfileJsonAndMerges) {
  Profile p = tiny_profiles().proxied;
  const fs::path dir = test::temp_dir("proxy_fit_round_trip");
  write_profile(p, (dir / "profile.json").string());
  const auto j = nlohmann::json::parse(read_text(dir / "profile.json"));
  const auto& rec = j.at("sensitivity_proxy_fits").at("trellis2");
  EXPECT_EQ(rec.at("proxy"), "int2_g64");
  EXPECT_EQ(rec.at("experts"), 2);
  EXPECT_EQ(rec.at("measured").size(), 2u);
  EXPECT_EQ(rec.at("predicted_vs_measured").at("method"), "leave-one-out");

  const Profile back = read_profile((dir / "profile.json").string());
  ASSERT_EQ(back.sensitivity.proxy_fits.size(), 1u);
  const ProxyFit &a = p.sensitivity.proxy_fits[0], &b = back.sensitivity.proxy_fits[0];
  EXPECT_EQ(b.format, a.format);
  EXPECT_EQ(b.proxy, a.proxy);
  EXPECT_EQ(b.ratio, a.ratio);
  ASSERT_EQ(b.points.size(), a.points.size());
  for (size_t i = 0; i < a.points.size(); ++i) {
    EXPECT_EQ(b.points[i].layer, a.points[i].layer);
    EXPECT_EQ(b.points[i].expert, a.points[i].expert);
    EXPECT_EQ(b.points[i].measured, a.points[i].measured);
    EXPECT_EQ(b.points[i].proxy, a.points[i].proxy);
    EXPECT_EQ(b.points[i].predicted, a.points[i].predicted);
  }
  EXPECT_EQ(describe_proxy_fit(b), describe_proxy_fit(a));

  // --merge: the points of both parts, fitted again (here the same ratio). The
  // second part stands for the next slice of the calibration file (a merge
  // refuses the same tokens twice).
  Profile next = back;
  for (CalibrationSlice& c : next.calibration) c.first_token += c.tokens;
  const Profile merged = merge_profiles({back, next}, {"a.json", "b.json"});
  ASSERT_EQ(merged.sensitivity.proxy_fits.size(), 1u);
  EXPECT_EQ(merged.sensitivity.proxy_fits[0].points.size(), 4u);
  EXPECT_NEAR(merged.sensitivity.proxy_fits[0].ratio, a.ratio, 1e-12 * a.ratio);
}

std::string error_of_reading(const fs::path& dir, const nlohmann::json& j) {
  write_text(dir / "bad.json", j.dump());
  try {
    read_profile((dir / "bad.json").string());
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    return e.what();
  }
  return "";
}

TEST(ProxyFit, BadRecordIsRefusedNamingTheField) {
  Profile p = tiny_profiles().proxied;
  const fs::path dir = test::temp_dir("proxy_fit_bad");
  write_profile(p, (dir / "profile.json").string());
  const auto good = nlohmann::json::parse(read_text(dir / "profile.json"));
  const std::string rec = "sensitivity_proxy_fits.trellis2";
  struct Case {
    std::string pointer;  // JSON pointer of the value replaced
    nlohmann::json value;
    std::string field;  // what the message must name
  };
  const std::vector<Case> cases = {
      {"/sensitivity_proxy_fits/trellis2/ratio", -0.5, rec + ".ratio"},
      {"/sensitivity_proxy_fits/trellis2/ratio", "0.5", rec + ".ratio"},
      {"/sensitivity_proxy_fits/trellis2/proxy", "int3_g64", rec + ".proxy"},
      {"/sensitivity_proxy_fits/trellis2/experts", 3, rec + ".experts"},
      {"/sensitivity_proxy_fits/trellis2/measured", nlohmann::json::object(), rec + ".measured"},
      {"/sensitivity_proxy_fits/trellis2/measured/0/expert", 4, rec + ".measured[0].expert"},
      {"/sensitivity_proxy_fits/trellis2/measured/1/layer", 7, rec + ".measured[1].layer"},
      {"/sensitivity_proxy_fits/trellis2/measured/0/measured", -1.0, rec + ".measured[0].measured"},
      {"/sensitivity_proxy_fits/trellis2/measured/0/predicted", nullptr, rec + ".measured[0].predicted"},
      {"/sensitivity_proxy_fits/int2_g64", good["sensitivity_proxy_fits"]["trellis2"],
       "sensitivity_proxy_fits.int2_g64"},
      {"/sensitivity_proxy_fits/trellis5", good["sensitivity_proxy_fits"]["trellis2"],
       "sensitivity_proxy_fits.trellis5"},
      {"/sensitivity_proxy_fits", nlohmann::json::array(), "sensitivity_proxy_fits"},
  };
  for (const auto& c : cases) {
    nlohmann::json j = good;
    j[nlohmann::json::json_pointer(c.pointer)] = c.value;
    const std::string err = error_of_reading(dir, j);
    EXPECT_NE(err.find("field '" + c.field + "'"), std::string::npos) << c.pointer << ": " << err;
    EXPECT_NE(err.find((dir / "bad.json").string()), std::string::npos) << err;
  }
  // A profile written before proxies were calibrated has no record: read, no fit.
  nlohmann::json old = good;
  old.erase("sensitivity_proxy_fits");
  plan::seal_profile(old);
  write_text(dir / "old.json", old.dump());
  EXPECT_TRUE(read_profile((dir / "old.json").string()).sensitivity.proxy_fits.empty());
}

}  // namespace
}  // namespace eq::profile
