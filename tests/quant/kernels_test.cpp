// SIMD kernels against the scalar reference, on random inputs of odd sizes,
// for every ISA this machine supports (eq::set_active_isa_for_testing).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/cpu_features.h"
#include "core/numeric.h"
#include "quant/format.h"
#include "quant/packed_stream.h"
#include "quant/quant_kernels.h"
#include "quant_test_util.h"
#include "support/test_formats.h"

namespace eq::quant {
namespace {

using test::IsaGuard;
using test::normal_matrix;
using test::supported_isas;

bool is_stream_format(const FormatTraits& f) {
  return f.family == "fp4" || f.family == "mxfp4" || f.family == "nvfp4" || f.family == "affine";
}

bool is_my_format(const FormatTraits& f) { return is_stream_format(f) || f.family == "int8" || f.family == "bf16"; }

// Scalar definition of dequantization for the row-major passthrough formats.
std::vector<float> reference_dequantize(const QuantizedMatrix& q) {
  std::vector<float> out(static_cast<size_t>(q.rows * q.cols));
  const PackedMatrix m = q.view();
  if (is_stream_format(*q.format)) {
    stream_dequantize_reference(m, out.data());
  } else if (q.format->family == "int8") {
    const int8_t* codes = static_cast<const int8_t*>(m.parts[0].data);
    const float* scales = static_cast<const float*>(m.parts[1].data);
    for (int64_t n = 0; n < q.rows; ++n)
      for (int64_t k = 0; k < q.cols; ++k) out[n * q.cols + k] = static_cast<float>(codes[n * q.cols + k]) * scales[n];
  } else {
    const uint16_t* h = static_cast<const uint16_t*>(m.parts[0].data);
    for (size_t i = 0; i < out.size(); ++i) out[i] = bf16_to_f32(h[i]);
  }
  return out;
}

TEST(Kernels, TableMatchesIsa) {
  for (Isa isa : supported_isas()) {
    const QuantKernels& k = quant_kernels(isa);
    EXPECT_NE(k.decode_table4, nullptr);
    EXPECT_NE(k.panel_fma, nullptr);
    for (int bits : {2, 3, 4, 8}) EXPECT_NE(k.decode_uint(bits), nullptr);
  }
  if (detected_isa() >= Isa::kAvx512) {
    EXPECT_NE(quant_kernels(Isa::kAvx512).decode_table4, quant_kernels(Isa::kGeneric).decode_table4);
  }
}

TEST(Kernels, DequantizeMatchesReferenceBitExactOnEveryIsa) {
  for (const FormatTraits& f : eq::test::all_rows()) {
    if (!is_my_format(f)) continue;
    const int64_t g = std::max(f.col_multiple, 1);
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, g}, {17, 3 * g}, {40, 384}, {33, 5 * g}}) {
      if (cols % g != 0) continue;
      const std::vector<float> w = normal_matrix(rows, cols, static_cast<uint64_t>(rows * 1000 + cols), 0.05f);
      const QuantizedMatrix q = f.quantize(w.data(), rows, cols, QuantizeOptions{});
      const std::vector<float> ref = reference_dequantize(q);
      for (Isa isa : supported_isas()) {
        IsaGuard guard(isa);
        SCOPED_TRACE(std::string(f.name) + " [" + std::to_string(rows) + ", " + std::to_string(cols) + "] " +
                     std::string(isa_name(isa)));
        std::vector<float> out(ref.size(), -1.0f);
        f.dequantize(q.view(), out.data());
        for (size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(out[i], ref[i]) << "element " << i;
      }
    }
  }
}

TEST(Kernels, MatmulMatchesFloat64ReferenceOnEveryIsa) {
  for (const FormatTraits& f : eq::test::all_rows()) {
    if (!is_my_format(f)) continue;
    const int64_t g = std::max(f.col_multiple, 1);
    const int64_t rows = 37, cols = g * (256 / g + 1);
    const std::vector<float> w = normal_matrix(rows, cols, 11);
    const QuantizedMatrix q = f.quantize(w.data(), rows, cols, QuantizeOptions{});
    const std::vector<float> d = reference_dequantize(q);
    for (int64_t m : {1, 2, 7, 9}) {
      const std::vector<float> x = normal_matrix(m, cols, 50 + m);
      for (Isa isa : supported_isas()) {
        IsaGuard guard(isa);
        SCOPED_TRACE(std::string(f.name) + " m=" + std::to_string(m) + " " + std::string(isa_name(isa)));
        std::vector<float> y(static_cast<size_t>(m * rows));
        f.matmul(q.view(), x.data(), m, y.data(), false);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t n = 0; n < rows; ++n) {
            double ref = 0.0, mag = 0.0;
            for (int64_t k = 0; k < cols; ++k) {
              ref += static_cast<double>(x[i * cols + k]) * d[n * cols + k];
              mag += std::fabs(static_cast<double>(x[i * cols + k]) * d[n * cols + k]);
            }
            ASSERT_NEAR(y[i * rows + n], ref, 1e-5 * mag + 1e-6) << "i=" << i << " n=" << n;
          }
      }
    }
  }
}

TEST(Kernels, DotAndInt8ConversionMatchGenericOnOddSizes) {
  for (int64_t n : {1, 7, 15, 16, 33, 100, 257}) {
    const std::vector<float> a = normal_matrix(1, n, 1), b = normal_matrix(1, n, 2);
    std::vector<int8_t> q(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) q[i] = static_cast<int8_t>((i * 37) % 255 - 127);
    double ref = 0.0, mag = 0.0;
    for (int64_t i = 0; i < n; ++i) ref += static_cast<double>(a[i]) * b[i], mag += std::fabs(a[i] * b[i]);
    for (Isa isa : supported_isas()) {
      const QuantKernels& k = quant_kernels(isa);
      EXPECT_NEAR(k.dot(a.data(), b.data(), n), ref, 1e-6 * mag + 1e-7) << isa_name(isa) << " n=" << n;
      std::vector<float> out(static_cast<size_t>(n));
      k.int8_to_f32(q.data(), 0.25f, out.data(), n);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], q[i] * 0.25f);
    }
  }
}

}  // namespace
}  // namespace eq::quant
