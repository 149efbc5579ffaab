// The byte-to-character alphabet of byte-level BPE: every byte maps to one
// printable code point (printable ASCII and Latin-1 map to themselves, the
// rest to U+0100 onwards), so any byte string is a string of "visible" tokens.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace eq::tokenizer {

// UTF-8 of the character standing for each byte.
const std::array<std::string, 256>& byte_level_chars();

// Appends the byte-level form of `bytes` to `out`.
void byte_level_encode(std::string_view bytes, std::string& out);

// The byte a character stands for, if it is one of the 256.
std::optional<uint8_t> byte_level_byte(char32_t cp);

}  // namespace eq::tokenizer
