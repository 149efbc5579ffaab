#include "core/hash.h"

#define XXH_STATIC_LINKING_ONLY  // the state struct, to hold it by value
#include <xxhash.h>

namespace eq {

static_assert(sizeof(XXH64_state_t) == 88 && alignof(XXH64_state_t) <= 8,
              "Xxhash64::state_ must hold libxxhash's XXH64_state_t");

uint64_t xxhash64(const void* data, size_t n, uint64_t seed) { return XXH64(data, n, seed); }

Xxhash64::Xxhash64(uint64_t seed) { XXH64_reset(reinterpret_cast<XXH64_state_t*>(state_), seed); }

void Xxhash64::update(const void* data, size_t n) {
  if (n > 0) XXH64_update(reinterpret_cast<XXH64_state_t*>(state_), data, n);
}

uint64_t Xxhash64::digest() const { return XXH64_digest(reinterpret_cast<const XXH64_state_t*>(state_)); }

std::string hash_hex(uint64_t h) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, h >>= 4) s[i] = kDigits[h & 15];
  return s;
}

bool parse_hash_hex(std::string_view s, uint64_t* out) {
  if (s.size() != 16) return false;
  uint64_t v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else return false;
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  *out = v;
  return true;
}

}  // namespace eq
