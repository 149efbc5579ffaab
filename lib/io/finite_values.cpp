#include "io/finite_values.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/numeric.h"
#include "core/shape.h"

namespace eq::io {

size_t first_non_finite(const float* v, size_t n) {
  // A branch-free pass over blocks first: the common case (all finite) costs
  // one vectorizable sweep; the exact index is searched only in a bad block.
  constexpr size_t kBlock = 4096;
  for (size_t b = 0; b < n; b += kBlock) {
    const size_t e = std::min(n, b + kBlock);
    bool bad = false;
    for (size_t i = b; i < e; ++i) bad |= !std::isfinite(v[i]);
    if (bad)
      for (size_t i = b; i < e; ++i)
        if (!std::isfinite(v[i])) return i;
  }
  return n;
}

std::string flat_position(uint64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    const uint64_t dim = static_cast<uint64_t>(std::max<int64_t>(shape[d], 1));
    idx[d] = static_cast<int64_t>(flat % dim);
    flat /= dim;
  }
  return shape_str(idx);
}

void require_finite(const float* v, size_t n, const std::string& where, std::string_view tensor,
                    const std::vector<int64_t>& shape, uint64_t first_flat) {
  const size_t i = first_non_finite(v, n);
  if (i == n) return;
  const float x = v[i];
  const uint64_t flat = first_flat + i;
  invalid(where + ": tensor '" + std::string(tensor) + "' holds a non-finite value (" +
          (std::isnan(x) ? "nan" : x > 0 ? "+inf" : "-inf") + ") at flat index " + std::to_string(flat) + " " +
          flat_position(flat, shape));
}

void require_finite_stored(const TensorView& view, const std::string& where) {
  const TensorInfo& t = *view.info;
  if (!dtype_is_float(t.dtype)) return;
  constexpr uint64_t kChunk = 1 << 16;
  const uint64_t n = t.numel(), size = dtype_size(t.dtype);
  std::vector<float> buf(static_cast<size_t>(std::min(n, kChunk)));
  for (uint64_t first = 0; first < n; first += kChunk) {
    const uint64_t count = std::min(kChunk, n - first);
    convert_to_f32(t.dtype, view.data + first * size, buf.data(), static_cast<size_t>(count));
    require_finite(buf.data(), static_cast<size_t>(count), where, t.name, t.shape, first);
  }
}

}  // namespace eq::io
