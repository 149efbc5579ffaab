#include "format_util.h"

#include <cstdio>

namespace eq::app {

std::string with_commas(uint64_t n) {
  std::string s = std::to_string(n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", bytes, units[u]);
  return buf;
}

std::string describe_format_mix(const plan::FormatTally& mix) {
  std::string out;
  for (const plan::FormatCount& c : mix.counts()) {
    out += out.empty() ? "" : ", ";
    out += (c.format.empty() ? std::string("pruned") : c.format) + " " + std::to_string(c.experts) +
           (c.experts == 1 ? " expert" : " experts");
    if (!c.format.empty()) out += " " + human_bytes(double(c.bytes));
  }
  return out;
}

}  // namespace eq::app
