// Calibrated sensitivity proxies. A slow format F (trellis: a Viterbi search
// per 16x16 tile) is measured itself on a few experts spread over the layers only; there
// its rel_mse is fitted as a constant multiple of a fast proxy format P's,
//   r = exp(mean over the subset of ln(rel_mse_F / rel_mse_P)),
// and r × rel_mse_P stands in for F on every other expert. A ratio because
// both errors scale with the same expert's sensitivity to weight noise while
// their quotient is set mostly by the two codes; a geometric mean because the
// errors of experts differ by orders of magnitude.
// The record of a fit (profile.json "sensitivity_proxy_fits", docs/profile.md)
// keeps each measured expert with its leave-one-out prediction, so how well
// the proxy predicts is shown, not assumed.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace eq::profile {

struct ProxyPoint {
  int64_t layer = 0, expert = 0;  // layer id, expert index
  double measured = 0;            // rel_mse of the format itself
  double proxy = 0;               // rel_mse of its proxy format
  // ratio fitted on the other points × proxy (leave-one-out; the in-sample
  // ratio when there is no other point).
  double predicted = 0;
};

struct ProxyFit {
  std::string format, proxy;
  double ratio = 1;  // rel_mse of `format` ≈ ratio × rel_mse of `proxy`
  std::vector<ProxyPoint> points;
};

struct ProxyFitQuality {
  // Over points with measured and predicted > 0: the factor by which the
  // prediction misses, as a percent: 100 × (exp(|ln(predicted / measured)|) − 1).
  double median_pct = std::numeric_limits<double>::quiet_NaN();
  double max_pct = std::numeric_limits<double>::quiet_NaN();
  int64_t compared = 0;
};

// The experts of one layer measured in every proxied format: up to `count`
// of those with a sample (has_sample[e]), spread evenly over their usage
// ranks (tokens descending, then index): rank ⌊(i + ½)·n / count⌋ for
// i < count. All of them when there are no more than `count`. Ascending index.
std::vector<int64_t> calibration_experts(const std::vector<int64_t>& tokens, const std::vector<bool>& has_sample,
                                         int64_t count);

// exp(mean ln(measured / proxy)) over the points where both are > 0; 1 when none is.
double fit_ratio(const std::vector<ProxyPoint>& points);

// The fit over `points`: its ratio, and each point's leave-one-out prediction.
ProxyFit fit_proxy(const std::string& format, const std::string& proxy, std::vector<ProxyPoint> points);

ProxyFitQuality fit_quality(const ProxyFit& fit);

// "trellis4 ≈ 0.61 × int4_g64 (fitted on 24 experts; predicted vs measured, leave-one-out: median 7%, max 29%)"
std::string describe_proxy_fit(const ProxyFit& fit);

// Merging profiles of disjoint slices: the points of both fits of a format
// with the same proxy, fitted again; a format fitted in one part only keeps
// that part's fit; one whose parts name different proxies has none.
std::vector<ProxyFit> merge_proxy_fits(const std::vector<ProxyFit>& a, const std::vector<ProxyFit>& b);

nlohmann::ordered_json proxy_fits_to_json(const std::vector<ProxyFit>& fits);

// Reads "sensitivity_proxy_fits": each key a proxied format of `formats`
// (proxy_of[f] names its proxy), each point of a layer in `layer_ids` and an
// expert below `num_experts`. The quality summary is recomputed, not read.
// Errors name `label` and the field.
std::vector<ProxyFit> parse_proxy_fits(const nlohmann::json& j, const std::string& label,
                                       const std::vector<std::string>& formats,
                                       const std::vector<std::string>& proxy_of,
                                       const std::vector<int64_t>& layer_ids, int64_t num_experts);

}  // namespace eq::profile
