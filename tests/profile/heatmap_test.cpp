// The profile heatmap SVG from hand-made statistics (no model needed): the
// title fits the canvas and the grid has an expert axis.
#include <gtest/gtest.h>

#include <string>

#include "profile/heatmap.h"

namespace eq::profile {
namespace {

Profile small_profile(int64_t experts, const std::string& model_type) {
  Profile p;
  p.model.model_type = model_type;
  p.stats = RoutingStats::make({1, 2, 3}, 16, 8, experts, 2, false, false);
  for (auto& l : p.stats.layers) {
    l.tokens = 100;
    for (int64_t e = 0; e < experts; ++e) l.experts[size_t(e)].tokens = 25 * (e % 2);
  }
  return p;
}

// The number after `name="` in the first element that has it.
double attribute(const std::string& svg, const std::string& element, const std::string& name) {
  const size_t at = svg.find(element);
  const size_t v = svg.find(name + "=\"", at);
  return std::stod(svg.substr(v + name.size() + 2));
}

TEST(Heatmap, TitleFitsTheCanvas) {
  // Eight experts make a 96 px grid: the title alone is several times wider.
  for (const std::string type : {"qwen2_moe", "a_rather_long_model_type_name_for_a_mixture_of_experts"}) {
    const std::string svg = heatmap_svg(small_profile(8, type));
    const size_t t = svg.find("<text class=\"title\"");
    ASSERT_NE(t, std::string::npos);
    const size_t open = svg.find('>', t) + 1;
    const std::string title = svg.substr(open, svg.find("</text>", open) - open);
    EXPECT_EQ(title.rfind(type + ": experts by class", 0), 0u) << title;
    const double x = attribute(svg, "<text class=\"title\"", "x");
    const double font = attribute(svg, "<text class=\"title\"", "font-size");
    const double width = attribute(svg, "<svg", "width");
    EXPECT_LE(x + double(title.size()) * font * kHeatmapCharEm, width) << type;
    EXPECT_NE(svg.find("viewBox=\"0 0 " + std::to_string(int(width)) + " "), std::string::npos);
  }
}

TEST(Heatmap, ExpertAxisLabelsTheColumns) {
  const std::string svg = heatmap_svg(small_profile(8, "qwen2_moe"));
  const size_t axis = svg.find("<g class=\"expert-axis\"");
  ASSERT_NE(axis, std::string::npos);
  const std::string g = svg.substr(axis, svg.find("</g>", axis) - axis);
  // 12 px cells: a tick every 5 experts (60 px), at 0 and 5.
  EXPECT_NE(g.find(">0</text>"), std::string::npos) << g;
  EXPECT_NE(g.find(">5</text>"), std::string::npos) << g;
  EXPECT_EQ(g.find(">1</text>"), std::string::npos) << g;
  EXPECT_NE(g.find(">expert</text>"), std::string::npos) << g;
  // One cell per (layer, expert) still.
  size_t cells = 0;
  for (size_t at = svg.find("<title>layer"); at != std::string::npos; at = svg.find("<title>layer", at + 1)) ++cells;
  EXPECT_EQ(cells, 3u * 8u);
}

TEST(Heatmap, ModelTypeIsEscaped) {
  const std::string svg = heatmap_svg(small_profile(4, "a<b&c"));
  EXPECT_NE(svg.find("a&lt;b&amp;c: experts"), std::string::npos);
  EXPECT_EQ(svg.find("a<b"), std::string::npos);
}

}  // namespace
}  // namespace eq::profile
