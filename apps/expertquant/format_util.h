// Small printing helpers shared by the subcommands.
#pragma once

#include <cstdint>
#include <string>

#include "plan/format_tally.h"

namespace eq::app {

// 14920512 -> "14,920,512"
std::string with_commas(uint64_t n);
// 29980000 -> "28.6 MiB"
std::string human_bytes(double bytes);
// "trellis4 102 experts 48.00 MiB, int8_row 18 experts 9.00 MiB, pruned 2 experts"
std::string describe_format_mix(const plan::FormatTally& mix);

}  // namespace eq::app
