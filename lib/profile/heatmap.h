// Heatmap of a profile as SVG: one cell per (layer, expert), hue by class,
// lightness by usage share (log scale; white = never routed), outlined when
// under-covered. Plain SVG 1.1 text, no dependencies.
#pragma once

#include <string>

#include "profile/profile.h"

namespace eq::profile {

std::string heatmap_svg(const Profile& p);

}  // namespace eq::profile
