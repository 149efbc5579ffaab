// Character classes the tokenizer components test, from utf8proc's Unicode
// tables: whitespace (the White_Space property), numeric, punctuation,
// alphanumeric; and lowercasing.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace eq::tokenizer {

bool is_whitespace(char32_t cp);
bool is_numeric(char32_t cp);      // general categories Nd, Nl, No
bool is_punctuation(char32_t cp);  // ASCII punctuation and categories P*
bool is_alphanumeric(char32_t cp);

// Bytes of whitespace at the start / end of valid UTF-8 `s`.
size_t leading_whitespace_bytes(std::string_view s);
size_t trailing_whitespace_bytes(std::string_view s);

std::string to_lowercase(std::string_view s);

}  // namespace eq::tokenizer
