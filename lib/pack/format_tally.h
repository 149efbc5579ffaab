// The format mix of a packed manifest (plan/format_tally.h): what pack prints
// beside the policy's class formats.
#pragma once

#include "plan/format_tally.h"

namespace eq::pack {

struct Manifest;

// The experts of a packed manifest, each with its packed bytes.
plan::FormatTally format_mix(const Manifest& m);

}  // namespace eq::pack
