// Random Hadamard transform: block sizes, orthogonality, agreement with the
// O(B^2) definition, and SIMD kernels equal to the scalar ones bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "core/error.h"
#include "quant/hadamard.h"
#include "quant/trellis/kernels.h"

namespace eq::quant {
namespace {

std::vector<Isa> supported_isas() {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512})
    if (isa <= detected_isa()) isas.push_back(isa);
  return isas;
}

TEST(Hadamard, BlockSizeIsLargestPowerOfTwoUpTo128) {
  EXPECT_EQ(hadamard_block_size(16), 16);
  EXPECT_EQ(hadamard_block_size(48), 16);
  EXPECT_EQ(hadamard_block_size(96), 32);
  EXPECT_EQ(hadamard_block_size(768), 128);
  EXPECT_EQ(hadamard_block_size(2048), 128);
  EXPECT_EQ(hadamard_block_size(7), 1);
  EXPECT_THROW(hadamard_block_size(0), Error);
}

TEST(Hadamard, MatchesDefinitionAndIsItsOwnInverse) {
  std::mt19937 rng(1);
  std::normal_distribution<double> nd;
  for (int64_t dim : {16, 48, 96, 256, 384}) {
    std::vector<double> x(dim), fast(dim), ref(dim);
    for (auto& v : x) v = nd(rng);
    fast = x;
    ref = x;
    hadamard_f64(fast.data(), dim);
    hadamard_reference(ref.data(), dim);
    double norm_in = 0, norm_out = 0;
    for (int64_t i = 0; i < dim; ++i) {
      EXPECT_NEAR(fast[i], ref[i], 1e-12) << dim << " " << i;
      norm_in += x[i] * x[i];
      norm_out += fast[i] * fast[i];
    }
    EXPECT_NEAR(norm_in, norm_out, 1e-9 * norm_in);  // orthogonal
    hadamard_f64(fast.data(), dim);
    for (int64_t i = 0; i < dim; ++i) EXPECT_NEAR(fast[i], x[i], 1e-12);  // H H = I
  }
}

TEST(Hadamard, FloatRowsAndColumnsMatchReferenceOnEveryIsa) {
  std::mt19937 rng(2);
  std::normal_distribution<float> nd;
  const int64_t rows = 48, cols = 96;  // blocks 16 and 32
  std::vector<float> x(rows * cols);
  for (auto& v : x) v = nd(rng);
  // Reference: rows then columns in float64.
  std::vector<double> ref(x.begin(), x.end());
  for (int64_t r = 0; r < rows; ++r) hadamard_reference(ref.data() + r * cols, cols);
  for (int64_t c = 0; c < cols; ++c) {
    std::vector<double> col(rows);
    for (int64_t r = 0; r < rows; ++r) col[r] = ref[r * cols + c];
    hadamard_reference(col.data(), rows);
    for (int64_t r = 0; r < rows; ++r) ref[r * cols + c] = col[r];
  }
  std::vector<float> generic_out;
  for (Isa isa : supported_isas()) {
    set_active_isa_for_testing(isa);
    std::vector<float> y = x;
    hadamard_rows(y.data(), rows, cols);
    hadamard_columns(y.data(), rows, cols);
    for (int64_t i = 0; i < rows * cols; ++i) ASSERT_NEAR(y[i], ref[i], 1e-5) << isa_name(isa) << " " << i;
    if (isa == Isa::kGeneric) generic_out = y;
    else EXPECT_EQ(y, generic_out) << isa_name(isa) << " differs from generic";
  }
  set_active_isa_for_testing(detected_isa());
}

TEST(Hadamard, RandomSignsAreDeterministicAndBalanced) {
  auto a = random_signs(7, 1, 4096), b = random_signs(7, 1, 4096), c = random_signs(7, 2, 4096);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  int plus = 0;
  for (int8_t s : a) {
    ASSERT_TRUE(s == 1 || s == -1);
    plus += s == 1;
  }
  EXPECT_GT(plus, 1900);
  EXPECT_LT(plus, 2200);
}

}  // namespace
}  // namespace eq::quant
