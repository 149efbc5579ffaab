// Decode (gemv) kernels: every format's FormatTraits::gemv on every ISA this
// machine supports, against the generic kernel and against a float64 dot of
// the dequantized weights, on random inputs of odd sizes and row ranges.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "core/cpu_features.h"
#include "quant/format.h"
#include "quant/gemv.h"
#include "quant_test_util.h"
#include "support/test_formats.h"

namespace eq::quant {
namespace {

using test::IsaGuard;
using test::normal_matrix;
using test::supported_isas;

std::vector<float> run_gemv(const FormatTraits& f, const PackedMatrix& m, const GemvInput& in, int64_t begin,
                            int64_t end) {
  std::vector<float> y(static_cast<size_t>(end - begin), NAN);
  f.gemv->run(m, in, begin, end, y.data());
  return y;
}

TEST(Gemv, EveryFormatHasOne) {
  for (const FormatTraits& f : eq::test::all_rows()) EXPECT_NE(f.gemv, nullptr) << f.name;
}

TEST(Gemv, MatchesGenericAndFloat64OnEveryIsa) {
  for (const FormatTraits& f : eq::test::all_rows()) {
    // Kernels with their own input preparation (trellis): trellis_gemv_test.cpp.
    if (!f.gemv || f.gemv->prepare) continue;
    const int64_t g = std::max(f.col_multiple, 1);
    const int64_t r = std::max(f.row_multiple, 1);
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, g}, {17, 3 * g}, {37, 5 * g}, {70, 288}, {33, 37}}) {
      if (cols % g != 0 || rows % r != 0) continue;
      SCOPED_TRACE(std::string(f.name) + " [" + std::to_string(rows) + ", " + std::to_string(cols) + "]");
      const std::vector<float> w = normal_matrix(rows, cols, static_cast<uint64_t>(rows * 7919 + cols), 0.05f);
      std::vector<float> x = normal_matrix(1, cols, static_cast<uint64_t>(cols * 31 + 5), 1.0f);
      x[static_cast<size_t>(cols / 2)] = 9.0f;  // an outlier, as real activations have
      const QuantizedMatrix q = f.quantize(w.data(), rows, cols, QuantizeOptions{});
      const PackedMatrix m = q.view();
      const std::vector<float> wd = test::dequantized(q);
      GemvActivation act;
      act.set(x.data(), cols);
      const GemvInput& in = act.input();

      // float64 reference and the bound of the int8 rounding of x: |sum W (x - x^)| <= sum |W| scale/2.
      std::vector<double> ref(rows), bound(rows);
      for (int64_t n = 0; n < rows; ++n) {
        double s = 0.0, b = 0.0, mag = 0.0;
        for (int64_t k = 0; k < cols; ++k) {
          const double wk = wd[n * cols + k];
          s += wk * x[k];
          mag += std::fabs(wk * x[k]);
          b += std::fabs(wk) * in.q_scale[k / kGemvBlock] * 0.5;
        }
        ref[n] = s;
        bound[n] = (f.gemv->int8_activation ? b : 0.0) + 1e-5 * mag + 1e-6;
      }
      std::vector<float> generic;
      {
        IsaGuard guard(Isa::kGeneric);
        generic = run_gemv(f, m, in, 0, rows);
      }
      for (Isa isa : supported_isas()) {
        IsaGuard guard(isa);
        SCOPED_TRACE(std::string(isa_name(isa)));
        const std::vector<float> y = run_gemv(f, m, in, 0, rows);
        for (int64_t n = 0; n < rows; ++n) {
          EXPECT_NEAR(y[n], ref[n], bound[n]) << "row " << n;
          EXPECT_NEAR(y[n], generic[n], 1e-5 * (std::fabs(ref[n]) + bound[n]) + 1e-6) << "row " << n;
        }
        if (rows >= 37) {  // the typical error, not just the worst-case bound: int8 x costs < 1.5%
          double d = 0, m2 = 0;
          for (int64_t n = 0; n < rows; ++n) d += std::pow(y[n] - ref[n], 2), m2 += ref[n] * ref[n];
          if (isa == Isa::kGeneric)
            std::printf("  %-10s [%lld, %lld] relative L2 vs float64: %.3g\n", std::string(f.name).c_str(),
                        static_cast<long long>(rows), static_cast<long long>(cols), std::sqrt(d / m2));
          EXPECT_LT(std::sqrt(d / m2), f.gemv->int8_activation ? 1.5e-2 : 1e-5);
        }
        // A row range in the middle gives the same values as the full call.
        const int64_t begin = rows / 3, end = rows - rows / 4;
        const std::vector<float> part = run_gemv(f, m, in, begin, end);
        for (int64_t n = begin; n < end; ++n) EXPECT_EQ(part[n - begin], y[n]) << "row " << n;
      }
    }
  }
}

TEST(Gemv, ActivationIsInt8BlocksOf32) {
  std::vector<float> x(40);
  for (int i = 0; i < 40; ++i) x[i] = static_cast<float>(i) - 20.0f;
  GemvActivation act;
  act.set(x.data(), 40);
  const GemvInput& in = act.input();
  EXPECT_EQ(in.padded_cols, 64);
  EXPECT_FLOAT_EQ(in.q_scale[0], 20.0f / 127.0f);
  EXPECT_EQ(in.q[0], -127);
  EXPECT_EQ(in.q[20], 0);
  EXPECT_FLOAT_EQ(in.q_scale[1], 19.0f / 127.0f);
  EXPECT_EQ(in.q[39], 127);
  EXPECT_EQ(in.q[40], 0);  // padding
  // 4-bit order: per 8 k, even then odd.
  EXPECT_EQ(in.q_nib[1], in.q[2]);
  EXPECT_EQ(in.q_nib[4], in.q[1]);
  // 2-bit order: per 16 k, k = 4i + s at 4s + i.
  EXPECT_EQ(in.q_crumb[1], in.q[4]);
  EXPECT_EQ(in.q_crumb[4], in.q[1]);
}

}  // namespace
}  // namespace eq::quant
