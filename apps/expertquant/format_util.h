// Small printing helpers shared by the subcommands.
#pragma once

#include <cstdint>
#include <string>

namespace eq::app {

// 14920512 -> "14,920,512"
std::string with_commas(uint64_t n);
// 29980000 -> "28.6 MiB"
std::string human_bytes(double bytes);

}  // namespace eq::app
