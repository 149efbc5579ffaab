// The GPU decode products (FormatTraits::device_gemv, lib/quant/cuda/gemv_*.cu
// and trellis_gemv.cu, through lib/exec/cuda) against the CPU executor's
// (FormatTraits::matmul), ctest label `cuda`: every registered row, on random
// weights quantized by the CPU quantizer, odd shapes (rows and columns not
// multiples of the kernels' tiles where the format allows), M = 1, 3 and 8
// rows of x; and the decode expert MLP of a mix of formats against
// exec::run_expert. Builds without EQ_CUDA and machines without a GPU skip
// with a message.
//
// Tolerance, per output element, derived from the reduction: both sides
// compute the same real number in float32 with different orders, and each
// float32 sum of n products is within gamma(n) * sum |terms| of it
// (gamma(n) = n u / (1 - n u), u = 2^-24; Higham, "Accuracy and Stability of
// Numerical Algorithms", 3.1). So |gpu - cpu| <= 2 gamma(n) * envelope, with
//   plain formats:   envelope = sum_k (|W[n,k]| + 2 |bias of (n,k)'s group|) |x[k]|
//                    (the GPU factors the group's scale and bias out of
//                    sums over chunks of 16 or 32 k), n = K + K/16 + 16 (the
//                    chunk and slice partial sums);
//   rotated formats: W = diag(sv) H_N W' H_K diag(su) is computed as rotations
//                    of x and z = W' x~, so the envelope is that of z, taken
//                    through the output rotation: (1/sqrt(B_N)) sum over n's
//                    Hadamard block of sum_k |W'[i,k]| xbar[k], with
//                    xbar[k] = (1/sqrt(B_K)) sum over k's block of |x| (a bound
//                    of |x~[k]| and of its rounding), n = K + log2 B_K + log2 B_N + 16.
// 2 gamma(n) is 2.6e-4 of the envelope at K = 2048, and the envelope of a
// random row is about 0.6 sqrt(K) |W x|: the bound is under 1% of |W x|,
// while a wrong scale moves an output by its group's share of it (12% for
// groups of 32 at K = 2048) and a wrong code table, sign or index by all of
// it. The measured differences stay under 3% of the bound. The grouped-call
// test asks for equal bits.
//
// Rows whose GPU product takes int8 x (quant::cuda::device_gemv_int8_input:
// the stream rows of 2, 4 and 8 bits and int8_row, as the CPU's decode
// kernels) are compared with the CPU's decode kernel (FormatTraits::gemv),
// which sees the same integers (Int8InputEqualsTheCpus checks them byte for
// byte), so only the float32 sums of the chunks differ: the same bound, over
// the envelope plus the int8 step (product_bounds.h, int8_envelope); with a
// gated input, whose h each side forms with its own expf, plus a step for
// each h that lies within those last places of a rounding tie
// (int8_tie_allowance), as it may round the other way on the GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "exec/bit_group.h"
#include "exec/cuda/device_moe.h"
#include "exec/expert_mlp.h"
#include "model/float_buffer.h"
#include "quant/cuda/cuda_gemv.h"
#include "quant/format.h"
#include "quant/gemv.h"
#include "quant/hadamard.h"
#include "quant/packed_stream.h"
#include "quant/rotated_basis.h"
#include "../quant/quant_test_util.h"
#include "bit_differences.h"
#include "product_bounds.h"
#include "quantize_once.h"

namespace eq::exec::cuda {
namespace {

#define SKIP_WITHOUT_GPU()                                                        \
  do {                                                                            \
    const std::string why = unavailable_reason();                                 \
    if (!why.empty()) GTEST_SKIP() << "no GPU for the decode kernels: " << why;   \
  } while (0)

using namespace bounds;

struct Checked {
  double worst_ratio = 0.0;  // max |gpu - cpu| / tolerance
  int64_t outputs = 0;
};

// Quantizes random weights on the CPU, runs both products for each m_rows,
// and checks every output.
void check_format(const quant::FormatTraits& f, int64_t rows, int64_t cols, const std::vector<int>& ms,
                  Checked& c) {
  const std::string what = std::string(f.name) + " [" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
  const std::vector<float> w = normal(static_cast<size_t>(rows * cols), 0.02f, 7 + rows * 31 + cols);
  quant::QuantizeOptions o;
  o.tensor_name = what;
  const quant::QuantizedMatrix q = f.quantize(w.data(), rows, cols, o);
  const quant::PackedMatrix view = q.view();
  const DeviceMatrix d = upload(view);
  ASSERT_EQ(d.nbytes, f.packed_bytes(rows, cols)) << what;
  const int max_m = *std::max_element(ms.begin(), ms.end());
  std::vector<float> x = normal(static_cast<size_t>(max_m * cols), 1.0f, 99 + cols);
  x[0] = 8.0f;  // an outlier channel, as activations have
  // The gated input (DeviceGemvJob::x_up): x and up, whose SwiGLU h the CPU takes.
  const std::vector<float> up = normal(x.size(), 1.0f, 199 + cols);
  std::vector<float> h(x.size());
  for (size_t i = 0; i < x.size(); ++i) h[i] = x[i] / (1.0f + std::exp(-x[i])) * up[i];
  DeviceBuffer dx(x.size() * sizeof(float)), dup(x.size() * sizeof(float)),
      dy(static_cast<size_t>(max_m * rows) * sizeof(float));
  dx.upload(x.data(), x.size() * sizeof(float));
  dup.upload(up.data(), up.size() * sizeof(float));
  for (int m : ms)
    for (const bool gated : {false, true}) {
      if (gated && m * cols > quant::kMaxGatedInput) continue;
      if (gated && m > f.device_gemv->gated_rows) {  // refused, not run without its gate
        quant::DeviceGemvJob job = d.job(dx.floats(), dy.floats());
        job.x_up = dup.floats();
        EXPECT_THROW(gemv(f, rows, cols, {&job, 1}, m), Error) << what << " M=" << m << " gated";
        continue;
      }
      const std::vector<float>& in = gated ? h : x;
      const std::string run = what + " M=" + std::to_string(m) + (gated ? " gated" : "");
      std::vector<float> cpu(static_cast<size_t>(m * rows)), gpu(cpu.size(), std::nanf(""));
      // An int8-input row is compared with the CPU's decode kernel, which
      // quantizes x to the same integers (gated: the two sides' h differ in
      // the last places, so an h at a rounding tie may round the other way).
      const bool int8 = quant::cuda::device_gemv_int8_input(f);
      if (int8) {
        quant::GemvActivation shared, own;
        for (int i = 0; i < m; ++i) {
          const float* xi = in.data() + static_cast<size_t>(i) * cols;
          shared.set(xi, cols);
          const quant::GemvInput& gi = quant::gemv_input_for(*f.gemv, view, xi, shared, own);
          f.gemv->run(view, gi, 0, rows, cpu.data() + static_cast<size_t>(i) * rows);
        }
      } else {
        f.matmul(view, in.data(), m, cpu.data(), false);
      }
      // A poisoned output buffer: every element must be written.
      std::vector<float> poison(cpu.size(), std::nanf(""));
      dy.upload(poison.data(), poison.size() * sizeof(float));
      quant::DeviceGemvJob job = d.job(dx.floats(), dy.floats());
      if (gated) job.x_up = dup.floats();
      gemv(f, rows, cols, {&job, 1}, m);
      synchronize();
      dy.download(gpu.data(), gpu.size() * sizeof(float));
      double g = 0.0;
      std::vector<double> env = envelope(view, in, m, &g);
      const std::vector<double> step = int8 ? int8_envelope(view, in, m) : std::vector<double>(env.size(), 0.0);
      // Gated: h within 8 kUnit (each side's expf), the blocks' amax too.
      const std::vector<double> ties =
          int8 && gated ? int8_tie_allowance(view, in, m, 64 * kUnit, 0.0) : std::vector<double>(env.size(), 0.0);
      int bad = 0;
      for (size_t i = 0; i < cpu.size(); ++i) {
        const double diff = std::fabs(static_cast<double>(gpu[i]) - cpu[i]);
        // Gated: each side forms h itself; their exp differ by up to 2 units in
        // the last place (CUDA's expf), which moves an h by at most 4 units
        // (8 kUnit of it), and so the output by 8 kUnit of the envelope.
        const double tol = (g + (gated ? 8.0 * kUnit : 0.0)) * (env[i] + step[i]) + 1.01 * ties[i] + 1e-30;
        c.worst_ratio = std::max(c.worst_ratio, std::isfinite(diff) ? diff / tol : INFINITY);
        if (!(diff <= tol) && bad++ < 5)
          ADD_FAILURE() << run << " output [" << i / rows << ", " << i % rows << "]: gpu " << gpu[i] << " cpu "
                        << cpu[i] << " |diff| " << diff << " > tolerance " << tol;
      }
      EXPECT_EQ(bad, 0) << run << ": " << bad << " of " << cpu.size() << " outputs off";
      c.outputs += static_cast<int64_t>(cpu.size());
    }
}

int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

TEST(DeviceGemv, EveryRowHasAGpuKernel) {
  for (const quant::FormatTraits& f : quant::all_formats())
    EXPECT_NE(f.device_gemv, nullptr) << f.name << " has no device_gemv";
}

// The int8 x of the GPU decode (quant::cuda::quantize_x_int8) against the
// CPU's (GemvActivation::set), byte for byte, in every layout: columns not a
// multiple of 32 (int8_row: nor of 8), an all-zero block, -0, an outlier, and
// exact ties (a block whose amax is 127, so x * 127 / amax = x: 2.5 -> 2,
// 3.5 -> 4, -2.5 -> -2).
TEST(DeviceGemv, Int8InputEqualsTheCpus) {
  SKIP_WITHOUT_GPU();
  const int m_rows = 3;
  for (const char* name : {"int8_row", "int8_g32", "int4_g32", "int2_g32", "fp4_g32", "fp4_g16", "nl4_g32", "nvfp4"}) {
    const quant::FormatTraits& f = quant::format_by_name(name);
    ASSERT_TRUE(quant::cuda::device_gemv_int8_input(f)) << name;
    EXPECT_TRUE(f.gemv->int8_activation) << name << ": the GPU takes int8 x where the CPU does not";
    // The order the row's codes meet x in, and the signs of a table's halves (cuda_gemv.h, quantize_x_int8).
    const bool stream = f.stream != nullptr;
    const quant::StreamLayout l = stream ? quant::stream_layout_of(f) : quant::StreamLayout{};
    const bool table = stream && l.codes->int8_bytes != nullptr;
    int sign[2] = {1, 1};
    if (table)
      for (int c = 0; c < 16; ++c)
        if (const int v = int{l.codes->int8_bytes[c]} - l.codes->int8_offset; v != 0) sign[c / 8] = v > 0 ? 1 : -1;
    for (const int64_t cols : {int64_t{2048}, round_up(100, f.col_multiple)}) {
      const std::string what = std::string(name) + " K=" + std::to_string(cols);
      std::vector<float> x = normal(static_cast<size_t>(m_rows * cols), 1.0f, 5 + cols);
      for (int m = 0; m < m_rows; ++m) {
        float* r = x.data() + m * cols;
        r[0] = 8.0f;
        for (int k = 32; k < 64; ++k) r[k] = 0.0f;
        r[33] = -0.0f;
        r[64] = 127.0f, r[65] = 2.5f, r[66] = 3.5f, r[67] = -2.5f, r[68] = 2.5000002f;
      }
      DeviceBuffer dx(x.size() * sizeof(float)), dout(quant::cuda::int8_x_bytes(f, m_rows, cols));
      dx.upload(x.data(), x.size() * sizeof(float));
      quant::cuda::quantize_x_int8(f, dx.floats(), m_rows, cols, dout.data());
      std::vector<uint8_t> gpu(dout.size());
      dout.download(gpu.data(), gpu.size());
      const int64_t kp = round_up(cols, 32), row_bytes = kp * (table ? 2 : 1);
      ASSERT_EQ(static_cast<int64_t>(gpu.size()), m_rows * (row_bytes + kp / 32 * 4 + kp / 16 * 4)) << what;
      const auto* scales = reinterpret_cast<const float*>(gpu.data() + m_rows * row_bytes);
      const auto* sums = reinterpret_cast<const int32_t*>(scales + m_rows * kp / 32);
      int bad = 0;
      for (int m = 0; m < m_rows; ++m) {
        quant::GemvActivation act;
        act.set(x.data() + m * cols, cols);
        const quant::GemvInput& in = act.input();
        const int8_t* want = stream && l.bits == 4 && !table ? in.q_nib : stream && l.bits == 2 ? in.q_crumb : in.q;
        const auto* row = reinterpret_cast<const int8_t*>(gpu.data() + m * row_bytes);
        for (int64_t k = 0; k < kp; ++k) {
          const int8_t got = table ? row[(k / 4) * 8 + k % 4] : row[k];
          const int8_t expect = static_cast<int8_t>(table ? sign[0] * want[k] : want[k]);
          if (got != expect && bad++ < 5) ADD_FAILURE() << what << " row " << m << " q[" << k << "]: " << int{got} << " not " << int{expect};
          if (table && row[(k / 4) * 8 + 4 + k % 4] != static_cast<int8_t>(sign[1] * want[k]) && bad++ < 5)
            ADD_FAILURE() << what << " row " << m << " the second copy of q[" << k << "]";
        }
        for (int64_t b = 0; b < kp / 32; ++b)
          if (std::memcmp(&scales[m * kp / 32 + b], &in.q_scale[b], sizeof(float)) != 0 && bad++ < 5)
            ADD_FAILURE() << what << " row " << m << " scale " << b << ": " << scales[m * kp / 32 + b] << " not " << in.q_scale[b];
        for (int64_t j = 0; j < kp / 16; ++j)
          if (sums[m * kp / 16 + j] != in.q_sum16[j] && bad++ < 5)
            ADD_FAILURE() << what << " row " << m << " sum " << j << ": " << sums[m * kp / 16 + j] << " not " << in.q_sum16[j];
      }
      EXPECT_EQ(bad, 0) << what;
    }
  }
}

// Every row, odd shapes: rows not a multiple of 32 (the stream kernel's
// columns per block, the row-major kernel's rows per block) or of 4 (its rows
// a warp), columns an odd number of groups or, for formats that allow any,
// neither a multiple of 16 nor 4, and a multiple of 16 with an odd row count
// (the row-major kernel's warps of 4 rows, the last one short).
TEST(DeviceGemv, EveryFormatOddShapesMatchesCpuMatmul) {
  SKIP_WITHOUT_GPU();
  for (const quant::FormatTraits& f : quant::all_formats()) {
    if (f.device_gemv == nullptr) continue;
    const int64_t rm = f.row_multiple, cm = f.col_multiple;
    std::vector<std::pair<int64_t, int64_t>> shapes;
    if (cm > 1) {
      shapes = {{round_up(45, rm), cm * 3}, {round_up(200, rm), cm * 11}};
      if (f.rotated) shapes.push_back({round_up(100, rm), 48 * cm / 16 * 5});  // Hadamard blocks of 16 along K
    } else {
      shapes = {{45, 100}, {37, 333}, {200, 256}, {45, 256}};
    }
    Checked c;
    for (auto [rows, cols] : shapes) check_format(f, rows, cols, {1, 3, 8}, c);
    std::printf("%-10s %6lld outputs, worst |gpu - cpu| = %.3g of the tolerance\n", std::string(f.name).c_str(),
                static_cast<long long>(c.outputs), c.worst_ratio);
  }
}

// A Qwen3-30B-A3B expert shape, [768, 2048] and [2048, 768], for the formats
// whose CPU quantizer is quick (the trellis rows' Viterbi takes minutes here).
TEST(DeviceGemv, ExpertShapesMatchCpuMatmul) {
  SKIP_WITHOUT_GPU();
  for (const quant::FormatTraits& f : quant::all_formats()) {
    if (f.device_gemv == nullptr || f.slow_quantizer) continue;
    Checked c;
    check_format(f, 768, 2048, {1, 8}, c);
    check_format(f, 2048, 768, {1}, c);
    std::printf("%-10s %6lld outputs, worst |gpu - cpu| = %.3g of the tolerance\n", std::string(f.name).c_str(),
                static_cast<long long>(c.outputs), c.worst_ratio);
  }
}

// The trellis rows at an expert's shape (output Hadamard blocks of 128 rows)
// and at 192 rows (blocks of 64), one job a call: their thread blocks own one
// strip each on a GPU of more multiprocessors than strips, in clusters of 8 and
// 4 (trellis_gemv.cu); the odd shapes above give blocks of 16 (clusters of 1).
TEST(DeviceGemv, TrellisExpertShape) {
  SKIP_WITHOUT_GPU();
  for (const char* name : {"trellis2", "trellis3_lut"}) {
    const quant::FormatTraits* f = quant::find_format(name);
    ASSERT_NE(f, nullptr);
    Checked c;
    check_format(*f, 768, 256, {1, 8}, c);
    check_format(*f, 192, 128, {1, 3}, c);
    std::printf("%-12s %6lld outputs, worst |gpu - cpu| = %.3g of the tolerance\n", name,
                static_cast<long long>(c.outputs), c.worst_ratio);
  }
}

// A grouped call (several experts in one launch) gives each job exactly the
// bits of a call of its own, for every row, at M = 1 and 3.
TEST(DeviceGemv, GroupedCallEqualsSingleCalls) {
  SKIP_WITHOUT_GPU();
  for (const quant::FormatTraits& f : quant::all_formats()) {
    if (f.device_gemv == nullptr) continue;
    const int64_t rows = round_up(48, f.row_multiple), cols = f.col_multiple > 1 ? f.col_multiple * 3 : 96;
    std::vector<quant::QuantizedMatrix> q;
    std::vector<DeviceMatrix> d;
    for (int j = 0; j < 3; ++j) {
      const std::vector<float> w = normal(static_cast<size_t>(rows * cols), 0.02f, 500 + j);
      q.push_back(f.quantize(w.data(), rows, cols, {}));
      d.push_back(upload(q.back().view()));
    }
    for (int m : {1, 3}) {
      const std::vector<float> x = normal(static_cast<size_t>(3 * m * cols), 1.0f, 77 + m);
      const size_t out = static_cast<size_t>(m * rows);
      DeviceBuffer dx(x.size() * sizeof(float)), grouped(3 * out * sizeof(float)), single(3 * out * sizeof(float));
      dx.upload(x.data(), x.size() * sizeof(float));
      std::vector<quant::DeviceGemvJob> jobs;
      for (int j = 0; j < 3; ++j)
        jobs.push_back(d[j].job(dx.floats() + j * m * cols, grouped.floats() + j * out));
      gemv(f, rows, cols, jobs, m);
      for (int j = 0; j < 3; ++j) {
        const quant::DeviceGemvJob one = d[j].job(dx.floats() + j * m * cols, single.floats() + j * out);
        gemv(f, rows, cols, {&one, 1}, m);
      }
      synchronize();
      std::vector<float> a(3 * out), b(3 * out);
      grouped.download(a.data(), a.size() * sizeof(float));
      single.download(b.data(), b.size() * sizeof(float));
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << f.name << " M=" << m;
    }
  }
}

// A one-row call whose x is quantized once for all its blocks (quantize_jobs,
// then copied into each block's shared memory, the blocks' first loads of
// weights issued before they wait for it) gives the bits of blocks that each
// quantize x themselves, for every row that takes int8 x, plain and gated,
// at an odd shape (45 rows; 96 columns, whose staged x ends in a tail of
// 4-byte words), with 3 jobs and with 33 (two launches, the second's x at
// its offset of the scratch), and an expert's. The scratch starts as 0xff
// bytes (NaN scales), so a block that read it before the quantization
// ended would give a NaN.
TEST(DeviceGemv, OneRowQuantizedOnceEqualsEachBlocksOwn) {
  SKIP_WITHOUT_GPU();
  int checked = 0;
  for (const quant::FormatTraits& f : quant::all_formats()) {
    if (f.device_gemv == nullptr || !quant::cuda::device_gemv_int8_input(f)) continue;
    for (const auto& [r, c, jobs_n] : {std::tuple{45, 96, 3}, std::tuple{45, 96, 33}, std::tuple{768, 2048, 2}}) {
      const int64_t rows = round_up(r, f.row_multiple), cols = round_up(c, std::max<int64_t>(f.col_multiple, 32));
      std::vector<quant::QuantizedMatrix> q;
      std::vector<DeviceMatrix> d;
      for (int j = 0; j < jobs_n; ++j) {
        const std::vector<float> w = normal(static_cast<size_t>(rows * cols), 0.02f, 900 + j);
        q.push_back(f.quantize(w.data(), rows, cols, {}));
        d.push_back(upload(q.back().view()));
      }
      std::vector<float> x = normal(static_cast<size_t>(jobs_n * cols), 1.0f, 31 + cols);
      x[1] = 9.0f;  // an outlier channel
      const std::vector<float> up = normal(x.size(), 1.0f, 41 + cols);
      DeviceBuffer dx(x.size() * sizeof(float)), dup(up.size() * sizeof(float));
      dx.upload(x.data(), x.size() * sizeof(float));
      dup.upload(up.data(), up.size() * sizeof(float));
      for (const bool gated : {false, true}) {
        if (gated && f.device_gemv->gated_rows < 1) continue;
        const size_t out = static_cast<size_t>(jobs_n * rows);
        std::vector<float> runs[2];
        for (const int once : {0, 1}) {
          const test::QuantizeOnce mode(once);
          DeviceBuffer dy(out * sizeof(float));
          const std::vector<float> poison(out, std::nanf(""));
          dy.upload(poison.data(), out * sizeof(float));
          std::vector<quant::DeviceGemvJob> jobs;
          for (int j = 0; j < jobs_n; ++j) {
            jobs.push_back(d[j].job(dx.floats() + j * cols, dy.floats() + j * rows));
            if (gated) jobs.back().x_up = dup.floats() + j * cols;
          }
          const size_t need = f.device_gemv->scratch_bytes(f, rows, cols, jobs_n, 1);
          ASSERT_GT(need, 0u) << f.name;
          DeviceBuffer scratch(need);
          const std::vector<unsigned char> ones(need, 0xff);
          scratch.upload(ones.data(), need);
          gemv(f, rows, cols, jobs, 1, nullptr, &scratch);
          synchronize();
          runs[once].resize(out);
          dy.download(runs[once].data(), out * sizeof(float));
          // The mode was taken: the quantization wrote the scratch, or nothing did.
          std::vector<unsigned char> after(need);
          scratch.download(after.data(), need);
          EXPECT_EQ(after != ones, once == 1) << f.name << " once=" << once << ": the scratch was "
                                              << (after != ones ? "written" : "left as it was");
        }
        const std::string what = std::string(f.name) + " [" + std::to_string(rows) + ", " + std::to_string(cols) +
                                 "] x" + std::to_string(jobs_n) + (gated ? " gated" : "");
        int64_t first = -1;
        EXPECT_EQ(test::bit_differences(runs[1], runs[0], &first), 0) << what << ": first at " << first;
        EXPECT_TRUE(std::all_of(runs[1].begin(), runs[1].end(), [](float v) { return std::isfinite(v); })) << what;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 20);
}

// A trellis call's blocks own more strips the more jobs it has (as many as
// still give every multiprocessor a block, trellis_gemv.cu's strips_of), and
// clusters shrink to match: 1 to 33 jobs of one expert shape take 1, 2, 4 and
// 8 strips a block on a GPU of 132 multiprocessors (more jobs than one launch
// holds, 33, take two launches). Each job's output has the bits of a call of
// its own (the DeviceGemv contract), at 1, 2 and 3 rows of x, plain and gated.
TEST(DeviceGemv, TrellisStripsPerBlockKeepEachJobsBits) {
  SKIP_WITHOUT_GPU();
  const quant::FormatTraits* f = quant::find_format("trellis4");
  ASSERT_NE(f, nullptr);
  const int64_t rows = 768, cols = 256;
  const std::vector<float> w = normal(static_cast<size_t>(rows * cols), 0.02f, 4242);
  const quant::QuantizedMatrix q = f->quantize(w.data(), rows, cols, {});
  const DeviceMatrix d = upload(q.view());
  for (int m : {1, 2, 3}) {
    for (bool gated : {false, true}) {
      for (int n : {1, 6, 12, 24, 33}) {
        const std::vector<float> x = normal(static_cast<size_t>(n * m * cols), 1.0f, 900 + 10 * n + m);
        const std::vector<float> up = normal(x.size(), 1.0f, 901 + 10 * n + m);
        const size_t out = static_cast<size_t>(m * rows);
        DeviceBuffer dx(x.size() * sizeof(float)), du(up.size() * sizeof(float));
        DeviceBuffer grouped(n * out * sizeof(float)), single(n * out * sizeof(float));
        dx.upload(x.data(), x.size() * sizeof(float));
        du.upload(up.data(), up.size() * sizeof(float));
        auto job = [&](int j, DeviceBuffer& y) {
          quant::DeviceGemvJob one = d.job(dx.floats() + j * m * cols, y.floats() + j * out);
          if (gated) one.x_up = du.floats() + j * m * cols;
          return one;
        };
        std::vector<quant::DeviceGemvJob> jobs;
        for (int j = 0; j < n; ++j) jobs.push_back(job(j, grouped));
        gemv(*f, rows, cols, jobs, m);
        for (int j = 0; j < n; ++j) {
          const quant::DeviceGemvJob one = job(j, single);
          gemv(*f, rows, cols, {&one, 1}, m);
        }
        synchronize();
        std::vector<float> a(n * out), b(n * out);
        grouped.download(a.data(), a.size() * sizeof(float));
        single.download(b.data(), b.size() * sizeof(float));
        EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
            << n << " jobs, M=" << m << (gated ? ", gated" : "");
        bool finite = true;
        for (float v : a) finite = finite && std::isfinite(v);
        EXPECT_TRUE(finite) << n << " jobs, M=" << m;
      }
    }
  }
}

// A launch of several formats (quant::cuda::run_gemv_calls, one row of x)
// gives each job the bits of its format's own launch: every row that takes
// part, 7 jobs each (more formats and jobs than one launch holds, so it
// launches several and splits a format's jobs between two), rows a multiple
// of 4 (16-byte loads) and not, with and without a gated input; and every
// two rows with int8_row in launches of their own. More rows of x are
// refused.
TEST(DeviceGemv, MixedLaunchEqualsEachFormatsOwn) {
  SKIP_WITHOUT_GPU();
  const int64_t cols = 256;
  const int per = 7;
  std::vector<const quant::FormatTraits*> fs;
  for (const quant::FormatTraits& f : quant::all_formats())
    if (f.device_gemv != nullptr && f.device_gemv->segment != nullptr && cols % f.col_multiple == 0) {
      EXPECT_GE(f.device_gemv->gated_rows, 1) << f.name << " takes part without a gated input";
      fs.push_back(&f);
    }
  ASSERT_GE(fs.size(), 8u) << "fewer rows take part than one launch holds";
  const size_t nj = fs.size() * per;
  ASSERT_GT(nj, 32u) << "fewer jobs than one launch holds";
  for (const int64_t rows : {96, 45}) {
    std::vector<quant::QuantizedMatrix> q;
    std::vector<DeviceMatrix> d;
    for (size_t j = 0; j < nj; ++j) {
      const std::vector<float> w = normal(static_cast<size_t>(rows * cols), 0.02f, 700 + j + rows);
      q.push_back(fs[j / per]->quantize(w.data(), rows, cols, {}));
      d.push_back(upload(q.back().view()));
    }
    for (const bool gated : {false, true}) {
      const std::string what = "rows " + std::to_string(rows) + (gated ? " gated" : "");
      const size_t in = static_cast<size_t>(cols), out = static_cast<size_t>(rows);
      const std::vector<float> x = normal(nj * in, 1.0f, 31 + rows), up = normal(nj * in, 1.0f, 41 + rows);
      DeviceBuffer dx(x.size() * sizeof(float)), dup(up.size() * sizeof(float)), mixed(nj * out * sizeof(float)),
          own(nj * out * sizeof(float));
      dx.upload(x.data(), x.size() * sizeof(float));
      dup.upload(up.data(), up.size() * sizeof(float));
      std::vector<float> poison(nj * out, std::nanf(""));
      mixed.upload(poison.data(), poison.size() * sizeof(float));
      own.upload(poison.data(), poison.size() * sizeof(float));
      std::vector<quant::DeviceGemvJob> jobs_mixed, jobs_own;
      for (size_t j = 0; j < nj; ++j) {
        jobs_mixed.push_back(d[j].job(dx.floats() + j * in, mixed.floats() + j * out));
        jobs_own.push_back(d[j].job(dx.floats() + j * in, own.floats() + j * out));
        if (gated) jobs_mixed.back().x_up = jobs_own.back().x_up = dup.floats() + j * in;
      }
      std::vector<quant::DeviceGemvCall> calls;
      for (size_t i = 0; i < fs.size(); ++i) calls.push_back({fs[i], jobs_mixed.data() + i * per, per});
      quant::cuda::run_gemv_calls(rows, cols, 1, calls.data(), static_cast<int>(calls.size()), nullptr);
      for (size_t i = 0; i < fs.size(); ++i)
        gemv(*fs[i], rows, cols, {jobs_own.data() + i * per, static_cast<size_t>(per)}, 1);
      synchronize();
      std::vector<float> a(nj * out), b(nj * out);
      mixed.download(a.data(), a.size() * sizeof(float));
      own.download(b.data(), b.size() * sizeof(float));
      for (size_t i = 0; i < fs.size(); ++i) {
        EXPECT_EQ(std::memcmp(a.data() + i * per * out, b.data() + i * per * out, per * out * sizeof(float)), 0)
            << fs[i]->name << " " << what;
        EXPECT_TRUE(std::all_of(a.begin() + i * per * out, a.begin() + (i + 1) * per * out,
                                [](float v) { return std::isfinite(v); }))
            << fs[i]->name << " " << what << ": an output left unwritten";
      }
      // Every two rows beside int8_row in launches of their own, so that
      // each instantiated set of bodies runs (gemv_mixed.cu, kBodySets), not
      // only the kernel holding every body: at 96 rows (the stream rows'
      // 16-byte loads) and 45 (not; int8_row's last block has warps of fewer
      // than 4 rows and of none); 2 jobs each.
      const auto i8 = std::find(fs.begin(), fs.end(), quant::find_format("int8_row")) - fs.begin();
      ASSERT_LT(static_cast<size_t>(i8), fs.size()) << "int8_row takes no part";
      constexpr int kTwo = 2;
      for (size_t i = 0; i < fs.size(); ++i)
        for (size_t k = i + 1; k < fs.size(); ++k) {
          std::vector<size_t> in_launch = {i, k};
          if (static_cast<size_t>(i8) != i && static_cast<size_t>(i8) != k) in_launch.push_back(i8);
          std::vector<quant::DeviceGemvCall> few;
          for (const size_t f : in_launch) few.push_back({fs[f], jobs_mixed.data() + f * per, kTwo});
          mixed.upload(poison.data(), poison.size() * sizeof(float));
          quant::cuda::run_gemv_calls(rows, cols, 1, few.data(), static_cast<int>(few.size()), nullptr);
          synchronize();
          mixed.download(a.data(), a.size() * sizeof(float));
          for (const size_t f : in_launch)
            EXPECT_EQ(std::memcmp(a.data() + f * per * out, b.data() + f * per * out, kTwo * out * sizeof(float)), 0)
                << fs[f]->name << " in a launch with " << fs[i]->name << " and " << fs[k]->name << " " << what;
        }
    }
  }
  const quant::DeviceGemvCall none{fs[0], nullptr, 0};
  EXPECT_THROW(quant::cuda::run_gemv_calls(96, cols, 3, &none, 1, nullptr), Error);
}

// The decode expert MLP of 4 experts in 3 formats (two share one, so a
// grouped launch holds several experts) against the CPU's run_expert.
// Tolerance per output: the product bound of down around the CPU's h, plus
// the bounds of gate and up carried through SwiGLU (|d silu / dg| <= 1.1)
// and 16 ulps of each h for expf and the division.
TEST(DeviceGemv, ExpertMlpMatchesCpuRunExpert) {
  SKIP_WITHOUT_GPU();
  const int64_t H = 256, I = 128;
  const int m_rows = 3;
  const char* formats[] = {"fp4_g32", "int3_g64", "fp4_g32", "trellis2_lut"};
  std::vector<quant::QuantizedMatrix> q;
  std::vector<ExpertWeights> cpu_experts;
  std::vector<DeviceExpert> gpu_experts;
  for (int e = 0; e < 4; ++e) {
    const quant::FormatTraits& f = quant::format_by_name(formats[e]);
    for (int p = 0; p < 3; ++p) {
      const int64_t r = p == 2 ? H : I, c = p == 2 ? I : H;
      const std::vector<float> w = normal(static_cast<size_t>(r * c), 0.05f, 1000 + 3 * e + p);
      q.push_back(f.quantize(w.data(), r, c, {}));
    }
  }
  for (int e = 0; e < 4; ++e) {
    ExpertWeights w{.gate = q[3 * e].view(), .up = q[3 * e + 1].view(), .down = q[3 * e + 2].view()};
    cpu_experts.push_back(w);
    gpu_experts.push_back(upload(w));
  }
  std::vector<float> x = normal(static_cast<size_t>(m_rows * H), 1.0f, 5);
  DeviceBuffer dx(x.size() * sizeof(float)), dout(static_cast<size_t>(4 * m_rows * H) * sizeof(float)), scratch;
  dx.upload(x.data(), x.size() * sizeof(float));
  std::vector<const DeviceExpert*> ptrs;
  for (const DeviceExpert& e : gpu_experts) ptrs.push_back(&e);
  expert_mlp_decode(ptrs, dx.floats(), m_rows, dout.floats(), scratch);
  synchronize();
  std::vector<float> gpu(static_cast<size_t>(4 * m_rows * H));
  dout.download(gpu.data(), gpu.size() * sizeof(float));

  model::FloatBuffer buf;
  for (int e = 0; e < 4; ++e) {
    const ExpertWeights& w = cpu_experts[e];
    std::vector<float> y(static_cast<size_t>(m_rows * H)), g(static_cast<size_t>(m_rows * I)), u(g.size()), h(g.size());
    run_expert(w, x.data(), m_rows, y.data(), buf);
    w.gate.format->matmul(w.gate, x.data(), m_rows, g.data(), false);
    w.up.format->matmul(w.up, x.data(), m_rows, u.data(), false);
    for (size_t i = 0; i < h.size(); ++i) h[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
    double gg = 0.0, gu = 0.0, gd = 0.0, unused = 0.0;
    const std::vector<double> eg = envelope(w.gate, x, m_rows, &gg), eu = envelope(w.up, x, m_rows, &gu);
    // The int8 step of x in gate and up, and of h in down, where the GPU quantizes its input.
    auto step_of = [&](const quant::PackedMatrix& pm, const std::vector<float>& in) {
      return quant::cuda::device_gemv_int8_input(*pm.format) ? int8_envelope(pm, in, m_rows)
                                                            : std::vector<double>(static_cast<size_t>(m_rows * pm.rows), 0.0);
    };
    const std::vector<double> sg = step_of(w.gate, x), su = step_of(w.up, x);
    std::vector<float> dh(h.size());  // bound of |h_gpu - h_cpu|
    for (size_t i = 0; i < h.size(); ++i) {
      const double silu = std::fabs(g[i] / (1.0 + std::exp(-g[i])));
      dh[i] = static_cast<float>((1.1 * std::fabs(u[i]) * (gg * eg[i] + sg[i]) + silu * (gu * eu[i] + su[i]) +
                                  16 * kUnit * std::fabs(h[i])) *
                                 1.001);
    }
    const std::vector<double> ed = envelope(w.down, h, m_rows, &gd);
    // The GPU quantizes its own h, within dh of the CPU's: its blocks' amax is at most that of |h| + dh.
    std::vector<float> h_reach(h.size());
    for (size_t i = 0; i < h.size(); ++i) h_reach[i] = std::fabs(h[i]) + dh[i];
    const std::vector<double> sd = step_of(w.down, h_reach);
    // The down product's reaction to h's error: at most sum_i |D[n, i]| dh[i],
    // which the envelope bounds.
    const std::vector<double> carried = envelope(w.down, dh, m_rows, &unused);
    int bad = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      const double tol = gd * ed[i] + carried[i] * 1.001 + sd[i] * 1.001 + 1e-30;
      const double diff = std::fabs(static_cast<double>(gpu[static_cast<size_t>(e * m_rows * H) + i]) - y[i]);
      if (!(diff <= tol) && bad++ < 5)
        ADD_FAILURE() << formats[e] << " expert " << e << " output " << i << ": gpu "
                      << gpu[static_cast<size_t>(e * m_rows * H) + i] << " cpu " << y[i] << " |diff| " << diff
                      << " > " << tol;
    }
    EXPECT_EQ(bad, 0) << formats[e];
  }
}

}  // namespace
}  // namespace eq::exec::cuda
