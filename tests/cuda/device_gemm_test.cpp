// The GPU prefill products (FormatTraits::device_gemm, lib/quant/cuda/gemm_*.cu)
// against the CPU executor's FormatTraits::matmul, and the GPU MoE layer's
// dispatch strategies (lib/exec/cuda/device_moe.h) against the CPU's sorted
// dispatch; ctest label `cuda`. Builds without EQ_CUDA and machines without a
// GPU skip with a message.
//
// Tolerance of a product, per output element: the GPU rounds x (or the
// rotated x~) and W (or the scaled rotated W'') to bf16, a relative error of
// at most 2^-9 each, and sums the products in float32; so |gpu - cpu| is at
// most (2^-8 + 2^-18) times sum_k |W[n,k]| |x[k]| plus both sides' float32
// sums, 2 gamma(n) of the same: (2^-8 + 2^-18 + 2 gamma(n)) times the
// envelope of product_bounds.h (which bounds |x~| and carries the rotated
// basis through the output rotation). For a random row the envelope is about
// 0.6 sqrt(K) |W x|, so a wrong group scale (its group's share of the output)
// or a wrong code, sign or tile order (all of it) stays far outside.
//
// The MoE layer: each pair's slot row against the CPU reference chain
// (FormatTraits::matmul of gate and up, the activation as the CPU's
// glu_block writes it, matmul of down, the biases between), relative to the
// row's norm: 1e-5 when every batch is a decode batch (the products in
// another order; the chain then takes the CPU's decode kernel for the rows
// whose GPU decode multiplies int8 x, quant::cuda::device_gemv_int8_input, so
// both sides multiply the same integers, but for down's h near a rounding tie,
// whose possible steps are allowed), 2^-6 when an expert batch may take the prefill product
// (the bf16 roundings of three products and the activation between them);
// and against the CPU executor's sorted dispatch within 2^-5: that dispatch's
// batch kernels round the activations to int8 for some formats, so its own
// rows differ from the reference chain by up to 1.2% here (measured), and the
// comparison allows both sides' deviations, 2^-6 each.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "exec/bit_group.h"
#include "exec/cuda/device_exec.h"
#include "exec/cuda/device_moe.h"
#include "exec/dispatch.h"
#include "quant/cuda/cuda_gemm.h"
#include "quant/cuda/cuda_gemv.h"
#include "quant/cuda/cuda_gpus.h"
#include "quant/format.h"
#include "quant/gemv.h"
#include "bit_differences.h"
#include "plain_launches.h"
#include "product_bounds.h"
#include "quantize_once.h"

namespace eq::exec::cuda {
namespace {

#define SKIP_WITHOUT_GPU()                                                        \
  do {                                                                            \
    const std::string why = unavailable_reason();                                 \
    if (!why.empty()) GTEST_SKIP() << "no GPU for the prefill kernels: " << why;  \
  } while (0)

using namespace bounds;

constexpr double kBf16Pair = 0x1p-8 + 0x1p-18;  // two bf16 roundings of a product's factors

int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

struct Checked {
  double worst_ratio = 0.0;
  int64_t outputs = 0;
};

void check_format(const quant::FormatTraits& f, int64_t rows, int64_t cols, const std::vector<int>& ms, Checked& c) {
  const std::string what = std::string(f.name) + " [" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
  const std::vector<float> w = normal(static_cast<size_t>(rows * cols), 0.02f, 17 + rows * 31 + cols);
  quant::QuantizeOptions o;
  o.tensor_name = what;
  const quant::QuantizedMatrix q = f.quantize(w.data(), rows, cols, o);
  const quant::PackedMatrix view = q.view();
  const DeviceMatrix d = upload(view);
  const int max_m = *std::max_element(ms.begin(), ms.end());
  std::vector<float> x = normal(static_cast<size_t>(max_m * cols), 1.0f, 199 + cols);
  x[0] = 8.0f;  // an outlier channel
  DeviceBuffer dx(x.size() * sizeof(float)), dy(static_cast<size_t>(max_m * rows) * sizeof(float)), scratch;
  dx.upload(x.data(), x.size() * sizeof(float));
  for (int m : ms) {
    std::vector<float> cpu(static_cast<size_t>(m * rows)), gpu(cpu.size());
    f.matmul(view, x.data(), m, cpu.data(), false);
    std::vector<float> poison(cpu.size(), std::nanf(""));
    dy.upload(poison.data(), poison.size() * sizeof(float));
    const quant::DeviceGemmJob job = gemm_job(d, dx.floats(), dy.floats(), m);
    gemm(f, rows, cols, {&job, 1}, scratch);
    synchronize();
    dy.download(gpu.data(), gpu.size() * sizeof(float));
    double g = 0.0;
    const std::vector<double> env = envelope(view, x, m, &g);
    int bad = 0;
    for (size_t i = 0; i < cpu.size(); ++i) {
      const double diff = std::fabs(static_cast<double>(gpu[i]) - cpu[i]);
      const double tol = (kBf16Pair + g) * env[i] + 1e-30;
      c.worst_ratio = std::max(c.worst_ratio, std::isfinite(diff) ? diff / tol : INFINITY);
      if (!(diff <= tol) && bad++ < 5)
        ADD_FAILURE() << what << " M=" << m << " output [" << i / rows << ", " << i % rows << "]: gpu " << gpu[i]
                      << " cpu " << cpu[i] << " |diff| " << diff << " > tolerance " << tol;
    }
    EXPECT_EQ(bad, 0) << what << " M=" << m << ": " << bad << " of " << cpu.size() << " outputs off";
    c.outputs += static_cast<int64_t>(cpu.size());
  }
}

TEST(DeviceGemm, EveryRowHasAGpuPrefill) {
  for (const quant::FormatTraits& f : quant::all_formats())
    EXPECT_NE(f.device_gemm, nullptr) << f.name << " has no device_gemm";
}

// Every row, the decode test's odd shapes, M = 9, 33 and 130 rows of x.
TEST(DeviceGemm, EveryFormatOddShapesMatchesCpuMatmul) {
  SKIP_WITHOUT_GPU();
  for (const quant::FormatTraits& f : quant::all_formats()) {
    if (f.device_gemm == nullptr) continue;
    const int64_t rm = f.row_multiple, cm = f.col_multiple;
    std::vector<std::pair<int64_t, int64_t>> shapes;
    if (cm > 1) {
      shapes = {{round_up(45, rm), cm * 3}, {round_up(200, rm), cm * 11}};
      if (f.rotated) shapes.push_back({round_up(100, rm), 48 * cm / 16 * 5});
    } else {
      shapes = {{45, 100}, {37, 333}, {200, 256}};
    }
    Checked c;
    for (auto [rows, cols] : shapes) check_format(f, rows, cols, {9, 33, 130}, c);
    std::printf("%-12s %7lld outputs, worst |gpu - cpu| = %.3g of the tolerance\n", std::string(f.name).c_str(),
                static_cast<long long>(c.outputs), c.worst_ratio);
  }
}

// A Qwen3-30B-A3B expert's gate shape at M = 64, for the quickly quantized rows.
TEST(DeviceGemm, ExpertShapeMatchesCpuMatmul) {
  SKIP_WITHOUT_GPU();
  for (const quant::FormatTraits& f : quant::all_formats()) {
    if (f.device_gemm == nullptr || f.slow_quantizer) continue;
    Checked c;
    check_format(f, 768, 2048, {64}, c);
    std::printf("%-12s %7lld outputs, worst |gpu - cpu| = %.3g of the tolerance\n", std::string(f.name).c_str(),
                static_cast<long long>(c.outputs), c.worst_ratio);
  }
}

// Several experts of one format and shape in one call (a prefill's MoE call):
// jobs of different matrices and rows, one with none, more jobs than one
// batch of the products' kernels takes (kGemmBatch), each against its own
// CPU matmul within the bound above: a job reading another's matrix, rows or
// scratch is far outside it. The slowly quantized rows (trellis) take 3
// matrices in turn, so a neighbouring job's matrix is still another one. 144
// rows: the tile kernel's last block has warps past the rows.
TEST(DeviceGemm, ManyJobsInOneCallMatchCpuMatmul) {
  SKIP_WITHOUT_GPU();
  const int64_t rows = 144, cols = 256;
  const std::vector<int> ms = {9, 0, 33, 1, 17, 130, 2, 64, 9, 40, 3, 5, 8, 12, 20, 31, 33, 9, 11, 6,
                               7, 19, 25, 9, 9, 14, 2, 1, 90, 10, 16, 9, 4, 70, 9, 13};  // 36 jobs
  for (const quant::FormatTraits& f : quant::all_formats()) {
    if (f.device_gemm == nullptr || rows % f.row_multiple || cols % f.col_multiple) continue;
    const size_t distinct = f.slow_quantizer ? 3 : ms.size();
    std::vector<quant::QuantizedMatrix> q;
    std::vector<DeviceMatrix> d;
    std::vector<std::vector<float>> x;
    for (size_t j = 0; j < distinct; ++j) {
      const std::vector<float> w = normal(static_cast<size_t>(rows * cols), 0.02f, 1000 + static_cast<int>(j));
      quant::QuantizeOptions o;
      o.tensor_name = std::string(f.name) + " job " + std::to_string(j);
      q.push_back(f.quantize(w.data(), rows, cols, o));
    }
    for (size_t j = 0; j < ms.size(); ++j)
      x.push_back(normal(static_cast<size_t>(std::max(ms[j], 1) * cols), 1.0f, 2000 + static_cast<int>(j)));
    for (const auto& m : q) d.push_back(upload(m.view()));
    std::vector<DeviceBuffer> dx, dy;
    std::vector<quant::DeviceGemmJob> jobs;
    for (size_t j = 0; j < ms.size(); ++j) {
      dx.emplace_back(x[j].size() * sizeof(float));
      dx.back().upload(x[j].data(), x[j].size() * sizeof(float));
      std::vector<float> poison(static_cast<size_t>(std::max(ms[j], 1) * rows), std::nanf(""));
      dy.emplace_back(poison.size() * sizeof(float));
      dy.back().upload(poison.data(), poison.size() * sizeof(float));
    }
    for (size_t j = 0; j < ms.size(); ++j)
      jobs.push_back(gemm_job(d[j % distinct], dx[j].floats(), dy[j].floats(), ms[j]));
    DeviceBuffer scratch;
    gemm(f, rows, cols, jobs, scratch);
    synchronize();
    double worst = 0.0;
    for (size_t j = 0; j < ms.size(); ++j) {
      if (ms[j] == 0) continue;
      const quant::PackedMatrix view = q[j % distinct].view();
      std::vector<float> cpu(static_cast<size_t>(ms[j] * rows)), gpu(cpu.size());
      f.matmul(view, x[j].data(), ms[j], cpu.data(), false);
      dy[j].download(gpu.data(), gpu.size() * sizeof(float));
      double g = 0.0;
      const std::vector<double> env = envelope(view, x[j], ms[j], &g);
      int bad = 0;
      for (size_t i = 0; i < cpu.size(); ++i) {
        const double diff = std::fabs(static_cast<double>(gpu[i]) - cpu[i]);
        const double tol = (kBf16Pair + g) * env[i] + 1e-30;
        worst = std::max(worst, std::isfinite(diff) ? diff / tol : INFINITY);
        if (!(diff <= tol) && bad++ < 3)
          ADD_FAILURE() << f.name << " job " << j << " (M=" << ms[j] << ") output " << i << ": gpu " << gpu[i]
                        << " cpu " << cpu[i];
      }
      EXPECT_EQ(bad, 0) << f.name << " job " << j;
    }
    std::printf("%-12s %zu jobs in one call, worst |gpu - cpu| = %.3g of the tolerance\n", std::string(f.name).c_str(),
                ms.size(), worst);
  }
}

// ---- the MoE layer ----

struct SmallLayer {
  std::vector<quant::QuantizedMatrix> storage;
  std::vector<std::vector<float>> biases;
  PackedLayer layer;
};

// 7 experts of [I, H] in four formats (two groups of several experts), one
// of them pruned, quantized from random weights; `gpt_oss`: every expert with
// gate, up and down biases and the clamped SwiGLU.
constexpr std::array<const char*, 7> kLayerFormats = {"fp4_g32",  "int3_g64", "fp4_g32", "trellis2_lut",
                                                      "int3_g64", "fp4_g32",  "int8_row"};

SmallLayer make_layer(int64_t H, int64_t I, bool gpt_oss = false,
                      const std::array<const char*, 7>& formats = kLayerFormats) {
  SmallLayer s;
  s.biases.reserve(21);
  const int64_t E = 7, pruned = 5;
  s.storage.reserve(3 * E);
  for (int64_t e = 0; e < E; ++e) {
    const quant::FormatTraits& f = quant::format_by_name(formats[e]);
    for (int p = 0; p < 3; ++p) {
      const int64_t r = p == 2 ? H : I, c = p == 2 ? I : H;
      const std::vector<float> w = normal(static_cast<size_t>(r * c), 0.05f, 3000 + 3 * e + p);
      s.storage.push_back(f.quantize(w.data(), r, c, {}));
    }
  }
  PackedLayer& L = s.layer;
  L.num_experts = E;
  L.experts.assign(static_cast<size_t>(E), {});
  for (int64_t e = 0; e < E; ++e) {
    if (e == pruned) continue;
    const quant::FormatTraits* f = &quant::format_by_name(formats[e]);
    auto it = std::find_if(L.groups.begin(), L.groups.end(), [&](const BitGroup& g) { return g.format == f; });
    if (it == L.groups.end()) {
      L.groups.push_back({});
      L.groups.back().id = static_cast<int>(L.groups.size() - 1);
      L.groups.back().format = f;
      it = L.groups.end() - 1;
    }
    it->expert_ids.push_back(e);
    ExpertWeights w{.gate = s.storage[3 * e].view(), .up = s.storage[3 * e + 1].view(),
                    .down = s.storage[3 * e + 2].view()};
    if (gpt_oss) {
      for (int p = 0; p < 3; ++p) s.biases.push_back(normal(static_cast<size_t>(p == 2 ? H : I), 0.5f, 900 + 3 * e + p));
      w.gate_bias = s.biases[s.biases.size() - 3].data();
      w.up_bias = s.biases[s.biases.size() - 2].data();
      w.down_bias = s.biases[s.biases.size() - 1].data();
      w.act = {.kind = model::ActivationKind::kSwiGluClamped, .alpha = 1.702f, .limit = 7.0f};
    }
    it->slots.push_back(w);
    L.experts[static_cast<size_t>(e)] = {it->id, static_cast<int>(it->slots.size() - 1)};
    L.survivors.push_back(static_cast<int32_t>(e));
  }
  return s;
}

// slot row of each pair through FormatTraits::matmul (float32), the biases
// and the activation as model/kernels' glu_block computes them. `as_gpu_decode`:
// the products whose GPU decode takes int8 x (device_gemv_int8_input) through
// the CPU's decode kernel instead, which quantizes x to the same integers.
// `ties` (as_gpu_decode): per pair, the 2-norm of what down's int8 h may move
// by where an h lies within 1e-3 of a step of a rounding tie
// (product_bounds.h, int8_tie_allowance): the GPU forms h from its own g and
// u, equal to the CPU's to float rounding only.
std::vector<float> reference_slots(const PackedLayer& L, const std::vector<float>& x, int64_t tokens, int64_t top_k,
                                   const std::vector<int32_t>& ids, int64_t H, int64_t I, bool as_gpu_decode,
                                   std::vector<double>* ties = nullptr) {
  if (ties) ties->assign(static_cast<size_t>(tokens * top_k), 0.0);
  std::vector<float> out(static_cast<size_t>(tokens * top_k * H)), g(static_cast<size_t>(I)), u(g.size()), h(g.size());
  auto product = [&](const quant::PackedMatrix& m, const float* in, float* y) {
    if (as_gpu_decode && quant::cuda::device_gemv_int8_input(*m.format)) {
      quant::GemvActivation shared, own;
      shared.set(in, m.cols);
      m.format->gemv->run(m, quant::gemv_input_for(*m.format->gemv, m, in, shared, own), 0, m.rows, y);
    } else {
      m.format->matmul(m, in, 1, y, false);
    }
  };
  for (int64_t p = 0; p < tokens * top_k; ++p) {
    const ExpertWeights& w = L.expert(ids[static_cast<size_t>(p)]);
    const float* xr = x.data() + (p / top_k) * H;
    product(w.gate, xr, g.data());
    product(w.up, xr, u.data());
    for (int64_t i = 0; i < I; ++i) {
      float a = w.gate_bias ? g[static_cast<size_t>(i)] + w.gate_bias[i] : g[static_cast<size_t>(i)];
      float b = w.up_bias ? u[static_cast<size_t>(i)] + w.up_bias[i] : u[static_cast<size_t>(i)];
      if (w.act.kind == model::ActivationKind::kSwiGlu) {
        h[static_cast<size_t>(i)] = a / (1.0f + std::exp(-a)) * b;
      } else {
        a = std::min(a, w.act.limit);
        b = std::min(std::max(b, -w.act.limit), w.act.limit);
        h[static_cast<size_t>(i)] = (b + 1.0f) * (a / (1.0f + std::exp(a * -w.act.alpha)));
      }
    }
    float* y = out.data() + p * H;
    product(w.down, h.data(), y);
    if (ties && as_gpu_decode && quant::cuda::device_gemv_int8_input(*w.down.format)) {
      double sq = 0.0;
      for (const double a : bounds::int8_tie_allowance(w.down, h, 1, 0.0, 1e-3)) sq += a * a;
      (*ties)[static_cast<size_t>(p)] = std::sqrt(sq);
    }
    if (w.down_bias)
      for (int64_t i = 0; i < H; ++i) y[i] += w.down_bias[i];
  }
  return out;
}

// Largest relative difference of a slot row (|a - b| / |b|, 2-norms over the
// row), less allow[row] (null: none) from |a - b|.
double worst_row_difference(const std::vector<float>& a, const std::vector<float>& b, int64_t rows, int64_t H,
                            int64_t* worst_row, const std::vector<double>* allow = nullptr) {
  double worst = 0.0;
  for (int64_t p = 0; p < rows; ++p) {
    double diff = 0.0, norm = 0.0;
    for (int64_t i = 0; i < H; ++i) {
      const double x = a[static_cast<size_t>(p * H + i)], y = b[static_cast<size_t>(p * H + i)];
      diff += (x - y) * (x - y);
      norm += y * y;
    }
    const double excess = std::max(0.0, std::sqrt(diff) - (allow ? (*allow)[static_cast<size_t>(p)] : 0.0));
    const double rel = excess / std::max(std::sqrt(norm), 1e-30);
    if (!(rel <= worst)) {
      worst = std::isfinite(rel) ? rel : INFINITY;
      *worst_row = p;
    }
  }
  return worst;
}

// Random routing among the survivors: top_k distinct experts per token.
std::vector<int32_t> route(const PackedLayer& L, int64_t tokens, int64_t top_k, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> ids;
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<int32_t> pool = L.survivors;
    std::shuffle(pool.begin(), pool.end(), rng);
    ids.insert(ids.end(), pool.begin(), pool.begin() + top_k);
  }
  return ids;
}

// Both expert kinds: SwiGLU without biases, and gpt-oss's biased clamped SwiGLU.
TEST(DeviceMoe, EveryStrategyMatchesCpuDispatch) {
  SKIP_WITHOUT_GPU();
  const int64_t H = 256, I = 128, top_k = 2;
  for (bool gpt_oss : {false, true}) {
    SmallLayer s = make_layer(H, I, gpt_oss);
    const DeviceMoeLayer d = upload(s.layer);
    ASSERT_EQ(d.experts.size(), 6u);
    ASSERT_EQ(d.biased, gpt_oss);
    DeviceMoeScratch scratch;
    for (int64_t tokens : {1, 3, 40, 200}) {
      const int64_t pairs = tokens * top_k;
      const std::vector<float> x = normal(static_cast<size_t>(tokens * H), 1.0f, 40 + tokens);
      const std::vector<int32_t> ids = route(s.layer, tokens, top_k, 7 + tokens);
      // Every batch is a decode batch when no expert can get more rows than the decode product takes;
      // the reference then multiplies the x the GPU's decode multiplies (int8 for some rows).
      const bool decode_only = tokens * top_k <= quant::kMaxDeviceGemvRows;
      std::vector<double> ties;
      const std::vector<float> ref = reference_slots(s.layer, x, tokens, top_k, ids, H, I, decode_only, &ties);
      std::vector<float> cpu(static_cast<size_t>(pairs * H));
      MoeWork work{.layer = &s.layer, .x = x.data(), .tokens = tokens, .hidden = H, .top_k = top_k,
                   .expert_ids = ids.data(), .slot_out = cpu.data()};
      DispatchScratch cpu_scratch;
      SortedDispatch().run(work, cpu_scratch);
      const double tau = decode_only ? 1e-5 : 0x1p-6;
      DeviceBuffer dx(x.size() * sizeof(float)), dout(cpu.size() * sizeof(float));
      dx.upload(x.data(), x.size() * sizeof(float));
      for (DispatchKind kind : {DispatchKind::kMaskCombine, DispatchKind::kSorted, DispatchKind::kAuto}) {
        const std::string what = std::string(gpt_oss ? "gpt-oss " : "") + std::string(dispatch_kind_name(kind)) +
                                 " M=" + std::to_string(tokens);
        std::vector<float> poison(cpu.size(), std::nanf(""));
        dout.upload(poison.data(), poison.size() * sizeof(float));
        run_moe(d, kind, /*sort_cutoff=*/4, dx.floats(), tokens, top_k, ids.data(), dout.floats(), scratch);
        synchronize();
        std::vector<float> gpu(cpu.size());
        dout.download(gpu.data(), gpu.size() * sizeof(float));
        int64_t row_ref = 0, row_cpu = 0;
        const double vs_ref = worst_row_difference(gpu, ref, pairs, H, &row_ref, &ties);
        const double vs_cpu = worst_row_difference(gpu, cpu, pairs, H, &row_cpu);
        EXPECT_LE(vs_ref, tau) << what << ": pair " << row_ref << " (expert " << ids[static_cast<size_t>(row_ref)]
                               << ") against the reference chain";
        EXPECT_LE(vs_cpu, 0x1p-5) << what << ": pair " << row_cpu << " (expert " << ids[static_cast<size_t>(row_cpu)]
                                  << ") against the CPU's sorted dispatch";
        std::printf("%-30s worst relative difference %.3g against the reference chain (bound %.3g), %.3g against "
                    "the CPU dispatch\n",
                    what.c_str(), vs_ref, tau, vs_cpu);
      }
    }
  }
}

// One routed decode case on the GPU: `tokens` rows of x and their ids, and
// NaN-poisoned outputs of tokens * top_k rows of H floats to run into.
struct RoutedCase {
  RoutedCase(const PackedLayer& layer, int64_t tokens, int64_t top_k, int64_t H, uint64_t x_seed, uint64_t ids_seed)
      : x(normal(static_cast<size_t>(tokens * H), 1.0f, x_seed)),
        ids(route(layer, tokens, top_k, ids_seed)),
        dx(x.size() * sizeof(float)),
        dids(ids.size() * sizeof(int32_t)),
        out_floats(static_cast<size_t>(tokens * top_k * H)) {
    dx.upload(x.data(), x.size() * sizeof(float));
    dids.upload(ids.data(), ids.size() * sizeof(int32_t));
  }
  const int32_t* ids_on_gpu() const { return static_cast<const int32_t*>(dids.data()); }
  DeviceBuffer poisoned_output() const {
    DeviceBuffer out(out_floats * sizeof(float));
    const std::vector<float> poison(out_floats, std::nanf(""));
    out.upload(poison.data(), out.size());
    return out;
  }
  std::vector<float> read(const DeviceBuffer& out) const {
    std::vector<float> host(out_floats);
    out.download(host.data(), out.size());
    return host;
  }
  std::vector<float> x;
  std::vector<int32_t> ids;
  DeviceBuffer dx, dids;
  size_t out_floats;
};

// Routed decode against auto's per-pair path with the same ids: equal to
// the bit (the same kernels' bodies on the same x), for layers whose stream
// and int8_row groups share the routed launches of several formats (one with
// a bf16 group, whose down takes a SwiGLU launch first) and one where no two
// groups can share (int8_row's own routed launches, its down gated; trellis;
// bf16); gpt-oss's biased experts take no routed decode.
TEST(DeviceMoe, RoutedDecodeEqualsPerPairPath) {
  SKIP_WITHOUT_GPU();
  const int64_t H = 256, I = 128, top_k = 2;
  EXPECT_FALSE(upload(make_layer(H, I, /*gpt_oss=*/true).layer).routed);
  const std::array<const char*, 7> gated = {"fp4_g32", "int3_g64", "nl4_g32", "trellis4", "int4_g64", "fp4_g32",
                                            "trellis2_lut"};
  const std::array<const char*, 7> mixed = {"fp4_g32", "int8_row", "fp4_g32", "trellis2_lut", "bf16", "fp4_g32",
                                            "int8_row"};
  const std::array<const char*, 7> apart = {"int8_row", "trellis2_lut", "bf16", "trellis4", "bf16", "int8_row",
                                            "trellis2_lut"};
  for (const auto& formats : {gated, mixed, kLayerFormats, apart}) {
    SmallLayer s = make_layer(H, I, false, formats);
    const DeviceMoeLayer d = upload(s.layer);
    ASSERT_TRUE(d.routed) << formats[1];
    // Two or more groups of stream or int8_row formats share launches; apart's one such group does not.
    EXPECT_EQ(d.routed_shared_up.empty(), formats == apart) << formats[1];
    DeviceMoeScratch scratch;
    // 64 tokens: more gate and up blocks than a wave of the shared kernel, so the groups take lanes.
    for (int64_t tokens : {1, 3, 4, 20, 64}) {
      const RoutedCase c(s.layer, tokens, top_k, H, 60 + tokens, 11 + tokens);
      const DeviceBuffer a = c.poisoned_output(), b = c.poisoned_output();
      run_moe(d, DispatchKind::kAuto, /*sort_cutoff=*/tokens, c.dx.floats(), tokens, top_k, c.ids.data(), a.floats(),
              scratch);
      run_moe_routed(d, c.dx.floats(), tokens, top_k, c.ids_on_gpu(), b.floats(), scratch);
      synchronize();
      const std::vector<float> per_pair = c.read(a), routed = c.read(b);
      int64_t first = -1;
      EXPECT_EQ(test::bit_differences(routed, per_pair, &first), 0)
          << formats[1] << " M=" << tokens << ": first at pair " << first / H << " (expert "
          << (first >= 0 ? c.ids[static_cast<size_t>(first / H)] : -1) << "): routed "
          << (first >= 0 ? routed[static_cast<size_t>(first)] : 0.0f) << " per pair "
          << (first >= 0 ? per_pair[static_cast<size_t>(first)] : 0.0f);
      for (float v : routed) ASSERT_TRUE(std::isfinite(v)) << formats[1] << " M=" << tokens;
    }
  }
}

// The routed launches (one format's, several formats', trellis's, bf16's)
// with programmatic dependent launch: the outputs equal those of plain
// launches bit for bit, three times over (a read before the wait would show
// as a difference at some timing), for layers whose groups share launches
// and one where int8_row takes its own.
TEST(DeviceMoe, RoutedDecodeEqualsWithoutProgrammaticLaunches) {
  SKIP_WITHOUT_GPU();
  const int64_t H = 256, I = 128, top_k = 2;
  const std::array<const char*, 7> mixed = {"fp4_g32", "int8_row", "fp4_g32", "trellis2_lut", "bf16", "fp4_g32",
                                            "int8_row"};
  const std::array<const char*, 7> apart = {"int8_row", "trellis2_lut", "bf16", "trellis4", "bf16", "int8_row",
                                            "trellis2_lut"};
  for (const auto& formats : {mixed, kLayerFormats, apart}) {
    SmallLayer s = make_layer(H, I, false, formats);
    const DeviceMoeLayer d = upload(s.layer);
    ASSERT_TRUE(d.routed) << formats[1];
    DeviceMoeScratch scratch;
    for (int64_t tokens : {1, 4, 64}) {
      const RoutedCase c(s.layer, tokens, top_k, H, 80 + tokens, 13 + tokens);
      const DeviceBuffer b = c.poisoned_output();
      {
        const test::PlainLaunches plain_launches;
        run_moe_routed(d, c.dx.floats(), tokens, top_k, c.ids_on_gpu(), b.floats(), scratch);
      }
      const DeviceBuffer a = c.poisoned_output();
      for (int round = 0; round < 3; ++round)  // each round into the last one's outputs
        run_moe_routed(d, c.dx.floats(), tokens, top_k, c.ids_on_gpu(), a.floats(), scratch);
      synchronize();
      const std::vector<float> overlapped = c.read(a), plain = c.read(b);
      int64_t first = -1;
      EXPECT_EQ(test::bit_differences(overlapped, plain, &first), 0)
          << formats[1] << " M=" << tokens << ": first at pair " << first / H;
      for (float v : plain) ASSERT_TRUE(std::isfinite(v)) << formats[1] << " M=" << tokens;
    }
  }
}

// A routed launch of one format quantizes x once for all its blocks (into
// RoutedPairs::x_scratch, a lane's room; its blocks then read the router's
// ids before their wait) or lets each block quantize it: the same bits, for
// layers whose groups take lanes of their own (apart at every size; the
// others at 64 tokens, more blocks than a wave of the shared kernel; down
// gated at this shape), three rounds.
TEST(DeviceMoe, RoutedDecodeQuantizedOnceEqualsEachBlocksOwn) {
  SKIP_WITHOUT_GPU();
  const int64_t H = 256, I = 128, top_k = 2;
  const std::array<const char*, 7> gated = {"fp4_g32", "int3_g64", "nl4_g32", "trellis4", "int4_g64", "fp4_g32",
                                            "trellis2_lut"};
  const std::array<const char*, 7> apart = {"int8_row", "trellis2_lut", "bf16", "trellis4", "bf16", "int8_row",
                                            "trellis2_lut"};
  for (const auto& formats : {gated, kLayerFormats, apart}) {
    SmallLayer s = make_layer(H, I, false, formats);
    const DeviceMoeLayer d = upload(s.layer);
    ASSERT_TRUE(d.routed) << formats[1];
    DeviceMoeScratch scratch;
    for (int64_t tokens : {1, 4, 64}) {
      const RoutedCase c(s.layer, tokens, top_k, H, 90 + tokens, 17 + tokens);
      const DeviceBuffer b = c.poisoned_output();
      {
        const test::QuantizeOnce staged(0);
        run_moe_routed(d, c.dx.floats(), tokens, top_k, c.ids_on_gpu(), b.floats(), scratch);
      }
      const DeviceBuffer a = c.poisoned_output();
      {
        const test::QuantizeOnce once(1);
        for (int round = 0; round < 3; ++round)
          run_moe_routed(d, c.dx.floats(), tokens, top_k, c.ids_on_gpu(), a.floats(), scratch);
      }
      synchronize();
      const std::vector<float> quantized_once = c.read(a), staged = c.read(b);
      int64_t first = -1;
      EXPECT_EQ(test::bit_differences(quantized_once, staged, &first), 0)
          << formats[1] << " M=" << tokens << ": first at pair " << first / H;
      for (float v : quantized_once) ASSERT_TRUE(std::isfinite(v)) << formats[1] << " M=" << tokens;
    }
  }
}

TEST(DeviceMoe, PrunedExpertIsRefused) {
  SKIP_WITHOUT_GPU();
  SmallLayer s = make_layer(128, 64);
  const DeviceMoeLayer d = upload(s.layer);
  DeviceMoeScratch scratch;
  DeviceBuffer dx(128 * sizeof(float)), dout(2 * 128 * sizeof(float));
  const int32_t ids[2] = {0, 5};  // expert 5 was pruned
  EXPECT_THROW(run_moe(d, DispatchKind::kSorted, 0, dx.floats(), 1, 2, ids, dout.floats(), scratch), eq::Error);
}

}  // namespace
}  // namespace eq::exec::cuda
