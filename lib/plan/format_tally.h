// The format mix an allocation actually uses: per format the experts that
// got it and their bytes, pruned experts apart. The class formats of a policy
// say little once a bit budget chooses among all candidates, so profile and
// pack print this tally beside them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace eq::plan {

struct FormatCount {
  std::string format;  // "" = pruned
  int64_t experts = 0;
  uint64_t bytes = 0;
};

class FormatTally {
 public:
  void add(const std::string& format, uint64_t bytes);
  // Most bytes first (ties by name), pruned last.
  std::vector<FormatCount> counts() const;
  // [{"format": "trellis4", "experts": 102, "bytes": 50331648}, ..., {"format": null, ...}]
  nlohmann::ordered_json json() const;

 private:
  std::vector<FormatCount> counts_;  // in order of first appearance
};

}  // namespace eq::plan
