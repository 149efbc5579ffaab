// Generic checks that every registered format must pass (trellis rows are
// picked up automatically): names, round trip, matmul against a float64
// reference, packed sizes, validation, zeros and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <string>

#include "core/error.h"
#include "quant/format.h"
#include "quant_test_util.h"
#include "support/test_formats.h"

namespace eq::quant {
namespace {

using test::dequantized;
using test::normal_matrix;

// A shape every format accepts: multiples of each format's row/col multiple.
std::pair<int64_t, int64_t> shape_for(const FormatTraits& f, int64_t rows, int64_t cols) {
  auto round_up = [](int64_t v, int64_t m) { return (v + m - 1) / m * m; };
  return {round_up(rows, f.row_multiple), round_up(cols, f.col_multiple)};
}

TEST(Registry, NamesAreUniqueAndLookupWorks) {
  std::set<std::string> names;
  for (const FormatTraits& f : eq::test::all_rows()) {
    EXPECT_TRUE(names.insert(std::string(f.name)).second) << f.name;
    EXPECT_EQ(&format_by_name(f.name), &f);
    EXPECT_EQ(find_format(f.name), &f);
    EXPECT_GT(f.bits_per_weight, 0.0);
    EXPECT_EQ(f.parts.size() > 0, true);
  }
  for (const char* name : {"fp4_g16", "fp4_g32", "fp4_g64", "fp4_g128", "mxfp4", "nvfp4", "int2_g64", "int3_g64",
                           "int4_g64", "int8_g64", "int8_row", "bf16"})
    EXPECT_NE(find_format(name), nullptr) << name;
  EXPECT_EQ(find_format("fp5"), nullptr);
  try {
    format_by_name("fp5");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fp4_g32"), std::string::npos) << "lists valid names: " << e.what();
  }
}

// The codes come first and once; the other parts' roles match what the
// quantizer stores there (a float side part, or int8 signs).
TEST(Registry, EveryPartHasTheRoleOfWhatItHolds) {
  for (const FormatTraits& f : eq::test::all_rows()) {
    SCOPED_TRACE(std::string(f.name));
    ASSERT_FALSE(f.parts.empty());
    EXPECT_EQ(f.parts[0].role, PartRole::kCodes);
    const std::vector<PartSpec> specs = f.part_specs(shape_for(f, 64, 256).first, shape_for(f, 64, 256).second);
    ASSERT_EQ(specs.size(), f.parts.size());
    for (size_t i = 1; i < f.parts.size(); ++i) {
      EXPECT_NE(f.parts[i].role, PartRole::kCodes) << f.parts[i].name;
      if (f.parts[i].role == PartRole::kSigns) EXPECT_EQ(specs[i].dtype, DType::kI8) << f.parts[i].name;
      else EXPECT_NE(specs[i].dtype, DType::kI8) << f.parts[i].name;
    }
  }
  EXPECT_EQ(format_by_name("int4_g64").parts[2].role, PartRole::kBiases);
  EXPECT_EQ(format_by_name("nvfp4").parts[2].role, PartRole::kTensorScale);
  EXPECT_EQ(format_by_name("trellis3").parts[1].role, PartRole::kSigns);
}

TEST(Registry, EveryFormatRoundTripsMatmulsAndValidates) {
  for (const FormatTraits& f : eq::test::all_rows()) {
    SCOPED_TRACE(std::string(f.name));
    const auto [rows, cols] = shape_for(f, 40, 256);
    const std::vector<float> w = normal_matrix(rows, cols, 7);
    QuantizeOptions options;
    options.tensor_name = "test.weight";
    const QuantizedMatrix q = f.quantize(w.data(), rows, cols, options);
    EXPECT_EQ(q.format, &f);
    EXPECT_EQ(q.nbytes(), f.packed_bytes(rows, cols));
    ASSERT_EQ(q.parts.size(), f.parts.size());
    for (size_t i = 0; i < q.parts.size(); ++i) EXPECT_EQ(q.parts[i].name, f.parts[i].name);
    EXPECT_NO_THROW(validate_packed(q.view(), "test.weight"));

    // Round trip: finite and bounded (the worst formats here are 2-bit: MSE well under the variance 1).
    const std::vector<float> d = dequantized(q);
    for (float v : d) ASSERT_TRUE(std::isfinite(v));
    EXPECT_LT(test::mse(w, d), 0.5);
    // bits_per_weight describes large matrices (row scales, sign vectors and
    // the like amortize): compare with packed_bytes of a 4096 x 4096 one.
    const auto [big_rows, big_cols] = shape_for(f, 4096, 4096);
    EXPECT_NEAR(8.0 * static_cast<double>(f.packed_bytes(big_rows, big_cols)) / static_cast<double>(big_rows * big_cols),
                f.bits_per_weight, 0.02 * f.bits_per_weight);

    // matmul == dequantize then float64 matmul, for odd M, overwrite and accumulate.
    for (int64_t m : {1, 3, 5}) {
      const std::vector<float> x = normal_matrix(m, cols, 100 + m);
      std::vector<float> y(static_cast<size_t>(m * rows), 1.0f);
      f.matmul(q.view(), x.data(), m, y.data(), false);
      std::vector<float> y_acc(static_cast<size_t>(m * rows), 1.0f);
      f.matmul(q.view(), x.data(), m, y_acc.data(), true);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t n = 0; n < rows; ++n) {
          double ref = 0.0, mag = 0.0;
          for (int64_t k = 0; k < cols; ++k) {
            ref += static_cast<double>(x[i * cols + k]) * d[n * cols + k];
            mag += std::fabs(static_cast<double>(x[i * cols + k]) * d[n * cols + k]);
          }
          const double tol = 1e-5 * mag + 1e-6;
          ASSERT_NEAR(y[i * rows + n], ref, tol) << "m=" << m << " i=" << i << " n=" << n;
          ASSERT_NEAR(y_acc[i * rows + n], ref + 1.0, tol + 1e-6) << "accumulate, m=" << m;
        }
    }

    // validate_packed rejects a wrong shape, a missing part and a wrong dtype.
    PackedMatrix bad = q.view();
    bad.parts[0].shape[0] += 1;
    EXPECT_THROW(validate_packed(bad, "test.weight"), Error);
    bad = q.view();
    bad.parts.pop_back();
    EXPECT_THROW(validate_packed(bad, "test.weight"), Error);
    bad = q.view();
    bad.cols += f.col_multiple;
    EXPECT_THROW(validate_packed(bad, "test.weight"), Error);
  }
}

TEST(Registry, ZerosRoundTripToZero) {
  for (const FormatTraits& f : eq::test::all_rows()) {
    SCOPED_TRACE(std::string(f.name));
    const auto [rows, cols] = shape_for(f, 16, 128);
    const std::vector<float> w(static_cast<size_t>(rows * cols), 0.0f);
    const std::vector<float> d = dequantized(f.quantize(w.data(), rows, cols, QuantizeOptions{}));
    for (float v : d) ASSERT_EQ(v, 0.0f);
  }
}

TEST(Registry, NonFiniteWeightIsAnErrorNamingTensorAndPosition) {
  for (const FormatTraits& f : eq::test::all_rows()) {
    SCOPED_TRACE(std::string(f.name));
    const auto [rows, cols] = shape_for(f, 16, 128);
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
      std::vector<float> w = normal_matrix(rows, cols, 3);
      w[5 * cols + 17] = bad;
      QuantizeOptions options;
      options.tensor_name = "layers.3.experts.7.up_proj.weight";
      try {
        f.quantize(w.data(), rows, cols, options);
        ADD_FAILURE() << "no error for " << bad;
      } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("layers.3.experts.7.up_proj.weight"), std::string::npos) << msg;
        const bool names_position = (msg.find("row 5") != std::string::npos && msg.find("col 17") != std::string::npos) ||
                                    msg.find("5, 17") != std::string::npos;
        EXPECT_TRUE(names_position) << msg;
      }
    }
  }
}

TEST(Registry, IndivisibleShapeIsAClearError) {
  for (const FormatTraits& f : eq::test::all_rows()) {
    SCOPED_TRACE(std::string(f.name));
    const auto [rows, cols] = shape_for(f, 16, 128);
    if (f.col_multiple > 1) {
      const int64_t bad_cols = cols + 1;
      const std::vector<float> w = normal_matrix(rows, bad_cols, 3);
      QuantizeOptions options;
      options.tensor_name = "odd.weight";
      try {
        f.quantize(w.data(), rows, bad_cols, options);
        ADD_FAILURE() << "no error for cols " << bad_cols;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("odd.weight"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find(std::to_string(bad_cols)), std::string::npos) << e.what();
      }
    }
    if (f.row_multiple > 1) {
      const std::vector<float> w = normal_matrix(rows + 1, cols, 3);
      EXPECT_THROW(f.quantize(w.data(), rows + 1, cols, QuantizeOptions{}), Error);
    }
  }
}

}  // namespace
}  // namespace eq::quant
