// The batch expert-MLP kernel (run_batch_mlp, MlpKernel::kBatch) against the
// reference (whole matrices dequantized, the MLP in float64), for every format
// family, odd sizes (partial panels and intermediate blocks) and every ISA
// this machine supports; and the properties dispatch relies on: a row's result
// does not depend on the other rows of its batch, nor on the thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "exec/batch_mlp.h"
#include "quant/format.h"

namespace eq::exec {
namespace {

class IsaGuard {
 public:
  explicit IsaGuard(Isa isa) { set_active_isa_for_testing(isa); }
  ~IsaGuard() { set_active_isa_for_testing(detected_isa()); }
};

std::vector<float> normal(int64_t n, uint64_t seed, float sigma) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

struct Expert {
  quant::QuantizedMatrix gate, up, down;
  ExpertWeights view() const { return {gate.view(), up.view(), down.view()}; }
};

Expert make_expert(const quant::FormatTraits& f, int64_t H, int64_t I, uint64_t seed) {
  const std::vector<float> g = normal(I * H, seed, 0.05f), u = normal(I * H, seed + 1, 0.05f),
                           d = normal(H * I, seed + 2, 0.05f);
  return {f.quantize(g.data(), I, H, {}), f.quantize(u.data(), I, H, {}), f.quantize(d.data(), H, I, {})};
}

// y = down(silu(gate x) * up x) from the dequantized matrices, in float64.
std::vector<double> reference(const Expert& e, const std::vector<float>& x, int64_t rows, int64_t H, int64_t I) {
  std::vector<float> g(static_cast<size_t>(I * H)), u(g.size()), d(static_cast<size_t>(H * I));
  e.gate.format->dequantize(e.gate.view(), g.data());
  e.up.format->dequantize(e.up.view(), u.data());
  e.down.format->dequantize(e.down.view(), d.data());
  std::vector<double> y(static_cast<size_t>(rows * H)), act(static_cast<size_t>(I));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < I; ++i) {
      double a = 0, b = 0;
      for (int64_t k = 0; k < H; ++k) {
        a += static_cast<double>(g[i * H + k]) * x[r * H + k];
        b += static_cast<double>(u[i * H + k]) * x[r * H + k];
      }
      act[i] = a / (1.0 + std::exp(-a)) * b;
    }
    for (int64_t h = 0; h < H; ++h) {
      double s = 0;
      for (int64_t i = 0; i < I; ++i) s += static_cast<double>(d[h * I + i]) * act[i];
      y[r * H + h] = s;
    }
  }
  return y;
}

std::vector<float> run(const Expert& e, const std::vector<float>& x, int64_t rows, int64_t H) {
  const ExpertWeights w = e.view();
  std::vector<float> y(static_cast<size_t>(rows * H), NAN);
  const ExpertBatch b{&w, e.gate.format, x.data(), y.data(), rows};
  run_batch_mlp(std::span(&b, 1));
  return y;
}

// (H, I) per family: partial 16-row panels, a short last intermediate block.
std::pair<int64_t, int64_t> shape_for(const quant::FormatTraits& f) {
  if (f.family == "trellis") return {48, 176};  // Hadamard blocks 16 x 16; I = 128 + 48
  if (f.group_size > 0) return {2 * f.group_size + (f.group_size == 128 ? 0 : f.group_size), 128 + f.group_size};
  return {37, 150};
}

TEST(BatchMlp, MatchesFloat64ReferenceForEveryFormatAndIsa) {
  for (const quant::FormatTraits& f : quant::all_formats()) {
    const auto [H, I] = shape_for(f);
    const Expert e = make_expert(f, H, I, 11 + f.name.size());
    const int64_t rows = 13;
    const std::vector<float> x = normal(rows * H, 5, 1.0f);
    const std::vector<double> want = reference(e, x, rows, H, I);
    double scale = 0;
    for (double v : want) scale = std::max(scale, std::abs(v));
    for (Isa isa : {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512}) {
      if (isa > detected_isa()) continue;
      IsaGuard guard(isa);
      const std::vector<float> y = run(e, x, rows, H);
      double worst = 0;
      for (size_t i = 0; i < y.size(); ++i) worst = std::max(worst, std::abs(y[i] - want[i]));
      EXPECT_LE(worst, 2e-5 * scale + 1e-7) << f.name << " isa " << isa_name(isa) << " H " << H << " I " << I
                                             << " max |y| " << scale;
    }
  }
}

TEST(BatchMlp, RowResultIndependentOfBatchAndThreads) {
  for (std::string_view name : {"fp4_g32", "int8_row", "bf16", "int3_g32", "trellis2"}) {
    const quant::FormatTraits& f = quant::format_by_name(name);
    const auto [H, I] = shape_for(f);
    const Expert e = make_expert(f, H, I, 3);
    const int64_t rows = 141;  // two row chunks, odd remainder rows
    const std::vector<float> x = normal(rows * H, 9, 1.0f);
    const std::vector<float> all = run(e, x, rows, H);
    for (int64_t r : {int64_t{0}, int64_t{5}, int64_t{128}, rows - 1}) {
      const std::vector<float> one = run(e, std::vector<float>(x.begin() + r * H, x.begin() + (r + 1) * H), 1, H);
      EXPECT_EQ(std::memcmp(one.data(), all.data() + r * H, H * sizeof(float)), 0) << name << " row " << r;
    }
    set_num_threads(1);
    const std::vector<float> single = run(e, x, rows, H);
    set_num_threads(0);
    EXPECT_EQ(std::memcmp(single.data(), all.data(), all.size() * sizeof(float)), 0) << name;
  }
}

}  // namespace
}  // namespace eq::exec
