// XXH64 through libxxhash (docs/design.md, "Dependencies"). Used for manifest
// checksums and checkpoint fingerprints: fast enough to hash every packed byte
// of a 400B model while it is written. Not a cryptographic hash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace eq {

// One-shot hash of a buffer.
uint64_t xxhash64(const void* data, size_t n, uint64_t seed = 0);
inline uint64_t xxhash64(std::span<const uint8_t> bytes, uint64_t seed = 0) {
  return xxhash64(bytes.data(), bytes.size(), seed);
}
inline uint64_t xxhash64(std::string_view s, uint64_t seed = 0) { return xxhash64(s.data(), s.size(), seed); }

// Streaming hash: update() any number of times, digest() gives the same value
// as the one-shot hash of the concatenated input.
class Xxhash64 {
 public:
  explicit Xxhash64(uint64_t seed = 0);
  void update(const void* data, size_t n);
  void update(std::span<const uint8_t> bytes) { update(bytes.data(), bytes.size()); }
  uint64_t digest() const;

 private:
  // libxxhash's XXH64_state_t, held by value (copyable, no allocation); its
  // size is checked against the library's header in hash.cpp.
  alignas(8) unsigned char state_[88];
};

// 16 lowercase hex digits, the spelling used in manifests.
std::string hash_hex(uint64_t h);
// Parses 16 hex digits; returns false when malformed.
bool parse_hash_hex(std::string_view s, uint64_t* out);

// One step of splitmix64 (advances state, returns the mixed output): the
// seeded generator of synthetic data and samplers.
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace eq
