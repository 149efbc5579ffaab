// model::LayerRunner (model/layer_runner.h), the hook the GPU's decoder layers
// use: the model hands the runner's consecutive layers over in one call and
// runs the others itself, the same in forward_hidden and forward_layer (the
// layer-by-layer pass), gives a cache no rows for the runner's layers, and
// checks a call before the runner sees it. The runner here runs its layers
// with a second copy of the model's own code, so every result must be the
// model's without a runner, bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "core/error.h"
#include "model/forward.h"
#include "model/layer_pass.h"
#include "test_support.h"

namespace eq::model {
namespace {

std::string tinymoe() { return (test::data_dir() / "tinymoe").string(); }

// Takes the layers in `mine`, running each through `twin` (a model of the
// same checkpoint without a runner) on a cache of its own that follows the
// caller's positions; records each call's [first, last).
class TwinRunner final : public LayerRunner {
 public:
  TwinRunner(std::vector<bool> mine, std::vector<std::pair<int64_t, int64_t>>* calls)
      : twin_(Model::open(tinymoe())), mine_(std::move(mine)), calls_(calls) {}
  bool runs(int64_t layer) const override { return mine_[static_cast<size_t>(layer)]; }
  void forward_layers(int64_t first, int64_t last, float* h, int64_t batch, int64_t seq_len,
                      KvCache& cache) override {
    calls_->push_back({first, last});
    // A cache of its own per caller's cache (the layers of one forward come in several calls).
    if (!cache_ || seen_ != &cache || cache_->batch() != batch || cache_->capacity() != cache.capacity()) {
      cache_ = std::make_unique<KvCache>(twin_->new_cache(batch, cache.capacity()));
      seen_ = &cache;
    }
    if (cache_->length() < cache.length()) cache_->advance(cache.length() - cache_->length());
    ASSERT_EQ(cache_->length(), cache.length());
    for (int64_t l = first; l < last; ++l) {
      ASSERT_TRUE(runs(l)) << "layer " << l << " handed over";
      twin_->forward_layer(l, h, batch, seq_len, *cache_);
    }
  }

 private:
  std::unique_ptr<Model> twin_;
  std::vector<bool> mine_;
  std::vector<std::pair<int64_t, int64_t>>* calls_;
  std::unique_ptr<KvCache> cache_;
  const KvCache* seen_ = nullptr;
};

// A prefill of 2 x 24 tokens and 3 decode steps.
FloatBuffer run(Model& m) {
  const int64_t V = m.config().vocab_size;
  std::vector<int32_t> tokens(48);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 37 + 11) % V);
  KvCache cache = m.new_cache(2, 32);
  FloatBuffer all = m.forward(tokens, 2, 24, cache);
  for (int step = 0; step < 3; ++step) {
    const std::vector<int32_t> next = {static_cast<int32_t>((step * 7 + 3) % V), static_cast<int32_t>(step + 40)};
    const FloatBuffer l = m.forward(next, 2, 1, cache);
    all.insert(all.end(), l.begin(), l.end());
  }
  return all;
}

TEST(LayerRunner, ConsecutiveLayersGoInOneCallAndGiveTheModelsBits) {
  auto plain = Model::open(tinymoe());
  const int64_t L = plain->config().num_layers;
  ASSERT_GE(L, 4);
  // The first layer alone, then the model's own layer 1, then layers 2 to the last together.
  std::vector<bool> mine(static_cast<size_t>(L), true);
  mine[1] = false;
  std::vector<std::pair<int64_t, int64_t>> calls;
  auto hooked = Model::open(tinymoe());
  hooked->set_layer_runner(std::make_unique<TwinRunner>(mine, &calls));
  const FloatBuffer a = run(*hooked), b = run(*plain);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  const std::vector<std::pair<int64_t, int64_t>> per_forward = {{0, 1}, {2, L}};
  ASSERT_EQ(calls.size(), 4 * per_forward.size());
  for (size_t i = 0; i < calls.size(); ++i) EXPECT_EQ(calls[i], per_forward[i % per_forward.size()]) << "call " << i;
}

// The layer-by-layer pass hands the runner one layer a call, with the same bits.
TEST(LayerRunner, LayerPassHandsOverOneLayerACall) {
  auto plain = Model::open(tinymoe());
  const int64_t L = plain->config().num_layers;
  std::vector<bool> mine(static_cast<size_t>(L), true);
  mine[0] = false;
  std::vector<std::pair<int64_t, int64_t>> calls;
  auto hooked = Model::open(tinymoe());
  hooked->set_layer_runner(std::make_unique<TwinRunner>(mine, &calls));
  WindowBatch batch;
  batch.batch = 1;
  batch.seq_len = 20;
  for (int32_t i = 0; i < 20; ++i) batch.tokens.push_back((i * 13 + 5) % static_cast<int32_t>(plain->config().vocab_size));
  PassOptions o;
  o.order = PassOrder::kLayer;
  FloatBuffer a, b;
  run_pass(*hooked, {batch}, o, [&](size_t, FloatBuffer& h) { a = h; });
  run_pass(*plain, {batch}, o, [&](size_t, FloatBuffer& h) { b = h; });
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  ASSERT_EQ(calls.size(), static_cast<size_t>(L - 1));
  for (int64_t l = 1; l < L; ++l) EXPECT_EQ(calls[static_cast<size_t>(l - 1)], std::make_pair(l, l + 1));
}

// A cache gets no key and value rows for the runner's layers; a call past the
// cache's capacity is refused before the runner sees it.
TEST(LayerRunner, CacheHasNoRowsForItsLayersAndCallsAreChecked) {
  auto plain = Model::open(tinymoe());
  const ModelConfig& c = plain->config();
  std::vector<bool> mine(static_cast<size_t>(c.num_layers), false);
  mine[1] = mine[2] = true;
  std::vector<std::pair<int64_t, int64_t>> calls;
  auto hooked = Model::open(tinymoe());
  hooked->set_layer_runner(std::make_unique<TwinRunner>(mine, &calls));
  const int64_t batch = 2, capacity = 16;
  const uint64_t row_bytes = static_cast<uint64_t>(batch * capacity * c.num_kv_heads * c.head_dim) * sizeof(float);
  EXPECT_EQ(plain->new_cache(batch, capacity).bytes() - hooked->new_cache(batch, capacity).bytes(), 2 * 2 * row_bytes)
      << "keys and values of two layers";
  KvCache cache = hooked->new_cache(1, 4);
  const std::vector<int32_t> five = {1, 2, 3, 4, 5};
  EXPECT_THROW((void)hooked->forward(five, 1, 5, cache), Error);
  EXPECT_TRUE(calls.empty());
}

}  // namespace
}  // namespace eq::model
