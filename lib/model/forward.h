// The float32 reference forward pass of a MoE decoder (every architecture of
// lib/model/arch/): token embedding; per layer
//   h += attention(rms_norm(h, input_layernorm))
//   h += ffn(rms_norm(h, post_attention_layernorm))   (MoeBlock or dense MLP)
// then the final norm and lm_head (tied to the embedding when configured).
// Processes [batch × seq_len] tokens layer by layer, so each layer's weights
// are converted once per call; positions continue from the KV cache, so the
// same call serves batched prefill and incremental decode.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/kv_cache.h"
#include "model/layer_runner.h"
#include "model/moe_block.h"
#include "model/moe_observer.h"
#include "model/open_checkpoint.h"
#include "model/rope.h"
#include "model/weights.h"

namespace eq::io {
class Checkpoint;
}

namespace eq::model {

struct ModelOptions {
  // Keep the float32 routed experts too (WeightStore): faster decode, about
  // 2x a bf16 checkpoint resident. Off by default.
  bool cache_experts = false;
  // False for a checkpoint without routed-expert weights (a packed folder):
  // they are not checked, and every MoE block must be replaced
  // (set_moe_block) before a forward — the reference blocks would fail
  // naming the missing tensor.
  bool routed_experts = true;
  // Weights applied through their own kernel (quantized attention
  // projections, lm_head) instead of a float32 tensor; such a tensor need not
  // be in the checkpoint.
  LinearOps linear_ops;
  // Tensors read only by their own format (a packed folder's groups and
  // quantized matrices): not checked or decoded as source tensors.
  std::function<bool(std::string_view)> opaque_tensors;
};

class Model {
 public:
  // Opens the checkpoint at `path` (folder or .safetensors) and its config.json,
  // and checks every tensor the architecture needs.
  static std::unique_ptr<Model> open(const std::string& path, const ModelOptions& options = {});
  explicit Model(ModelCheckpoint opened, const ModelOptions& options = {});
  ~Model();

  const ModelConfig& config() const { return config_; }
  const io::Checkpoint& checkpoint() const { return *ckpt_; }
  // The checkpoint's tensors as the model reads them (quantized sources dequantized).
  const io::SourceTensors& source() const { return *source_; }
  const WeightStore& weights() const { return *weights_; }

  // Replaces the MoE block of a MoE layer (packed execution); throws for a dense layer.
  void set_moe_block(int64_t layer, std::unique_ptr<MoeBlock> block);
  MoeBlock& moe_block(int64_t layer);
  // Observer for every MoE block (null to remove). Not owned.
  void set_observer(MoeObserver* observer) { observer_ = observer; }
  MoeObserver* observer() const { return observer_; }
  // Runs the layers it takes instead of this model's code (null: none). Set
  // before the first forward: a cache filled without it lacks its layers.
  void set_layer_runner(std::unique_ptr<LayerRunner> runner) { runner_ = std::move(runner); }
  const RopeTable& rope() const { return rope_; }
  // The matrices applied through their own kernel (ModelOptions::linear_ops).
  const LinearOps& linear_ops() const { return linear_ops_; }

  // Without rows for the layers the runner takes (they keep theirs).
  KvCache new_cache(int64_t batch, int64_t capacity) const;

  // tokens: [batch, seq_len] row-major, batch == cache.batch(); positions are
  // cache.length() .. +seq_len-1 and the cache advances by seq_len.
  // Returns the final-normalized hidden states [batch*seq_len, H].
  FloatBuffer forward_hidden(std::span<const int32_t> tokens, int64_t batch, int64_t seq_len,
                                    KvCache& cache);
  // The steps of forward_hidden, for a pass that runs every window through a
  // layer before the next (model/layer_pass.h); the same operations in the
  // same order, so either order gives the same bits.
  // The embedding rows of `tokens` [n, H] (ids checked; seq_len names the
  // sequence and position of a bad id).
  FloatBuffer embed(std::span<const int32_t> tokens, int64_t seq_len) const;
  // Decoder layer `layer` on h [batch*seq_len, H] in place; positions
  // cache.length() .. +seq_len-1 (the cache does not advance). Through the
  // layer runner when it takes the layer.
  void forward_layer(int64_t layer, float* h, int64_t batch, int64_t seq_len, KvCache& cache);
  // The final norm, in place on h [rows, H].
  void final_norm(float* h, int64_t rows) const;
  // logits [rows, vocab] = hidden [rows, H] · lm_headᵀ.
  void logits(const float* hidden, int64_t rows, float* out) const;
  // forward_hidden + logits of every position: [batch*seq_len, vocab].
  FloatBuffer forward(std::span<const int32_t> tokens, int64_t batch, int64_t seq_len, KvCache& cache);

  // Throws eq::Error naming sequence and position of the first id outside [0, vocab).
  void check_tokens(std::span<const int32_t> tokens, int64_t seq_len, const std::string& label) const;

 private:
  std::unique_ptr<io::Checkpoint> ckpt_;
  ModelConfig config_;
  std::unique_ptr<io::SourceTensors> source_;
  std::unique_ptr<WeightStore> weights_;
  RopeTable rope_;
  LinearOps linear_ops_;
  std::vector<std::unique_ptr<MoeBlock>> moe_blocks_;  // null for dense layers
  MoeObserver* observer_ = nullptr;
  std::unique_ptr<LayerRunner> runner_;

  void check_layer_call(int64_t layer, int64_t batch, int64_t seq_len, const KvCache& cache) const;
  // forward_layer's own code (the layers the runner does not take).
  void forward_layer_here(int64_t layer, float* h, int64_t batch, int64_t seq_len, KvCache& cache);
};

}  // namespace eq::model
