#include "profile/proxy_fit.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace eq::profile {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

// A ratio needs both errors positive (an exact round trip has none).
bool fittable(const ProxyPoint& p) {
  return p.measured > 0 && p.proxy > 0 && std::isfinite(p.measured) && std::isfinite(p.proxy);
}

struct LogRatios {
  double sum = 0;  // Σ ln(measured / proxy) over the fittable points
  int64_t n = 0;
};

LogRatios log_ratios(const std::vector<ProxyPoint>& points) {
  LogRatios l;
  for (const auto& p : points)
    if (fittable(p)) {
      l.sum += std::log(p.measured / p.proxy);
      ++l.n;
    }
  return l;
}

// |ln(predicted / measured)| as the percent by which the prediction misses.
double miss_pct(double predicted, double measured) {
  return 100.0 * (std::exp(std::abs(std::log(predicted / measured))) - 1.0);
}

}  // namespace

std::vector<int64_t> calibration_experts(const std::vector<int64_t>& tokens, const std::vector<bool>& has_sample,
                                         int64_t count) {
  std::vector<int64_t> ranked;
  for (size_t e = 0; e < has_sample.size(); ++e)
    if (has_sample[e]) ranked.push_back(int64_t(e));
  std::stable_sort(ranked.begin(), ranked.end(), [&](int64_t a, int64_t b) { return tokens[a] > tokens[b]; });
  const int64_t n = int64_t(ranked.size());
  std::vector<int64_t> chosen;
  if (count >= n) {
    chosen = ranked;
  } else {
    for (int64_t i = 0; i < count; ++i) chosen.push_back(ranked[size_t((2 * i + 1) * n / (2 * count))]);
  }
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

double fit_ratio(const std::vector<ProxyPoint>& points) {
  const LogRatios l = log_ratios(points);
  return l.n ? std::exp(l.sum / double(l.n)) : 1.0;
}

ProxyFit fit_proxy(const std::string& format, const std::string& proxy, std::vector<ProxyPoint> points) {
  ProxyFit fit;
  fit.format = format;
  fit.proxy = proxy;
  fit.ratio = fit_ratio(points);
  const LogRatios all = log_ratios(points);
  for (auto& p : points) {
    // Without this point: its own log ratio taken out of the mean.
    const bool own = fittable(p);
    const int64_t others = all.n - (own ? 1 : 0);
    const double r =
        others > 0 ? std::exp((all.sum - (own ? std::log(p.measured / p.proxy) : 0.0)) / double(others)) : fit.ratio;
    p.predicted = r * p.proxy;
  }
  fit.points = std::move(points);
  return fit;
}

ProxyFitQuality fit_quality(const ProxyFit& fit) {
  std::vector<double> miss;
  for (const auto& p : fit.points)
    if (p.measured > 0 && p.predicted > 0) miss.push_back(miss_pct(p.predicted, p.measured));
  ProxyFitQuality q;
  q.compared = int64_t(miss.size());
  if (miss.empty()) return q;
  std::sort(miss.begin(), miss.end());
  const size_t m = miss.size();
  q.median_pct = m % 2 ? miss[m / 2] : 0.5 * (miss[m / 2 - 1] + miss[m / 2]);
  q.max_pct = miss.back();
  return q;
}

std::string describe_proxy_fit(const ProxyFit& fit) {
  char buf[256];
  const ProxyFitQuality q = fit_quality(fit);
  if (fit.points.empty()) {
    std::snprintf(buf, sizeof buf, "%s = %s (no expert measured in %s: the proxy's rel_mse is copied)",
                  fit.format.c_str(), fit.proxy.c_str(), fit.format.c_str());
  } else if (q.compared < 2) {
    std::snprintf(buf, sizeof buf, "%s \u2248 %.3g \u00d7 %s (fitted on %zu experts; too few to compare predictions)",
                  fit.format.c_str(), fit.ratio, fit.proxy.c_str(), fit.points.size());
  } else {
    std::snprintf(buf, sizeof buf,
                  "%s \u2248 %.3g \u00d7 %s (fitted on %zu experts; predicted vs measured, leave-one-out: median "
                  "%.1f%%, max %.1f%%)",
                  fit.format.c_str(), fit.ratio, fit.proxy.c_str(), fit.points.size(), q.median_pct, q.max_pct);
  }
  return buf;
}

std::vector<ProxyFit> merge_proxy_fits(const std::vector<ProxyFit>& a, const std::vector<ProxyFit>& b) {
  std::vector<ProxyFit> out;
  auto find = [](const std::vector<ProxyFit>& v, const std::string& format) -> const ProxyFit* {
    for (const auto& f : v)
      if (f.format == format) return &f;
    return nullptr;
  };
  for (const auto& fa : a) {
    const ProxyFit* fb = find(b, fa.format);
    if (!fb) {
      out.push_back(fa);
    } else if (fb->proxy == fa.proxy) {
      std::vector<ProxyPoint> points = fa.points;
      points.insert(points.end(), fb->points.begin(), fb->points.end());
      out.push_back(fit_proxy(fa.format, fa.proxy, std::move(points)));
    }
  }
  for (const auto& fb : b)
    if (!find(a, fb.format)) out.push_back(fb);
  return out;
}

ordered_json proxy_fits_to_json(const std::vector<ProxyFit>& fits) {
  ordered_json j = ordered_json::object();
  for (const auto& f : fits) {
    ordered_json points = ordered_json::array();
    for (const auto& p : f.points)
      points.push_back({{"layer", p.layer}, {"expert", p.expert}, {"measured", p.measured}, {"proxy", p.proxy},
                        {"predicted", p.predicted}});
    const ProxyFitQuality q = fit_quality(f);
    auto num = [](double v) { return std::isnan(v) ? json(nullptr) : json(v); };
    j[f.format] = {{"proxy", f.proxy},
                   {"ratio", f.ratio},
                   {"experts", int64_t(f.points.size())},
                   {"predicted_vs_measured",
                    {{"method", "leave-one-out"}, {"compared", q.compared}, {"median_pct", num(q.median_pct)},
                     {"max_pct", num(q.max_pct)}}},
                   {"measured", points}};
  }
  return j;
}

std::vector<ProxyFit> parse_proxy_fits(const json& j, const std::string& label, const std::vector<std::string>& formats,
                                       const std::vector<std::string>& proxy_of, const std::vector<int64_t>& layer_ids,
                                       int64_t num_experts) {
  const std::string root = "sensitivity_proxy_fits";
  auto bad = [&](const std::string& field, const std::string& why) {
    invalid(label + ": field '" + field + "': " + why);
  };
  if (!j.is_object()) bad(root, "must be an object {format: fit}");
  std::vector<ProxyFit> fits;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string where = root + "." + it.key();
    const auto f = std::find(formats.begin(), formats.end(), it.key());
    if (f == formats.end()) bad(where, "not one of sensitivity_formats");
    const std::string& proxy = proxy_of[size_t(f - formats.begin())];
    if (proxy.empty()) bad(where, "the format has no proxy in sensitivity_proxies");
    const json& x = it.value();
    if (!x.is_object()) bad(where, "must be an object");
    if (!x.contains("proxy") || !x["proxy"].is_string() || x["proxy"].get<std::string>() != proxy)
      bad(where + ".proxy", "must be \"" + proxy + "\", the format's entry in sensitivity_proxies");
    if (!x.contains("ratio") || !x["ratio"].is_number() || !(x["ratio"].get<double>() > 0) ||
        !std::isfinite(x["ratio"].get<double>()))
      bad(where + ".ratio", "must be a positive number");
    if (!x.contains("measured") || !x["measured"].is_array()) bad(where + ".measured", "must be an array");
    const json& pts = x["measured"];
    if (!x.contains("experts") || !x["experts"].is_number_integer() || x["experts"].get<int64_t>() != int64_t(pts.size()))
      bad(where + ".experts", "must be an integer equal to the " + std::to_string(pts.size()) + " entries of measured");
    ProxyFit fit;
    fit.format = it.key();
    fit.proxy = proxy;
    fit.ratio = x["ratio"].get<double>();
    for (size_t i = 0; i < pts.size(); ++i) {
      const std::string pw = where + ".measured[" + std::to_string(i) + "]";
      const json& p = pts[i];
      if (!p.is_object()) bad(pw, "must be an object");
      ProxyPoint pt;
      if (!p.contains("layer") || !p["layer"].is_number_integer() ||
          std::find(layer_ids.begin(), layer_ids.end(), p["layer"].get<int64_t>()) == layer_ids.end())
        bad(pw + ".layer", "must be the id of a layer of 'layers'");
      pt.layer = p["layer"].get<int64_t>();
      if (!p.contains("expert") || !p["expert"].is_number_integer() || p["expert"].get<int64_t>() < 0 ||
          p["expert"].get<int64_t>() >= num_experts)
        bad(pw + ".expert", "must be an integer in [0, " + std::to_string(num_experts) + ")");
      pt.expert = p["expert"].get<int64_t>();
      for (auto [key, dst] : {std::pair<const char*, double*>{"measured", &pt.measured}, {"proxy", &pt.proxy},
                              {"predicted", &pt.predicted}}) {
        if (!p.contains(key) || !p[key].is_number() || !(p[key].get<double>() >= 0) ||
            !std::isfinite(p[key].get<double>()))
          bad(pw + "." + key, "must be a number >= 0");
        *dst = p[key].get<double>();
      }
      fit.points.push_back(pt);
    }
    fits.push_back(std::move(fit));
  }
  return fits;
}

}  // namespace eq::profile
