// UTF-8 helpers for the tokenizer: decoding one code point, encoding one, and
// repairing byte strings that are not UTF-8. Text reaches the tokenizer as
// bytes; the reference tokenizer only accepts Unicode strings, so bytes that
// are not UTF-8 become U+FFFD, one per maximal invalid subpart (the rule of
// the WHATWG decoder and of Rust's from_utf8_lossy, which both references use).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace eq::tokenizer {

// Length in bytes of the valid UTF-8 sequence starting at s[i], or 0 when the
// bytes there are not a valid sequence.
size_t utf8_sequence_length(std::string_view s, size_t i);

// Code point of the valid sequence of length `len` at s[i].
char32_t utf8_decode_at(std::string_view s, size_t i, size_t len);

void utf8_append(std::string& out, char32_t cp);

// True when `s` is entirely valid UTF-8.
bool is_valid_utf8(std::string_view s);

// `s` with each maximal invalid subpart replaced by U+FFFD.
std::string utf8_repair(std::string_view s);

}  // namespace eq::tokenizer
