#include "core/hash.h"

#include <bit>
#include <cstring>

namespace eq {

namespace {

constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4FULL;
constexpr uint64_t kPrime3 = 0x165667B19E3779F9ULL;
constexpr uint64_t kPrime4 = 0x85EBCA77C2B2AE63ULL;
constexpr uint64_t kPrime5 = 0x27D4EB2F165667C5ULL;

// The spec reads lanes little-endian; memcpy keeps unaligned reads defined.
inline uint64_t read64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  return v;
}
inline uint32_t read32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap32(v);
  return v;
}

inline uint64_t mix_round(uint64_t acc, uint64_t lane) {
  acc += lane * kPrime2;
  acc = std::rotl(acc, 31);
  return acc * kPrime1;
}

inline uint64_t merge_round(uint64_t acc, uint64_t val) {
  acc ^= mix_round(0, val);
  return acc * kPrime1 + kPrime4;
}

// Consumes whole 32-byte stripes; returns the number of bytes consumed.
size_t consume_stripes(uint64_t acc[4], const uint8_t* p, size_t n) {
  size_t done = 0;
  for (; done + 32 <= n; done += 32) {
    acc[0] = mix_round(acc[0], read64(p + done));
    acc[1] = mix_round(acc[1], read64(p + done + 8));
    acc[2] = mix_round(acc[2], read64(p + done + 16));
    acc[3] = mix_round(acc[3], read64(p + done + 24));
  }
  return done;
}

uint64_t finish(const uint64_t acc[4], uint64_t seed, uint64_t total, const uint8_t* tail, size_t tail_n) {
  uint64_t h;
  if (total >= 32) {
    h = std::rotl(acc[0], 1) + std::rotl(acc[1], 7) + std::rotl(acc[2], 12) + std::rotl(acc[3], 18);
    for (int i = 0; i < 4; ++i) h = merge_round(h, acc[i]);
  } else {
    h = seed + kPrime5;
  }
  h += total;
  size_t i = 0;
  for (; i + 8 <= tail_n; i += 8) {
    h ^= mix_round(0, read64(tail + i));
    h = std::rotl(h, 27) * kPrime1 + kPrime4;
  }
  if (i + 4 <= tail_n) {
    h ^= static_cast<uint64_t>(read32(tail + i)) * kPrime1;
    h = std::rotl(h, 23) * kPrime2 + kPrime3;
    i += 4;
  }
  for (; i < tail_n; ++i) {
    h ^= static_cast<uint64_t>(tail[i]) * kPrime5;
    h = std::rotl(h, 11) * kPrime1;
  }
  h ^= h >> 33;
  h *= kPrime2;
  h ^= h >> 29;
  h *= kPrime3;
  h ^= h >> 32;
  return h;
}

void init_acc(uint64_t acc[4], uint64_t seed) {
  acc[0] = seed + kPrime1 + kPrime2;
  acc[1] = seed + kPrime2;
  acc[2] = seed;
  acc[3] = seed - kPrime1;
}

}  // namespace

uint64_t xxhash64(const void* data, size_t n, uint64_t seed) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t acc[4];
  init_acc(acc, seed);
  const size_t done = consume_stripes(acc, p, n);
  return finish(acc, seed, n, p + done, n - done);
}

Xxhash64::Xxhash64(uint64_t seed) : seed_(seed) { init_acc(acc_, seed); }

void Xxhash64::update(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  total_ += n;
  if (buffered_ > 0) {
    const size_t take = std::min(n, 32 - buffered_);
    std::memcpy(buffer_ + buffered_, p, take);
    buffered_ += take;
    p += take;
    n -= take;
    if (buffered_ < 32) return;
    consume_stripes(acc_, buffer_, 32);
    buffered_ = 0;
  }
  const size_t done = consume_stripes(acc_, p, n);
  std::memcpy(buffer_, p + done, n - done);
  buffered_ = n - done;
}

uint64_t Xxhash64::digest() const { return finish(acc_, seed_, total_, buffer_, buffered_); }

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
