// model/projection.h: project_shared gives project()'s results whether the
// first op takes the others along (an op that runs them together, as the GPU
// ops do) or declines, and adds each product's bias either way; products
// without an op run through their float32 weights.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "model/projection.h"

namespace eq::model {
namespace {

Tensor32Ptr tensor(std::vector<int64_t> shape, float seed) {
  auto t = std::make_shared<Tensor32>();
  t->shape = shape;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  t->data.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t->data[static_cast<size_t>(i)] = seed * static_cast<float>((i * 7919) % 13 - 6);
  return t;
}

// y = x W^T through a stored matrix; `shared` says whether it runs several
// such ops together, and counts the calls that did.
class MatrixOp final : public LinearOp {
 public:
  MatrixOp(Tensor32Ptr w, bool shared, int* together) : w_(std::move(w)), shared_(shared), together_(together) {}
  int64_t rows() const override { return w_->shape[0]; }
  int64_t cols() const override { return w_->shape[1]; }
  void apply(const float* x, int64_t n, float* y) const override {
    project(x, n, cols(), w_, nullptr, rows(), nullptr, y);
  }
  bool apply_shared(std::span<const LinearOp* const> ops, const float* x, int64_t n, float* const* ys) const override {
    if (!shared_) return false;
    for (size_t i = 0; i < ops.size(); ++i) ops[i]->apply(x, n, ys[i]);
    ++*together_;
    return true;
  }

 private:
  Tensor32Ptr w_;
  bool shared_;
  int* together_;
};

TEST(Projection, SharedEqualsEachProjectionWithBiases) {
  const int64_t n = 3, in = 8;
  const Tensor32Ptr wq = tensor({6, in}, 0.5f), wk = tensor({4, in}, 0.25f), wv = tensor({4, in}, 0.75f);
  const Tensor32Ptr bq = tensor({6}, 1.0f), bv = tensor({4}, 2.0f);
  const std::vector<float> x = [&] {
    std::vector<float> v(static_cast<size_t>(n * in));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 5) - 2.0f;
    return v;
  }();
  for (const bool shared : {false, true}) {
    int together = 0;
    const MatrixOp q(wq, shared, &together), k(wk, shared, &together);
    // v runs through its float32 weights: no op.
    std::vector<float> yq(static_cast<size_t>(n * 6)), yk(static_cast<size_t>(n * 4)), yv(static_cast<size_t>(n * 4));
    const Projection ps[] = {{&wq, &q, 6, &bq, yq.data()}, {&wk, &k, 4, nullptr, yk.data()}, {&wv, nullptr, 4, &bv, yv.data()}};
    project_shared(x.data(), n, in, ps);
    EXPECT_EQ(together, shared ? 1 : 0);
    std::vector<float> eq(yq.size()), ek(yk.size()), ev(yv.size());
    project(x.data(), n, in, wq, nullptr, 6, bq, eq.data());
    project(x.data(), n, in, wk, nullptr, 4, nullptr, ek.data());
    project(x.data(), n, in, wv, nullptr, 4, bv, ev.data());
    EXPECT_EQ(std::memcmp(yq.data(), eq.data(), eq.size() * sizeof(float)), 0) << "shared " << shared;
    EXPECT_EQ(std::memcmp(yk.data(), ek.data(), ek.size() * sizeof(float)), 0) << "shared " << shared;
    EXPECT_EQ(std::memcmp(yv.data(), ev.data(), ev.size() * sizeof(float)), 0) << "shared " << shared;
    // The bias was added: a product differs from the one without it.
    std::vector<float> nb(yq.size());
    project(x.data(), n, in, wq, nullptr, 6, nullptr, nb.data());
    EXPECT_NE(std::memcmp(yq.data(), nb.data(), nb.size() * sizeof(float)), 0);
  }
}

}  // namespace
}  // namespace eq::model
