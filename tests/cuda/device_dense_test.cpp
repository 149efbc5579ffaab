// The packed model's float matrices on the GPU (exec/cuda/device_linear.h,
// `--device cuda`; ctest label `cuda`): every matrix of model::linear_matrices
// gives x W^T within float32's bound of a float64 product, a packed model with
// them on the GPU gives the CPU's logits, a GPU without room leaves them on
// the CPU, and without a GPU the open refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "exec/cuda/device_exec.h"
#include "exec/cuda/device_linear.h"
#include "exec/packed_fixture.h"
#include "exec/packed_model.h"
#include "logit_agreement.h"
#include "model/config.h"
#include "model/forward.h"
#include "model/weights.h"
#include "product_bounds.h"

namespace eq::exec {
namespace {

namespace fs = std::filesystem;

// tinymoe packed through the binary (not in this process: a pack sets the
// process's trellis search, which the quantizer tests beside this one read).
const std::string& cli_pack() {
  static const std::string path = [] {
    const fs::path out = test::temp_dir("device_dense") / "packed";
    std::string output;
    const int rc = test::run_command(test::binary() + " pack --model " + test::tinymoe_path() +
                                         " --uniform fp4_g32 --force -o " + out.string(),
                                     &output);
    EXPECT_EQ(rc, 0) << output;
    return out.string();
  }();
  return path;
}

PackedModelOptions on(quant::Device device) {
  PackedModelOptions o = test::open_options(false, "");
  o.dense_device = device;
  return o;
}

// tinymoe's float matrices as GPU ops, reading the source's weights.
struct TinymoeDense {
  std::unique_ptr<model::Model> source = model::Model::open(test::tinymoe_path());
  cuda::DeviceDenseOps dense = [&] {
    cuda::DeviceDenseOps d = cuda::device_dense_ops(source->config(), [](const std::string&) { return true; }, {});
    d.weights->store = &source->weights();
    return d;
  }();
};

// Bytes of float32 of every matrix of model::linear_matrices(c).
uint64_t dense_bytes_of(const model::ModelConfig& c) {
  uint64_t bytes = 0;
  for (const auto& [name, shape] : model::linear_matrices(c))
    bytes += static_cast<uint64_t>(shape[0] * shape[1]) * sizeof(float);
  return bytes;
}

TEST(DeviceDense, RefusedWithoutGpu) {
  const std::string why = cuda::unavailable_reason();
  if (why.empty()) GTEST_SKIP() << "a GPU is present: the refusal is not reachable";
  try {
    PackedModel::open(cli_pack(), on(quant::Device::kCuda));
    FAIL() << "opened with its dense matrices on a GPU that is not there";
  } catch (const eq::Error& e) {
    EXPECT_EQ(std::string(e.what()), "--device cuda: " + why);
  }
}

// y = x W^T of every matrix at 1, 3, 8, 9 and 70 rows against a float64
// product: |y - y64| <= 2 gamma(cols) sum_k |x_k| |W_nk| (float32 sums, no
// TF32). tinymoe's checkpoint is bf16, so each matrix goes to the GPU as bf16
// (half the bytes; up to 8 rows through dense_product's own kernel, more
// through cuBLAS on the widened rows), and as float32 with
// EXPERTQUANT_GPU_DENSE_BF16=0.
void expect_every_matrix_matches(bool bf16) {
  if (!bf16) ::setenv("EXPERTQUANT_GPU_DENSE_BF16", "0", 1);  // read when a matrix is placed
  const TinymoeDense t;
  const model::Model* source = t.source.get();
  const cuda::DeviceDenseOps& dense = t.dense;
  ASSERT_EQ(dense.ops.size(), model::linear_matrices(source->config()).size());
  const uint64_t before = cuda::device_dense_bytes();
  for (const auto& [name, op] : dense.ops) {
    const int64_t N = op->rows(), K = op->cols();
    const model::Tensor32Ptr w = source->weights().get(name, {N, K});
    for (int64_t m : {1, 3, 8, 9, 70}) {
      const std::vector<float> x = cuda::bounds::normal(static_cast<size_t>(m * K), 1.0f, 17 + m);
      std::vector<float> y(static_cast<size_t>(m * N), std::nanf(""));
      op->apply(x.data(), m, y.data());
      double worst = 0.0;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t n = 0; n < N; ++n) {
          double exact = 0.0, env = 0.0;
          for (int64_t k = 0; k < K; ++k) {
            const double p = static_cast<double>(x[static_cast<size_t>(i * K + k)]) * w->data[static_cast<size_t>(n * K + k)];
            exact += p;
            env += std::fabs(p);
          }
          const double err = std::fabs(y[static_cast<size_t>(i * N + n)] - exact);
          const double bound = 2.0 * cuda::bounds::gamma(static_cast<double>(K)) * env;
          ASSERT_LE(err, bound) << name << " row " << i << " column " << n << " (M = " << m << ", "
                                << (bf16 ? "bf16" : "float32") << ")";
          worst = std::max(worst, env > 0 ? err / env : err);
        }
      if (m == 1 || m == 70)
        std::printf("%s %-48s [%lld, %lld] M = %lld: worst error %.3g of the envelope\n", bf16 ? "bf16" : "f32 ",
                    name.c_str(), static_cast<long long>(N), static_cast<long long>(K), static_cast<long long>(m),
                    worst);
    }
  }
  ::unsetenv("EXPERTQUANT_GPU_DENSE_BF16");
  const uint64_t f32 = dense_bytes_of(source->config());
  EXPECT_EQ(cuda::device_dense_bytes() - before, bf16 ? f32 / 2 : f32);
}

TEST(DeviceDense, EveryMatrixMatchesFloat64) {
  const std::string why = cuda::unavailable_reason();
  if (!why.empty()) GTEST_SKIP() << "no GPU: " << why;
  expect_every_matrix_matches(true);
  expect_every_matrix_matches(false);
}

// dense_product on a bf16 matrix larger than one widened chunk (32 MiB of
// float32: 4,096 rows of 2,048), its rows odd in number: 1 and 5 rows of x
// through the bf16 kernel, 9 through cuBLAS a chunk at a time into the columns
// of y; every value within float32's bound of a float64 product.
TEST(DeviceDense, Bf16ProductAcrossChunksMatchesFloat64) {
  const std::string why = cuda::unavailable_reason();
  if (!why.empty()) GTEST_SKIP() << "no GPU: " << why;
  const int64_t N = 4101, K = 2048;
  std::vector<float> w = cuda::bounds::normal(static_cast<size_t>(N * K), 0.05f, 5);
  std::vector<uint16_t> bits(w.size());
  for (size_t i = 0; i < w.size(); ++i) {  // w rounded to bf16 (by truncation: any bf16 will do)
    uint32_t b;
    std::memcpy(&b, &w[i], 4);
    bits[i] = static_cast<uint16_t>(b >> 16);
    b &= 0xffff0000u;
    std::memcpy(&w[i], &b, 4);
  }
  cuda::DeviceBuffer dw(bits.size() * 2), scratch;
  dw.upload(bits.data(), bits.size() * 2);
  const cuda::DenseMatrix m{dw.data(), N, K, true};
  for (int64_t rows : {1, 5, 9}) {
    const std::vector<float> x = cuda::bounds::normal(static_cast<size_t>(rows * K), 1.0f, 40 + rows);
    cuda::DeviceBuffer dx(x.size() * 4), dy(static_cast<size_t>(rows * N) * 4);
    dx.upload(x.data(), x.size() * 4);
    cuda::dense_product(m, dx.floats(), dy.floats(), rows, nullptr, scratch);
    std::vector<float> y(static_cast<size_t>(rows * N));
    dy.download(y.data(), y.size() * 4);  // synchronous: after the product
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t n = 0; n < N; ++n) {
        double exact = 0.0, env = 0.0;
        for (int64_t k = 0; k < K; ++k) {
          const double p = static_cast<double>(x[static_cast<size_t>(i * K + k)]) * w[static_cast<size_t>(n * K + k)];
          exact += p;
          env += std::fabs(p);
        }
        ASSERT_LE(std::fabs(y[static_cast<size_t>(i * N + n)] - exact),
                  2.0 * cuda::bounds::gamma(static_cast<double>(K)) * env)
            << "row " << i << " column " << n << " of " << rows << " rows";
      }
  }
}

// The q, k and v of a layer run together by apply_shared give each matrix's
// apply() bit for bit, at 1 and 5 rows; ops of other widths, or an op that is
// not a GPU op, are declined.
TEST(DeviceDense, SharedApplyEqualsEachApply) {
  const std::string why = cuda::unavailable_reason();
  if (!why.empty()) GTEST_SKIP() << "no GPU: " << why;
  const TinymoeDense t;
  const cuda::DeviceDenseOps& dense = t.dense;
  const std::string p = "model.layers.0.self_attn.";
  ASSERT_TRUE(dense.ops.count(p + "q_proj.weight") && dense.ops.count(p + "k_proj.weight") &&
              dense.ops.count(p + "v_proj.weight"));
  const model::LinearOp* q = dense.ops.at(p + "q_proj.weight").get();
  const model::LinearOp* k = dense.ops.at(p + "k_proj.weight").get();
  const model::LinearOp* v = dense.ops.at(p + "v_proj.weight").get();
  for (int64_t m : {1, 5}) {
    const int64_t K = q->cols();
    const std::vector<float> x = cuda::bounds::normal(static_cast<size_t>(m * K), 1.0f, 41 + m);
    std::vector<std::vector<float>> alone, together;
    for (const model::LinearOp* op : {q, k, v}) {
      alone.emplace_back(static_cast<size_t>(m * op->rows()));
      together.emplace_back(static_cast<size_t>(m * op->rows()), std::nanf(""));
      op->apply(x.data(), m, alone.back().data());
    }
    const model::LinearOp* ops[] = {q, k, v};
    float* ys[] = {together[0].data(), together[1].data(), together[2].data()};
    ASSERT_TRUE(q->apply_shared(ops, x.data(), m, ys));
    for (size_t i = 0; i < 3; ++i)
      EXPECT_EQ(std::memcmp(alone[i].data(), together[i].data(), alone[i].size() * sizeof(float)), 0)
          << "product " << i << " at M = " << m;
  }
  // An op of another width (every tinymoe matrix takes 128 columns: the ops
  // of a config with half the hidden size, never placed, since the width is
  // checked first): declined.
  model::ModelConfig narrow = t.source->config();
  narrow.hidden_size /= 2;
  const cuda::DeviceDenseOps other = cuda::device_dense_ops(narrow, [](const std::string&) { return true; }, {});
  const model::LinearOp* half = other.ops.at(p + "k_proj.weight").get();
  ASSERT_NE(half->cols(), q->cols());
  {
    const model::LinearOp* mixed[] = {q, half};
    std::vector<float> x(static_cast<size_t>(q->cols())), a(static_cast<size_t>(q->rows())),
        b(static_cast<size_t>(half->rows()));
    float* ys[] = {a.data(), b.data()};
    EXPECT_FALSE(q->apply_shared(mixed, x.data(), 1, ys));
  }
  // A CPU op among them: declined.
  struct CpuOp final : model::LinearOp {
    int64_t n, k;
    CpuOp(int64_t n_, int64_t k_) : n(n_), k(k_) {}
    int64_t rows() const override { return n; }
    int64_t cols() const override { return k; }
    void apply(const float*, int64_t, float*) const override {}
  } cpu_op(4, q->cols());
  const model::LinearOp* with_cpu[] = {q, &cpu_op};
  std::vector<float> x(static_cast<size_t>(q->cols())), a(static_cast<size_t>(q->rows())), b(4);
  float* ys[] = {a.data(), b.data()};
  EXPECT_FALSE(q->apply_shared(with_cpu, x.data(), 1, ys));
}

// The whole packed model with its float matrices on the GPU against the CPU:
// a prefill of 2 x 64 tokens and 4 decode steps. A position whose router sees
// two experts within the products' rounding of each other may pick the other
// one, and the positions after it see that through attention, so logits are
// compared as distributions: mean KL(CPU || GPU) per position at most 1e-3
// nats and the same top token at 19 in 20 positions (a misplaced or
// transposed matrix is far from both), and every matrix copied once.
TEST(DeviceDense, PackedModelMatchesTheCpu) {
  const std::string why = cuda::unavailable_reason();
  if (!why.empty()) GTEST_SKIP() << "no GPU: " << why;
  auto cpu = PackedModel::open(cli_pack(), on(quant::Device::kCpu));
  const uint64_t before = cuda::device_dense_bytes();
  // Every layer on the CPU around its GPU products (the layers on the GPU are
  // device_layers_test.cpp's, against this path).
  ::setenv("EXPERTQUANT_GPU_LAYERS", "0", 1);
  auto gpu = PackedModel::open(cli_pack(), on(quant::Device::kCuda));
  ::unsetenv("EXPERTQUANT_GPU_LAYERS");
  auto run = [](PackedModel& pm) {
    model::Model& m = pm.model();
    const std::vector<int32_t> text = test::corpus_tokens("c", 300);
    std::vector<int32_t> prompt(text.begin(), text.begin() + 128);
    model::KvCache cache = m.new_cache(2, 96);
    model::FloatBuffer all = m.forward(prompt, 2, 64, cache);
    for (int step = 0; step < 4; ++step) {
      std::vector<int32_t> next = {text[150 + step], text[250 + step]};
      const auto l = m.forward(next, 2, 1, cache);
      all.insert(all.end(), l.begin(), l.end());
    }
    return all;
  };
  const model::FloatBuffer a = run(*gpu), b = run(*cpu);
  ASSERT_EQ(a.size(), b.size());
  const test::LogitAgreement g = test::logit_agreement(b, a, gpu->config().vocab_size);  // CPU || GPU
  const double kl_mean = g.kl_mean;
  const int64_t same_top = g.same_top, rows = g.rows;
  EXPECT_LE(kl_mean, 1e-3);
  EXPECT_GE(same_top * 20, rows * 19) << same_top << " of " << rows << " positions with the same top token";
  std::printf("mean KL(CPU || GPU) %.3g nats over %lld positions; same top token at %lld\n", kl_mean,
              static_cast<long long>(rows), static_cast<long long>(same_top));
  EXPECT_EQ(cuda::device_dense_bytes() - before, dense_bytes_of(gpu->config()) / 2);  // bf16 on the GPU
}

// A GPU without room for the matrices (a headroom larger than any GPU's
// memory): every op stays on the CPU, counted there, and the logits are the
// CPU model's bit for bit.
TEST(DeviceDense, NoRoomLeavesTheMatricesOnTheCpu) {
  const std::string why = cuda::unavailable_reason();
  if (!why.empty()) GTEST_SKIP() << "no GPU: " << why;
  auto cpu = PackedModel::open(cli_pack(), on(quant::Device::kCpu));
  auto gpu = PackedModel::open(cli_pack(), on(quant::Device::kCuda));
  const uint64_t on_gpu = cuda::device_dense_bytes(), on_cpu = cuda::device_dense_cpu_bytes();
  ::setenv("EXPERTQUANT_GPU_HEADROOM", "1125899906842624", 1);  // 1 PiB
  model::KvCache cache_gpu = gpu->model().new_cache(1, 40), cache_cpu = cpu->model().new_cache(1, 40);
  const std::vector<int32_t> text = test::corpus_tokens("c", 32);
  const model::FloatBuffer a = gpu->model().forward(text, 1, 32, cache_gpu);
  ::unsetenv("EXPERTQUANT_GPU_HEADROOM");
  const model::FloatBuffer b = cpu->model().forward(text, 1, 32, cache_cpu);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "logit " << i;
  EXPECT_EQ(cuda::device_dense_bytes(), on_gpu);
  EXPECT_EQ(cuda::device_dense_cpu_bytes() - on_cpu, dense_bytes_of(gpu->config()));
}

}  // namespace
}  // namespace eq::exec
