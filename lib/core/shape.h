// Tensor shapes in error messages: "[2, 3, 16]". One spelling for every
// message that names a shape, so users can grep them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace eq {

inline std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace eq
