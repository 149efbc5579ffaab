// The elementwise float kernels (SwiGLU, softmax): every element's value must
// depend only on its inputs — not on the address of the array nor on where a
// caller's chunk starts — on every ISA, because the executor's dispatch
// strategies place the same row at different addresses and must agree bit for
// bit (exec/decode_mlp_test.cpp). Also checked against float64.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "model/kernels/float_kernels.h"

namespace eq::model::kernels {
namespace {

std::vector<Isa> isas() {
  std::vector<Isa> out;
  for (int i = 0; i <= static_cast<int>(detected_isa()); ++i) out.push_back(static_cast<Isa>(i));
  return out;
}

std::vector<float> random_values(size_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

TEST(FloatKernels, SiluMulDependsOnlyOnValues) {
  const int64_t n = 301;  // not a multiple of any packet
  const std::vector<float> g = random_values(n, 4.0f, 1), u = random_values(n, 1.0f, 2);
  for (Isa isa : isas()) {
    set_active_isa_for_testing(isa);
    std::vector<float> whole(n);
    silu_mul(g.data(), u.data(), n, whole.data());
    for (int64_t i = 0; i < n; ++i) {
      const double gd = g[i], want = gd / (1.0 + std::exp(-gd)) * u[i];
      ASSERT_NEAR(whole[i], want, 2e-6 * (std::fabs(want) + 1e-3)) << i;
    }
    // Shifted copies (every alignment mod 64 bytes) and arbitrary chunks.
    for (int shift = 1; shift < 16; ++shift) {
      std::vector<float> gs(n + shift), us(n + shift), out(n + shift);
      std::copy(g.begin(), g.end(), gs.begin() + shift);
      std::copy(u.begin(), u.end(), us.begin() + shift);
      for (int64_t b = 0; b < n; b += 7 * shift)
        silu_mul(gs.data() + shift + b, us.data() + shift + b, std::min<int64_t>(7 * shift, n - b),
                 out.data() + shift + b);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[shift + i], whole[i]) << "shift " << shift << " i " << i;
    }
  }
  set_active_isa_for_testing(detected_isa());
}

TEST(FloatKernels, SoftmaxDependsOnlyOnValues) {
  const int64_t n = 157;
  const std::vector<float> x = random_values(n, 3.0f, 3);
  double max = x[0], sum = 0;
  for (float v : x) max = std::max<double>(max, v);
  for (float v : x) sum += std::exp(v - max);
  for (Isa isa : isas()) {
    set_active_isa_for_testing(isa);
    std::vector<float> ref = x;
    softmax_row(ref.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(ref[i], std::exp(x[i] - max) / sum, 2e-7) << i;
    for (int shift = 1; shift < 16; ++shift) {
      std::vector<float> buf(n + shift);
      std::copy(x.begin(), x.end(), buf.begin() + shift);
      softmax_row(buf.data() + shift, n);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(buf[shift + i], ref[i]) << "shift " << shift;
    }
  }
  set_active_isa_for_testing(detected_isa());
}

}  // namespace
}  // namespace eq::model::kernels
