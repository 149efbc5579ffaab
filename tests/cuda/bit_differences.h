// Element-by-element comparison of two runs that must give the same bits (a
// graph replay, another launch of the same kernels): how many floats differ.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>

namespace eq::test {

// How many floats of `a` differ in their bits from those of `b` (at least
// a's size); *first: the index of the first (-1: none).
inline int64_t bit_differences(std::span<const float> a, std::span<const float> b, int64_t* first) {
  int64_t differ = 0;
  *first = -1;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0 && differ++ == 0) *first = static_cast<int64_t>(i);
  return differ;
}

}  // namespace eq::test
