#include "core/utf8.h"

#include <cstdint>

namespace eq {
namespace {

// Length of the valid sequence at s[i], or 0. The second byte's range
// depends on the first (Unicode Table 3-7): it excludes overlongs
// (E0 80..9F, F0 80..8F), surrogates (ED A0..BF) and beyond U+10FFFF (F4 90..).
size_t valid_sequence(std::string_view s, size_t i, size_t* invalid_len) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t c = b(i);
  *invalid_len = 1;
  if (c < 0x80) return 1;
  size_t n = 0;
  uint8_t lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;  // a continuation byte, C0, C1 or F5..FF: never a first byte
  }
  for (size_t k = 1; k < n; ++k) {
    if (i + k >= s.size()) return 0;
    const uint8_t v = b(i + k);
    if (k == 1 ? (v < lo || v > hi) : (v < 0x80 || v > 0xBF)) return 0;
    *invalid_len = k + 1;  // the bytes read so far are one maximal subpart
  }
  return n;
}

}  // namespace

std::string valid_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    size_t invalid_len = 1;
    const size_t n = valid_sequence(bytes, i, &invalid_len);
    if (n) {
      out.append(bytes.substr(i, n));
      i += n;
    } else {
      out.append(kReplacementCharacter);
      i += invalid_len;
    }
  }
  return out;
}

}  // namespace eq
