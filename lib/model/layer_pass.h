// A forward pass over many windows in one of two orders:
//   window: each batch of windows through every layer (forward_hidden), so
//           every batch reads every layer's weights again;
//   layer:  every batch through layer l before any enters layer l+1, so each
//           layer's weights are converted once per pass and released after
//           it (WeightStore::hold_layer), and the checkpoint is read once.
// Both run the same batches through the same per-layer code (Model::
// forward_layer), so every floating-point operation and every observer call
// of a layer is the same in both; only the interleaving across layers
// differs. The layer order keeps each batch's hidden states [tokens, H]
// between layers: in memory up to a bound, beyond it in a temporary file
// (HiddenStates).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "model/float_buffer.h"

namespace eq::model {

class Model;

enum class PassOrder { kWindow, kLayer };
// "window" / "layer"; throws eq::Error naming `option` otherwise.
PassOrder parse_pass_order(std::string_view text, const std::string& option = "--pass-order");

// Windows of equal length that run together.
struct WindowBatch {
  std::vector<int32_t> tokens;  // [batch, seq_len] row-major
  int64_t batch = 0, seq_len = 0;
  int64_t rows() const { return batch * seq_len; }
};

// Default bound on the hidden states kept in memory: a quarter of physical memory.
uint64_t default_hidden_memory();

// Float rows of each batch, kept between layers: in memory when they fit in
// `memory_bound` bytes (0: default_hidden_memory()), else in a file created
// privately (mode 0600) in `spill_dir` ("" = $TMPDIR, else /tmp) and unlinked
// at once, so it is gone when the process ends however it ends.
class HiddenStates {
 public:
  HiddenStates(const std::vector<int64_t>& rows, int64_t width, uint64_t memory_bound, const std::string& spill_dir);
  ~HiddenStates();
  HiddenStates(const HiddenStates&) = delete;
  HiddenStates& operator=(const HiddenStates&) = delete;

  bool spilled() const { return fd_ >= 0; }
  uint64_t bytes() const { return offsets_.back() * sizeof(float); }
  // Batch i's rows [rows[i], width].
  void write(size_t i, const float* src);
  void read(size_t i, float* dst) const;

 private:
  int64_t width_;
  std::vector<uint64_t> offsets_;  // in floats, one past each batch
  std::vector<FloatBuffer> memory_;
  int fd_ = -1;
};

struct PassProgress {
  PassOrder order = PassOrder::kLayer;
  int64_t layers_done = 0, layers = 0;  // layer order: layers every batch went through
  int64_t tokens_done = 0, tokens = 0;  // window order: through the model; layer order: through the current layer
  uint64_t checkpoint_bytes = 0;        // stored checkpoint bytes converted since the pass started
};

struct PassOptions {
  PassOrder order = PassOrder::kLayer;
  uint64_t hidden_memory = 0;  // 0 = default_hidden_memory()
  std::string spill_dir;
  // After each batch, and in the layer order after each layer.
  std::function<void(const PassProgress&)> progress;
  // Layer order only: after every batch went through `layer`, before its
  // weights are released (work on the layer's weights that needs all its
  // observations: sensitivity).
  std::function<void(int64_t layer)> after_layer;
};

// Runs every batch through `model` (its observer sees each MoE block) and
// calls on_hidden(i, hidden) with batch i's final-normalized hidden states
// [rows, H], in batch order. KV caches start empty.
void run_pass(Model& model, const std::vector<WindowBatch>& batches, const PassOptions& options,
              const std::function<void(size_t, FloatBuffer&)>& on_hidden);

}  // namespace eq::model
