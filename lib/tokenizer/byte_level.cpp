#include "tokenizer/byte_level.h"

#include <vector>

#include "core/utf8.h"

namespace eq::tokenizer {

namespace {
struct Alphabet {
  std::array<std::string, 256> chars;
  std::array<char32_t, 256> code_points{};
  Alphabet() {
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool self = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      code_points[b] = self ? static_cast<char32_t>(b) : next++;
      utf8_append(chars[b], code_points[b]);
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet a;
  return a;
}
}  // namespace

const std::array<std::string, 256>& byte_level_chars() { return alphabet().chars; }

void byte_level_encode(std::string_view bytes, std::string& out) {
  const auto& chars = alphabet().chars;
  for (unsigned char b : bytes) out += chars[b];
}

std::optional<uint8_t> byte_level_byte(char32_t cp) {
  // Code points 0..255 that stand for themselves, and 256..323 for the others.
  static const std::vector<int> inverse = [] {
    std::vector<int> v(324, -1);
    for (int b = 0; b < 256; ++b) v[alphabet().code_points[b]] = b;
    return v;
  }();
  if (cp >= inverse.size() || inverse[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(inverse[cp]);
}

}  // namespace eq::tokenizer
