#include "plan/format_tally.h"

#include <algorithm>


namespace eq::plan {

void FormatTally::add(const std::string& format, uint64_t bytes) {
  auto it = std::find_if(counts_.begin(), counts_.end(), [&](const FormatCount& c) { return c.format == format; });
  if (it == counts_.end()) it = counts_.insert(counts_.end(), FormatCount{format, 0, 0});
  ++it->experts;
  it->bytes += bytes;
}

std::vector<FormatCount> FormatTally::counts() const {
  std::vector<FormatCount> out = counts_;
  std::sort(out.begin(), out.end(), [](const FormatCount& a, const FormatCount& b) {
    if (a.format.empty() != b.format.empty()) return b.format.empty();
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.format < b.format;
  });
  return out;
}

nlohmann::ordered_json FormatTally::json() const {
  nlohmann::ordered_json j = nlohmann::ordered_json::array();
  for (const FormatCount& c : counts()) {
    nlohmann::ordered_json f;
    f["format"] = c.format.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(c.format);
    f["experts"] = c.experts;
    f["bytes"] = c.bytes;
    j.push_back(std::move(f));
  }
  return j;
}

}  // namespace eq::plan
