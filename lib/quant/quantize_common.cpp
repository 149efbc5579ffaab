#include "quant/quantize_common.h"

#include <cmath>

#include "core/error.h"

namespace eq::quant {

std::string tensor_label(const QuantizeOptions& options) {
  return options.tensor_name.empty() ? std::string("<unnamed>") : options.tensor_name;
}

void check_quantize_input(const FormatTraits& format, const float* w, int64_t rows, int64_t cols,
                          const QuantizeOptions& options) {
  const std::string where = "quantize " + std::string(format.name) + " of tensor " + tensor_label(options);
  const std::string shape = "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
  if (rows <= 0 || cols <= 0) invalid(where + ": shape " + shape + " is empty");
  if (rows % format.row_multiple != 0)
    invalid(where + ": rows " + std::to_string(rows) + " (shape " + shape + ") is not a multiple of " +
            std::to_string(format.row_multiple));
  if (cols % format.col_multiple != 0)
    invalid(where + ": cols (input dim) " + std::to_string(cols) + " (shape " + shape + ") is not a multiple of " +
            std::to_string(format.col_multiple) + "; padding is not supported");
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = w + r * cols;
    for (int64_t c = 0; c < cols; ++c)
      if (!std::isfinite(row[c]))
        invalid(where + ": non-finite weight " + std::to_string(row[c]) + " at (row " + std::to_string(r) + ", col " +
                std::to_string(c) + ")");
  }
  if (options.importance != nullptr)
    for (int64_t c = 0; c < cols; ++c)
      if (!std::isfinite(options.importance[c]) || options.importance[c] < 0.0f)
        invalid(where + ": importance[" + std::to_string(c) + "] = " + std::to_string(options.importance[c]) +
                " is not a finite non-negative number");
}

size_t specs_nbytes(const std::vector<PartSpec>& specs) {
  size_t total = 0;
  for (const PartSpec& s : specs) {
    size_t n = dtype_size(s.dtype);
    for (int64_t d : s.shape) n *= static_cast<size_t>(d);
    total += n;
  }
  return total;
}

QuantizedMatrix allocate_quantized(const FormatTraits& format, int64_t rows, int64_t cols) {
  QuantizedMatrix q;
  q.format = &format;
  q.rows = rows;
  q.cols = cols;
  for (PartSpec& s : format.part_specs(rows, cols)) {
    size_t n = dtype_size(s.dtype);
    for (int64_t d : s.shape) n *= static_cast<size_t>(d);
    q.parts.push_back(QuantizedMatrix::Part{std::move(s.name), s.dtype, std::move(s.shape), std::vector<uint8_t>(n)});
  }
  return q;
}

void group_importance(const float* importance, int64_t k0, int n, float* out) {
  double sum = 0.0;
  if (importance != nullptr)
    for (int i = 0; i < n; ++i) sum += importance[k0 + i];
  if (sum <= 0.0) {
    for (int i = 0; i < n; ++i) out[i] = 1.0f;
    return;
  }
  for (int i = 0; i < n; ++i) out[i] = importance[k0 + i];
}

}  // namespace eq::quant
