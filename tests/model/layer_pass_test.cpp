// model::run_pass: the layer order reads each tensor from the checkpoint once,
// layer after layer, and holds no layer after the pass; the window order
// reads the routed experts again for every batch. The final hidden states of
// both orders and of the spilled pass are equal bit for bit; the spill file
// is unlinked at once.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <string>

#include "model/forward.h"
#include "model/layer_pass.h"
#include "test_support.h"

namespace eq::model {
namespace {

std::vector<WindowBatch> three_batches(int64_t vocab) {
  std::vector<WindowBatch> batches;
  int32_t next = 7;
  for (auto [batch, len] : {std::pair<int64_t, int64_t>{2, 40}, {1, 40}, {1, 13}}) {
    WindowBatch& b = batches.emplace_back();
    b.batch = batch;
    b.seq_len = len;
    for (int64_t i = 0; i < batch * len; ++i) b.tokens.push_back(next = int32_t((next * 131 + 17) % vocab));
  }
  return batches;
}

// Layer number of a per-layer tensor name, -1 for the others.
int64_t layer_of(const std::string& name) {
  const std::string p = "model.layers.";
  if (!name.starts_with(p)) return -1;
  return std::stoll(name.substr(p.size()));
}

struct PassRun {
  std::vector<FloatBuffer> hidden;
  std::vector<std::string> reads;
  uint64_t checkpoint_bytes = 0;  // the pass's last progress report
  uint64_t read_bytes = 0;        // stored bytes of the distinct tensors it read
};

PassRun run(const std::string& path, PassOrder order, uint64_t hidden_memory) {
  const auto m = Model::open(path);
  PassRun r;
  m->weights().set_read_hook([&](const std::string& name) { r.reads.push_back(name); });
  const auto batches = three_batches(m->config().vocab_size);
  PassOptions o;
  o.order = order;
  o.hidden_memory = hidden_memory;
  o.spill_dir = test::temp_dir("layer_pass_spill").string();
  o.progress = [&](const PassProgress& p) {
    EXPECT_GE(p.checkpoint_bytes, r.checkpoint_bytes) << "the bytes read only grow";
    r.checkpoint_bytes = p.checkpoint_bytes;
  };
  run_pass(*m, batches, o, [&](size_t i, FloatBuffer& h) {
    EXPECT_EQ(i, r.hidden.size());
    r.hidden.push_back(h);
  });
  if (order == PassOrder::kLayer) {
    // Only the tensors outside the layers stay converted.
    m->weights().set_read_hook(nullptr);
    for (int64_t l = 0; l < m->config().num_layers; ++l) m->weights().release_layer(l);
  }
  std::map<std::string, int> distinct;
  for (const std::string& name : r.reads)
    if (name.find(" (") == std::string::npos && distinct[name]++ == 0)
      r.read_bytes += m->weights().source().info(name).stored_bytes;
  return r;
}

void check_model(const std::string& path) {
  const PassRun window = run(path, PassOrder::kWindow, 0);
  const PassRun layer = run(path, PassOrder::kLayer, 0);
  const PassRun spilled = run(path, PassOrder::kLayer, 1);
  ASSERT_EQ(window.hidden.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_EQ(window.hidden[i].size(), layer.hidden[i].size());
    EXPECT_EQ(std::memcmp(window.hidden[i].data(), layer.hidden[i].data(), window.hidden[i].size() * sizeof(float)), 0)
        << "batch " << i;
    EXPECT_EQ(std::memcmp(window.hidden[i].data(), spilled.hidden[i].data(), window.hidden[i].size() * sizeof(float)), 0)
        << "batch " << i;
  }
  // Layer order: every tensor once, per-layer tensors in layer order.
  std::map<std::string, int> count;
  int64_t last_layer = -1;
  for (const std::string& name : layer.reads) {
    // Derived keys ("... (biases of the layer)", "(1 + w)") may be made twice
    // by experts loaded side by side (get_or_make does not wait for another
    // thread's make); they are small and cached after.
    if (name.find(" (") != std::string::npos) continue;
    EXPECT_EQ(++count[name], 1) << name << " read again";
    const int64_t l = layer_of(name);
    if (l < 0) continue;
    EXPECT_GE(l, last_layer) << name << " read after layer " << last_layer;
    last_layer = l;
  }
  EXPECT_GT(last_layer, 0);
  // Window order: the routed experts are read again for each of the 3 batches.
  std::map<std::string, int> window_count;
  int most = 0;
  for (const std::string& name : window.reads) most = std::max(most, ++window_count[name]);
  EXPECT_EQ(most, 3);
  // The progress's read counter: each tensor's stored bytes once in the layer
  // order, the routed experts again for each batch in the window order.
  EXPECT_EQ(layer.checkpoint_bytes, layer.read_bytes);
  EXPECT_GT(window.checkpoint_bytes, layer.checkpoint_bytes);
  std::printf("%s: layer order %zu tensor reads (each once), window order %zu\n", path.c_str(), layer.reads.size(),
              window.reads.size());
}

TEST(LayerPass, TinyMoeReadsEachTensorOnce) {
  EQ_REQUIRE_SHARED();
  check_model((test::shared_dir() / "models/tinymoe").string());
}

TEST(LayerPass, Qwen3NextSmallReadsEachTensorOnce) {
  EQ_REQUIRE_SHARED();
  check_model((test::shared_dir() / "models/qwen3_next-small").string());
}

TEST(LayerPass, SpillFileIsUnlinkedAtOnce) {
  const auto dir = test::temp_dir("hidden_spill_unlinked");
  HiddenStates states({3, 5}, 4, 1, dir.string());
  ASSERT_TRUE(states.spilled());
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  std::vector<float> a(12), b(20), back(20);
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(i) + 0.5f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = -float(i);
  states.write(1, b.data());
  states.write(0, a.data());
  states.read(1, back.data());
  EXPECT_EQ(back, b);
  states.read(0, back.data());
  EXPECT_EQ(std::vector<float>(back.begin(), back.begin() + 12), a);
  HiddenStates in_memory({3, 5}, 4, 1 << 20, dir.string());
  EXPECT_FALSE(in_memory.spilled());
}

}  // namespace
}  // namespace eq::model
