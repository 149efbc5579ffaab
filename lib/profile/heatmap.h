// Heatmap of a profile as SVG: one cell per (layer, expert), hue by class,
// lightness by usage share (log scale; white = never routed), outlined when
// under-covered; a layer label per row and an expert axis under the grid.
// Plain SVG 1.1 text, no dependencies.
#pragma once

#include <string>

#include "profile/profile.h"

namespace eq::profile {

// An upper bound of a sans-serif glyph's advance, in ems: the canvas is made
// wide enough for every text line at this width, so none is clipped.
inline constexpr double kHeatmapCharEm = 0.65;

std::string heatmap_svg(const Profile& p);

}  // namespace eq::profile
