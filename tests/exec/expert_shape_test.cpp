// Experts with gate/up/down biases and the clamped SwiGLU (ExpertWeights'
// shape fields) through every executor path: run_expert, the batch kernel
// (fp32 panels, int8 panels, trellis fp32 and int8), the decode and
// small-batch kernels, on every ISA this machine has; and a layer of such
// experts through every dispatch strategy. Each against a float64 MLP on the
// dequantized weights, at the tolerances of batch_mlp_test.cpp, and the
// strategies against each other bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>

#include "core/cpu_features.h"
#include "exec/batch_mlp.h"
#include "exec/decode_mlp.h"
#include "exec/dispatch.h"
#include "exec/int8_panel_gemm.h"
#include "quant/format.h"
#include "quant/gemv.h"
#include "../quant/quant_test_util.h"
#include "support/test_formats.h"

namespace eq::exec {
namespace {

using quant::test::IsaGuard;

std::vector<float> normal(int64_t n, uint64_t seed, float sigma) { return quant::test::normal_matrix(1, n, seed, sigma); }

const model::Activation kClamped{.kind = model::ActivationKind::kSwiGluClamped, .alpha = 1.702f, .limit = 7.0f};

// One expert's quantized matrices and biases; view() points into them.
struct Expert {
  quant::QuantizedMatrix gate, up, down;
  std::vector<float> gate_bias, up_bias, down_bias;
  model::Activation act;
  ExpertWeights view() const {
    ExpertWeights w{gate.view(), up.view(), down.view()};
    w.gate_bias = gate_bias.empty() ? nullptr : gate_bias.data();
    w.up_bias = up_bias.empty() ? nullptr : up_bias.data();
    w.down_bias = down_bias.empty() ? nullptr : down_bias.data();
    w.act = act;
    return w;
  }
};

// Gate and up biases of s.d. 3 on top of x of s.d. 6 put a good share of the
// gate and up inputs beyond ±7 (the clamp matters); the down bias is of the
// size of the output, so adding it twice or not at all fails every bound.
std::unique_ptr<Expert> make_expert(const quant::FormatTraits& f, int64_t H, int64_t I, uint64_t seed) {
  const std::vector<float> g = normal(I * H, seed, 0.05f), u = normal(I * H, seed + 1, 0.05f),
                           d = normal(H * I, seed + 2, 0.05f);
  auto e = std::make_unique<Expert>();
  e->gate = f.quantize(g.data(), I, H, {});
  e->up = f.quantize(u.data(), I, H, {});
  e->down = f.quantize(d.data(), H, I, {});
  e->gate_bias = normal(I, seed + 3, 3.0f);
  e->up_bias = normal(I, seed + 4, 3.0f);
  e->down_bias = normal(H, seed + 5, 3.0f);
  e->act = kClamped;
  return e;
}

double act64(const model::Activation& a, double g, double u) {
  if (a.kind == model::ActivationKind::kSwiGlu) return g / (1.0 + std::exp(-g)) * u;
  g = std::min<double>(g, a.limit);
  u = std::clamp<double>(u, -a.limit, a.limit);
  return (u + 1.0) * g / (1.0 + std::exp(-static_cast<double>(a.alpha) * g));
}

// The float64 MLP of one expert on the dequantized weights. `beyond`: how
// many gate inputs exceeded the limit.
std::vector<double> reference(const ExpertWeights& w, const float* x, int64_t rows, int64_t* beyond = nullptr) {
  const int64_t I = w.gate.rows, H = w.gate.cols;
  std::vector<float> g(static_cast<size_t>(I * H)), u(g.size()), d(g.size());
  w.gate.format->dequantize(w.gate, g.data());
  w.up.format->dequantize(w.up, u.data());
  w.down.format->dequantize(w.down, d.data());
  std::vector<double> y(static_cast<size_t>(rows * H)), h(static_cast<size_t>(I));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < I; ++i) {
      double a = w.gate_bias ? w.gate_bias[i] : 0.0, b = w.up_bias ? w.up_bias[i] : 0.0;
      for (int64_t k = 0; k < H; ++k) {
        a += static_cast<double>(g[i * H + k]) * x[r * H + k];
        b += static_cast<double>(u[i * H + k]) * x[r * H + k];
      }
      if (beyond) *beyond += a > w.act.limit;
      h[i] = act64(w.act, a, b);
    }
    for (int64_t o = 0; o < H; ++o) {
      double s = w.down_bias ? w.down_bias[o] : 0.0;
      for (int64_t i = 0; i < I; ++i) s += static_cast<double>(d[o * I + i]) * h[i];
      y[r * H + o] = s;
    }
  }
  return y;
}

double rel_l2(const float* y, const double* want, size_t n) {
  double d = 0, m = 0;
  for (size_t i = 0; i < n; ++i) d += (y[i] - want[i]) * (y[i] - want[i]), m += want[i] * want[i];
  return std::sqrt(d / m);
}

double max_abs_err(const std::vector<float>& y, const std::vector<double>& want, double* scale) {
  double worst = 0;
  *scale = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    worst = std::max(worst, std::abs(y[i] - want[i]));
    *scale = std::max(*scale, std::abs(want[i]));
  }
  return worst;
}

// batch_mlp_test.cpp's bounds: fp32 arithmetic within 2e-5 of the largest
// output; int8 activations (int8 panels, trellis int8 codes, the decode
// kernels) within 2% relative L2.
constexpr double kFp32Rel = 2e-5;
constexpr double kInt8RelL2 = 2e-2;

// (H, I) per format: whole 32-k units (the integer paths can run), a short
// last intermediate block, and for the fp32 path also an odd shape.
std::vector<std::pair<int64_t, int64_t>> shapes_for(const quant::FormatTraits& f) {
  if (f.family == "trellis") return {{48, 176}, {64, 192}};
  // H of at least 64: narrower, the gate inputs rarely reach the clamp.
  if (f.group_size > 0) {
    const int64_t g = std::max(f.group_size, 32);
    return {{2 * g, 128 + g}};
  }
  return {{37, 150}, {64, 160}};
}

TEST(ExpertShape, EveryPathMatchesFloat64WithBiasesAndClampedSwiGlu) {
  for (const quant::FormatTraits& f : eq::test::all_rows()) {
    for (const auto& [H, I] : shapes_for(f)) {
      const std::unique_ptr<Expert> e = make_expert(f, H, I, 41 + f.name.size());
      const ExpertWeights w = e->view();
      const int64_t rows = 13;
      const std::vector<float> x = normal(rows * H, 8, 6.0f);
      int64_t beyond = 0;
      const std::vector<double> want = reference(w, x.data(), rows, &beyond);
      ASSERT_GT(beyond, rows * I / 100) << f.name << ": the clamp is not exercised";
      for (Isa isa : {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512}) {
        if (isa > detected_isa()) continue;
        IsaGuard guard(isa);
        const std::string at = std::string(f.name) + " " + std::to_string(H) + "x" + std::to_string(I) + " isa " +
                               std::string(isa_name(isa));
        auto tight = [&](const std::vector<float>& y, const char* path) {
          double scale = 0;
          const double worst = max_abs_err(y, want, &scale);
          EXPECT_LE(worst, kFp32Rel * scale + 1e-7) << at << " " << path << " max |y| " << scale;
        };
        auto loose = [&](const std::vector<float>& y, const char* path) {
          EXPECT_LT(rel_l2(y.data(), want.data(), y.size()), kInt8RelL2) << at << " " << path;
        };
        // run_expert: the format's own matmuls (fp32).
        std::vector<float> y(static_cast<size_t>(rows * H), NAN);
        model::FloatBuffer scratch;
        run_expert(w, x.data(), rows, y.data(), scratch);
        tight(y, "run_expert");
        // The batch kernel, trellis with fp32 panels and with int8 codes.
        const bool int8 = f.family == "trellis" ? false
                                                : f.int8_panels && active_int8_batch_kernels().gemm && H % 32 == 0 &&
                                                      I % 32 == 0;
        for (bool trellis_int8 : {false, true}) {
          if (trellis_int8 && !f.rotated) continue;
          std::fill(y.begin(), y.end(), NAN);
          const ExpertBatch b{&w, &f, x.data(), y.data(), rows};
          run_batch_mlp(std::span(&b, 1), {.rotated_int8 = trellis_int8});
          const bool ran_int8 = int8 || (trellis_int8 && active_int8_batch_kernels().gemm && H % 32 == 0);
          if (ran_int8)
            loose(y, "batch (int8)");
          else
            tight(y, "batch (fp32)");
        }
        // The decode kernel and its small-batch variant: the same bits per row.
        std::vector<float> yd(y.size(), NAN), ys(y.size(), NAN);
        const ExpertBatch bd{&w, &f, x.data(), yd.data(), rows}, bs{&w, &f, x.data(), ys.data(), rows};
        run_decode_mlp(std::span(&bd, 1), 1);
        run_decode_mlp(std::span(&bs, 1), quant::kMaxGemvRows);
        loose(yd, "decode");
        EXPECT_EQ(std::memcmp(yd.data(), ys.data(), yd.size() * sizeof(float)), 0) << at << " small-batch vs decode";
      }
    }
  }
}

// Without biases, with SwiGLU: the fields at their defaults are the expert
// MLP every checkpoint before had (a float64 check that the defaults mean
// "no bias, plain SwiGLU" on every path).
TEST(ExpertShape, DefaultsAreBiasFreeSwiGlu) {
  const quant::FormatTraits& f = quant::format_by_name("bf16");
  const int64_t H = 64, I = 160, rows = 9;
  std::unique_ptr<Expert> e = make_expert(f, H, I, 5);
  e->gate_bias.clear(), e->up_bias.clear(), e->down_bias.clear();
  e->act = {};
  const ExpertWeights w = e->view();
  EXPECT_EQ(w.gate_bias, nullptr);
  EXPECT_EQ(w.act.kind, model::ActivationKind::kSwiGlu);
  const std::vector<float> x = normal(rows * H, 3, 1.0f);
  const std::vector<double> want = reference(w, x.data(), rows);
  std::vector<float> y(static_cast<size_t>(rows * H), NAN);
  const ExpertBatch b{&w, &f, x.data(), y.data(), rows};
  run_batch_mlp(std::span(&b, 1));
  double scale = 0;
  EXPECT_LE(max_abs_err(y, want, &scale), kFp32Rel * scale + 1e-7);
}

// A layer of such experts, two per format (int8 panels, fp32 panels, trellis,
// a float gemv), through every strategy and kernel family: strategies give
// the same bits, and every (token, expert) slot matches float64.
TEST(ExpertShape, StrategiesAgreeBitForBitWithBiasesAndClampedSwiGlu) {
  const int64_t H = 64, I = 192, top_k = 2;
  const char* formats[] = {"int8_row", "fp4_g32", "trellis2", "bf16", "int3_g32"};
  std::vector<std::unique_ptr<Expert>> experts;
  PackedLayer layer;
  for (const char* name : formats) {
    BitGroup g;
    g.id = static_cast<int>(layer.groups.size());
    g.format = &quant::format_by_name(name);
    for (int k = 0; k < 2; ++k) {
      const int64_t id = static_cast<int64_t>(experts.size());
      experts.push_back(make_expert(*g.format, H, I, 100 + 7 * id));
      // One expert per format keeps plain SwiGLU (and no biases on the
      // second int8_row expert): mixed shapes within a group and a layer.
      if (k == 1) experts.back()->act = {};
      if (k == 1 && g.id == 0) experts.back()->gate_bias.clear(), experts.back()->down_bias.clear();
      g.expert_ids.push_back(id);
      g.slots.push_back(experts.back()->view());
      layer.experts.push_back({g.id, k});
      layer.survivors.push_back(static_cast<int32_t>(id));
    }
    layer.groups.push_back(std::move(g));
  }
  layer.num_experts = static_cast<int64_t>(experts.size());
  const std::vector<std::shared_ptr<const Dispatch>> strategies = {
      make_dispatch(DispatchKind::kMaskCombine, 0), make_dispatch(DispatchKind::kSorted, 0),
      make_dispatch(DispatchKind::kAuto, 0), make_dispatch(DispatchKind::kAuto, 1), make_dispatch(DispatchKind::kAuto, 64)};
  // 3 tokens: decode-sized; 48: trellis takes its int8 codes in the batch
  // kernel (96 rows >= 8 per expert of 10).
  for (int64_t tokens : {int64_t{3}, int64_t{48}}) {
    const std::vector<float> x = normal(tokens * H, 17 + tokens, 6.0f);
    std::vector<int32_t> ids(static_cast<size_t>(tokens * top_k));
    std::mt19937 rng(static_cast<uint32_t>(tokens));
    for (int64_t t = 0; t < tokens; ++t) {
      ids[t * top_k] = static_cast<int32_t>(rng() % layer.num_experts);
      do ids[t * top_k + 1] = static_cast<int32_t>(rng() % layer.num_experts);
      while (ids[t * top_k + 1] == ids[t * top_k]);
    }
    // float64 per slot.
    std::vector<double> want(static_cast<size_t>(tokens * top_k * H));
    for (int64_t s = 0; s < tokens * top_k; ++s) {
      const std::vector<double> r = reference(layer.expert(ids[s]), x.data() + (s / top_k) * H, 1);
      std::copy(r.begin(), r.end(), want.begin() + s * H);
    }
    for (MlpKernel kernel : {MlpKernel::kDecode, MlpKernel::kSmallBatch, MlpKernel::kBatch}) {
      std::vector<float> first;
      for (const auto& d : strategies) {
        const std::string at = std::to_string(tokens) + " tokens, " + std::string(mlp_kernel_name(kernel)) + ", " +
                               d->name() + (d->kind() == DispatchKind::kAuto
                                                ? " " + std::to_string(static_cast<const AutoDispatch&>(*d).sort_cutoff())
                                                : "");
        std::vector<float> out(want.size(), NAN);
        DispatchScratch scratch;
        d->run({&layer, x.data(), tokens, H, top_k, ids.data(), out.data(), kernel}, scratch);
        for (int64_t s = 0; s < tokens * top_k; ++s)
          EXPECT_LT(rel_l2(out.data() + s * H, want.data() + s * H, static_cast<size_t>(H)), kInt8RelL2)
              << at << " slot " << s << " expert " << ids[s];
        if (first.empty()) {
          first = out;
          std::printf("  %-40s relative L2 vs float64 %.3g\n", at.c_str(), rel_l2(out.data(), want.data(), out.size()));
        } else {
          EXPECT_EQ(std::memcmp(out.data(), first.data(), out.size() * sizeof(float)), 0) << at << " vs mask-combine";
        }
      }
    }
  }
}

}  // namespace
}  // namespace eq::exec
