// Guards for JSON read from files we do not control (configs, manifests,
// allocations, indexes, token files, safetensors headers).
//
// nlohmann::json parses iteratively, but copying, comparing or dump()ing a
// value recurses once per nesting level: a 100,000-deep "[[[[...]]]]" in any
// field we later copy or print overflows the stack. No file we read nests
// deeper than a handful of levels, so a depth limit checked before parsing
// turns that crash into an error message.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace eq::io {

inline constexpr size_t kMaxJsonDepth = 128;

// Throws eq::Error (kInvalidInput) naming `label` when arrays/objects in
// `text` nest deeper than `max_depth`. One linear pass, no allocation; brackets
// inside strings (with escapes) are not counted. Syntax is left to the parser.
void check_json_depth(std::string_view text, const std::string& label, size_t max_depth = kMaxJsonDepth);

}  // namespace eq::io
