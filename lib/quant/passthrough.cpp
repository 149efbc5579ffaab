#include "quant/passthrough.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "core/error.h"
#include "core/numeric.h"
#include "quant/panel_transpose.h"
#include "quant/quant_kernels.h"
#include "quant/quantize_common.h"

namespace eq::quant {

namespace {

constexpr int kInt8Max = 127;

float int8_row_error(const float* w, const float* h, int64_t n, float s) {
  float err = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float q = s > 0.0f ? std::clamp(std::nearbyint(w[i] / s), -127.0f, 127.0f) : 0.0f;
    const float d = q * s - w[i];
    err += h[i] * d * d;
  }
  return err;
}

// The weighted-error-minimizing symmetric scale of one row: amax/127 shrunk
// by up to 20% (clipping outliers), then least-squares refits. Rows whose
// nonzeros share one magnitude a use scale a (codes +-1): exact.
float search_int8_scale(const float* w, const float* h, int64_t n) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(w[i]));
  if (amax == 0.0f) return 0.0f;
  bool one_magnitude = true;
  for (int64_t i = 0; i < n; ++i) one_magnitude &= (w[i] == 0.0f || std::fabs(w[i]) == amax);
  if (one_magnitude) return amax;
  float best_s = amax / kInt8Max, best_err = int8_row_error(w, h, n, best_s);
  for (int i = 1; i <= 10; ++i) {
    const float s = amax * (1.0f - 0.02f * static_cast<float>(i)) / kInt8Max;
    const float err = int8_row_error(w, h, n, s);
    if (err < best_err) best_err = err, best_s = s;
  }
  for (int iter = 0; iter < 2; ++iter) {
    double num = 0.0, den = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const double q = std::clamp(std::nearbyint(w[i] / best_s), -127.0f, 127.0f);
      num += static_cast<double>(h[i]) * q * w[i];
      den += static_cast<double>(h[i]) * q * q;
    }
    if (den <= 0.0) break;
    const float s = static_cast<float>(num / den);
    const float err = s > 0.0f ? int8_row_error(w, h, n, s) : INFINITY;
    if (!(err < best_err)) break;
    best_err = err, best_s = s;
  }
  return best_s;
}

// y[i, n] (+)= dot(x_i, W_n) over rows of W converted to float in blocks.
void rowwise_matmul(const PackedMatrix& m, const float* x, int64_t m_rows, float* y, bool accumulate,
                    const std::function<void(int64_t n, float* row)>& load_row) {
  constexpr int64_t kBlock = 4;
  const int64_t N = m.rows, K = m.cols;
  const QuantKernels& kern = active_quant_kernels();
  std::vector<float> rows(static_cast<size_t>(kBlock * K));
  for (int64_t n0 = 0; n0 < N; n0 += kBlock) {
    const int64_t nb = std::min(kBlock, N - n0);
    for (int64_t j = 0; j < nb; ++j) load_row(n0 + j, rows.data() + j * K);
    for (int64_t i = 0; i < m_rows; ++i)
      for (int64_t j = 0; j < nb; ++j) {
        float& dst = y[i * N + n0 + j];
        dst = (accumulate ? dst : 0.0f) + kern.dot(x + i * K, rows.data() + j * K, K);
      }
  }
}

// Row-major W[r0:r1, c0:c1] to 16-row panels (FormatTraits::dequantize_block):
// 16 rows x 256 columns are converted by `load(n, c, count, dst)` into a
// buffer, then transposed into the panel.
void rowmajor_block(const PackedMatrix& m, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* out,
                    const std::function<void(int64_t n, int64_t c, int64_t count, float* dst)>& load) {
  if (r0 < 0 || r1 <= r0 || r1 > m.rows || c0 < 0 || c1 <= c0 || c1 > m.cols)
    invalid(std::string(m.format->name) + ": block out of range");
  constexpr int64_t kCols = 256;  // 16 rows x 256 columns: long contiguous reads per row
  const int64_t kcount = c1 - c0;
  alignas(64) float buf[kPanelWidth][kCols];
  const RowsToPanelFn to_panel = active_rows_to_panel();
  for (int64_t n0 = r0; n0 < r1; n0 += kPanelWidth) {
    const int64_t nb = std::min<int64_t>(kPanelWidth, r1 - n0);
    float* panel = out + (n0 - r0) * kcount;
    for (int64_t cc = c0; cc < c1; cc += kCols) {
      const int64_t count = std::min(kCols, c1 - cc);
      for (int64_t j = 0; j < kPanelWidth; ++j) {
        if (j < nb)
          load(n0 + j, cc, count, buf[j]);
        else
          std::fill(buf[j], buf[j] + count, 0.0f);
      }
      to_panel(&buf[0][0], kCols, count, panel + (cc - c0) * kPanelWidth);
    }
  }
}

}  // namespace

// ---------------------------------------------------------------- int8_row

std::vector<PartSpec> int8_row_part_specs(const FormatTraits&, int64_t rows, int64_t cols) {
  return {{"qweight", DType::kI8, {rows, cols}}, {"scales", DType::kF32, {rows}}};
}


QuantizedMatrix quantize_int8_row(const FormatTraits& format, const float* w, int64_t rows, int64_t cols,
                               const QuantizeOptions& options) {
  check_quantize_input(format, w, rows, cols, options);
  QuantizedMatrix out = allocate_quantized(format, rows, cols);
  int8_t* q = reinterpret_cast<int8_t*>(out.parts[0].bytes.data());
  float* scales = reinterpret_cast<float*>(out.parts[1].bytes.data());
  std::vector<float> h(static_cast<size_t>(cols));
  group_importance(options.importance, 0, static_cast<int>(cols), h.data());
  for (int64_t n = 0; n < rows; ++n) {
    const float* row = w + n * cols;
    const float s = search_int8_scale(row, h.data(), cols);
    scales[n] = s;
    if (s == 0.0f) continue;
    for (int64_t k = 0; k < cols; ++k)
      q[n * cols + k] = static_cast<int8_t>(std::clamp(std::nearbyint(row[k] / s), -127.0f, 127.0f));
  }
  return out;
}

void dequantize_int8_row(const PackedMatrix& m, float* out) {
  const int8_t* q = static_cast<const int8_t*>(m.parts[0].data);
  const float* scales = static_cast<const float*>(m.parts[1].data);
  const QuantKernels& kern = active_quant_kernels();
  for (int64_t n = 0; n < m.rows; ++n) kern.int8_to_f32(q + n * m.cols, scales[n], out + n * m.cols, m.cols);
}

void matmul_int8_row(const PackedMatrix& m, const float* x, int64_t m_rows, float* y, bool accumulate) {
  const int8_t* q = static_cast<const int8_t*>(m.parts[0].data);
  const float* scales = static_cast<const float*>(m.parts[1].data);
  const QuantKernels& kern = active_quant_kernels();
  rowwise_matmul(m, x, m_rows, y, accumulate,
                 [&](int64_t n, float* row) { kern.int8_to_f32(q + n * m.cols, scales[n], row, m.cols); });
}

void dequantize_block_int8_row(const PackedMatrix& m, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* out) {
  const int8_t* q = static_cast<const int8_t*>(m.parts[0].data);
  const float* scales = static_cast<const float*>(m.parts[1].data);
  const QuantKernels& kern = active_quant_kernels();
  rowmajor_block(m, r0, r1, c0, c1, out, [&](int64_t n, int64_t c, int64_t count, float* dst) {
    kern.int8_to_f32(q + n * m.cols + c, scales[n], dst, count);
  });
}

// ---------------------------------------------------------------- bf16

std::vector<PartSpec> bf16_part_specs(const FormatTraits&, int64_t rows, int64_t cols) {
  return {{"weight", DType::kBF16, {rows, cols}}};
}


QuantizedMatrix quantize_bf16(const FormatTraits& format, const float* w, int64_t rows, int64_t cols,
                               const QuantizeOptions& options) {
  check_quantize_input(format, w, rows, cols, options);
  QuantizedMatrix out = allocate_quantized(format, rows, cols);
  convert_f32_to_bf16(w, reinterpret_cast<uint16_t*>(out.parts[0].bytes.data()), static_cast<size_t>(rows * cols));
  return out;
}

void dequantize_bf16(const PackedMatrix& m, float* out) {
  convert_to_f32(DType::kBF16, m.parts[0].data, out, static_cast<size_t>(m.rows * m.cols));
}

void matmul_bf16(const PackedMatrix& m, const float* x, int64_t m_rows, float* y, bool accumulate) {
  const uint16_t* w = static_cast<const uint16_t*>(m.parts[0].data);
  rowwise_matmul(m, x, m_rows, y, accumulate, [&](int64_t n, float* row) {
    convert_to_f32(DType::kBF16, w + n * m.cols, row, static_cast<size_t>(m.cols));
  });
}

void dequantize_block_bf16(const PackedMatrix& m, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* out) {
  const uint16_t* w = static_cast<const uint16_t*>(m.parts[0].data);
  rowmajor_block(m, r0, r1, c0, c1, out, [&](int64_t n, int64_t c, int64_t count, float* dst) {
    convert_to_f32(DType::kBF16, w + n * m.cols + c, dst, static_cast<size_t>(count));
  });
}

}  // namespace eq::quant
