// A description of every registered format for people: `expertquant formats`
// and the tail of `pack --help`. Everything comes from the rows themselves
// (FormatTraits) and the CPU this runs on; nothing here knows a format by name.
#pragma once

#include <string>
#include <vector>

#include "quant/format.h"

namespace eq::quant {

struct FormatInfo {
  std::string name;
  double bits_per_weight = 0;  // with scales and side data, large matrices
  std::string block;           // what one scale covers: "32 along K", "16x16 tiles, per-row scale", ...
  std::string shape_rule;      // what a matrix must satisfy: "cols % 32", "rows, cols % 16", "any"
  std::string decode;          // the few-token kernel on this CPU
  std::string prefill;         // the batch (many-token) kernel on this CPU
  std::string description;
};

// One entry per row of all_formats(), in registry order.
std::vector<FormatInfo> describe_formats();
FormatInfo describe_format(const FormatTraits& f);

}  // namespace eq::quant
