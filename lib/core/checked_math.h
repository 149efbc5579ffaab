// Overflow-checked size arithmetic for sizes that come from files (shapes,
// offsets, counts): a header may declare anything, we must never wrap.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace eq {

inline std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<uint64_t> checked_add(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// Product of a shape; nullopt on overflow. An empty shape (scalar) has one element.
inline std::optional<uint64_t> checked_numel(std::span<const int64_t> shape) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    auto m = checked_mul(n, static_cast<uint64_t>(d));
    if (!m) return std::nullopt;
    n = *m;
  }
  return n;
}

}  // namespace eq
