// UTF-8 helpers: decoding and encoding one code point, checking, and
// repairing bytes that are not UTF-8. Each maximal invalid subpart (a stray
// continuation, a truncated sequence, an overlong form, a surrogate, a code
// point above U+10FFFF) becomes one U+FFFD, the rule of the WHATWG decoder and
// of Rust's from_utf8_lossy, so any byte string can be shown or tokenized as
// text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace eq {

inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD

// Length in bytes of the valid UTF-8 sequence starting at s[i], or 0 when the
// bytes there are not a valid sequence.
size_t utf8_sequence_length(std::string_view s, size_t i);

// Code point of the valid sequence of length `len` at s[i].
char32_t utf8_decode_at(std::string_view s, size_t i, size_t len);

void utf8_append(std::string& out, char32_t cp);

// True when `s` is entirely valid UTF-8.
bool is_valid_utf8(std::string_view s);

// `bytes` with each maximal invalid subpart replaced by U+FFFD.
std::string valid_utf8(std::string_view bytes);

}  // namespace eq
