// Bytes as UTF-8 text: valid sequences kept, each maximal invalid subpart
// (a stray continuation, a truncated sequence, an overlong form, a surrogate,
// a code point above U+10FFFF) replaced by U+FFFD, so any byte string can be
// shown as text without breaking the page or the terminal it lands in.
#pragma once

#include <string>
#include <string_view>

namespace eq {

inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD

std::string valid_utf8(std::string_view bytes);

}  // namespace eq
