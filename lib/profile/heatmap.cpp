#include "profile/heatmap.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace eq::profile {

std::string heatmap_svg(const Profile& p) {
  const RoutingStats& s = p.stats;
  const auto metrics = expert_metrics(s, p.policy);
  const int64_t E = s.num_experts, L = int64_t(s.layers.size());
  const int cell = E > 128 ? 4 : 12, left = 60, top = 40, legend = 30;
  const int width = left + int(E) * cell + 20, height = top + int(L) * cell + legend + 30;
  // Class hues: critical red, standard blue, deprioritized amber, pruned grey.
  const int hue[4] = {0, 215, 40, 0};
  const int sat[4] = {75, 65, 85, 0};
  std::string out;
  char b[512];
  std::snprintf(b, sizeof b,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
                "font-size=\"10\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
                "<text x=\"%d\" y=\"16\" font-size=\"12\">%s: experts by class (colour) and usage share (shade), "
                "%lld layers x %lld experts</text>\n",
                width, height, left, p.model.model_type.c_str(), (long long)L, (long long)E);
  out += b;
  for (int64_t li = 0; li < L; ++li) {
    std::snprintf(b, sizeof b, "<text x=\"4\" y=\"%d\">layer %lld</text>\n", top + int(li) * cell + cell - 2,
                  (long long)s.layers[li].layer);
    out += b;
    for (int64_t e = 0; e < E; ++e) {
      const ExpertMetrics& m = metrics[li][e];
      const int cls = li < int64_t(p.classification.layers.size()) ? int(p.classification.layers[li][e].cls) : 1;
      // share relative to uniform, log10 in [-3, 1] -> lightness 92%..30%
      const double rel = m.usage_ratio > 0 ? std::clamp(std::log10(m.usage_ratio), -3.0, 1.0) : -3.0;
      const int light = m.usage_ratio > 0 ? int(92 - (rel + 3.0) / 4.0 * 62) : 100;
      std::snprintf(b, sizeof b,
                    "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"hsl(%d,%d%%,%d%%)\"%s>"
                    "<title>layer %lld expert %lld: %s, share %.3f%%, %lld tokens</title></rect>\n",
                    left + int(e) * cell, top + int(li) * cell, cell - 1, cell - 1, hue[cls], sat[cls], light,
                    m.under_covered ? " stroke=\"black\" stroke-width=\"0.8\"" : "", (long long)s.layers[li].layer,
                    (long long)e, std::string(pack::class_name(pack::ExpertClass(cls))).c_str(), 100 * m.share,
                    (long long)s.layers[li].experts[e].tokens);
      out += b;
    }
  }
  const int ly = top + int(L) * cell + 16;
  for (int c = 0; c < 4; ++c) {
    std::snprintf(b, sizeof b,
                  "<rect x=\"%d\" y=\"%d\" width=\"10\" height=\"10\" fill=\"hsl(%d,%d%%,50%%)\"/>"
                  "<text x=\"%d\" y=\"%d\">%s</text>\n",
                  left + c * 110, ly, hue[c], sat[c], left + c * 110 + 14, ly + 9,
                  std::string(pack::class_name(pack::ExpertClass(c))).c_str());
    out += b;
  }
  std::snprintf(b, sizeof b,
                "<text x=\"%d\" y=\"%d\">darker = more used (log share vs uniform); white = never routed; outlined = "
                "under-covered</text>\n</svg>\n",
                left, ly + 24);
  out += b;
  return out;
}

}  // namespace eq::profile
