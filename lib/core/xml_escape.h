// Text made safe inside XML/HTML elements and attribute values (the HTML
// report and the SVG heatmap): the four characters that could end or open
// markup are replaced by their entities.
#pragma once

#include <string>
#include <string_view>

namespace eq {

inline std::string xml_escape(std::string_view s) {
  std::string o;
  o.reserve(s.size());
  for (char ch : s) {
    switch (ch) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      default: o += ch;
    }
  }
  return o;
}

}  // namespace eq
