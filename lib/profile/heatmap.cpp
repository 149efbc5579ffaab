#include "profile/heatmap.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/xml_escape.h"

namespace eq::profile {
namespace {

// Right edge of a text line starting at x, at the glyph-width bound.
int text_right(int x, const std::string& text, int font_size) {
  return x + int(std::ceil(double(text.size()) * font_size * kHeatmapCharEm));
}

// Every step-th expert gets a tick: the smallest 1-2-5 step whose labels sit
// at least `min_px` apart.
int64_t tick_step(int cell, int min_px) {
  for (int64_t step = 1;; step *= 10)
    for (int64_t m : {1, 2, 5})
      if (step * m * cell >= min_px) return step * m;
}

}  // namespace

std::string heatmap_svg(const Profile& p) {
  const RoutingStats& s = p.stats;
  const auto metrics = expert_metrics(s, p.policy);
  const int64_t E = s.num_experts, L = int64_t(s.layers.size());
  const int cell = E > 128 ? 4 : 12, left = 60, top = 40;
  const int grid_bottom = top + int(L) * cell, axis = 34, legend_y = grid_bottom + axis + 8;
  // Class hues: critical red, standard blue, deprioritized amber, pruned grey.
  const int hue[4] = {0, 215, 40, 0};
  const int sat[4] = {75, 65, 85, 0};
  char b[512];
  const std::string title = p.model.model_type + ": experts by class (colour) and usage share (shade), " +
                            std::to_string(L) + " layers x " + std::to_string(E) + " experts";
  const std::string note = "darker = more used (log share vs uniform); white = never routed; outlined = under-covered";
  // Wide enough for the grid, the title, the legend and the note.
  const int width = std::max({left + int(E) * cell + 20, text_right(left, title, 12) + 10,
                              left + 3 * 110 + text_right(14, "deprioritized", 10) + 10, text_right(left, note, 10) + 10});
  const int height = legend_y + 34;
  std::string out;
  std::snprintf(b, sizeof b,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                "font-family=\"sans-serif\" font-size=\"10\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
                width, height, width, height);
  out += b;
  out += "<text class=\"title\" x=\"" + std::to_string(left) + "\" y=\"16\" font-size=\"12\">" + xml_escape(title) +
         "</text>\n";
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
                    (long long)e, std::string(plan::class_name(plan::ExpertClass(cls))).c_str(), 100 * m.share,
                    (long long)s.layers[li].experts[e].tokens);
      out += b;
    }
  }
  out += "<g class=\"expert-axis\" text-anchor=\"middle\">";
  for (int64_t e = 0; e < E; e += tick_step(cell, 28)) {
    const int x = left + int(e) * cell + cell / 2;
    std::snprintf(b, sizeof b,
                  "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#999\"/><text x=\"%d\" y=\"%d\">%lld</text>", x,
                  x, grid_bottom, grid_bottom + 4, x, grid_bottom + 14, (long long)e);
    out += b;
  }
  std::snprintf(b, sizeof b, "<text x=\"%d\" y=\"%d\" font-size=\"11\">expert</text></g>\n",
                left + int(E) * cell / 2, grid_bottom + 28);
  out += b;
  for (int c = 0; c < 4; ++c) {
    std::snprintf(b, sizeof b,
                  "<rect x=\"%d\" y=\"%d\" width=\"10\" height=\"10\" fill=\"hsl(%d,%d%%,50%%)\"/>"
                  "<text x=\"%d\" y=\"%d\">%s</text>\n",
                  left + c * 110, legend_y, hue[c], sat[c], left + c * 110 + 14, legend_y + 9,
                  std::string(plan::class_name(plan::ExpertClass(c))).c_str());
    out += b;
  }
  out += "<text x=\"" + std::to_string(left) + "\" y=\"" + std::to_string(legend_y + 24) + "\">" + xml_escape(note) +
         "</text>\n</svg>\n";
  return out;
}

}  // namespace eq::profile
