// float32 weights for the reference forward, converted from the mmap'd
// checkpoint (bf16/fp16/fp32) when used. A converted tensor is either cached
// for the life of the store or handed out and dropped after use; either way
// its checkpoint pages are released after conversion, so the process never
// holds the float32 copy *and* the mapped bytes. By default the small
// non-expert tensors are cached and routed experts (most of the bytes) are
// converted per use, which keeps peak RSS near one layer of float32 experts
// plus activations (a bf16->f32 conversion costs far less than the matmuls).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "model/activation.h"
#include "model/config.h"
#include "model/float_buffer.h"
#include "model/linear_op.h"

namespace eq::io {
class Checkpoint;
class SourceTensors;
}

namespace eq::model {

struct Tensor32 {
  std::vector<int64_t> shape;
  FloatBuffer data;
};
using Tensor32Ptr = std::shared_ptr<const Tensor32>;

class WeightStore {
 public:
  // `cache_experts`: also keep routed-expert tensors (faster repeated decode,
  // ~2x a bf16 checkpoint resident). Non-expert tensors are always kept.
  // Reads through `source` (quantized source tensors dequantized exactly).
  WeightStore(const io::SourceTensors& source, bool cache_experts);

  // Converts (or returns the cached) tensor; throws eq::Error naming the
  // tensor and checkpoint when absent or when its shape differs from
  // `expect_shape` (empty = no check). Thread-safe.
  // `expert`: a routed-expert tensor (cached only with cache_experts).
  Tensor32Ptr get(const std::string& name, const std::vector<int64_t>& expect_shape = {},
                  bool expert = false) const;
  // The cached tensor under `key`, or the one `make` builds (cached when not
  // `expert`, or with cache_experts): for tensors derived from stored ones,
  // such as one expert of a stacked tensor. Thread-safe.
  Tensor32Ptr get_or_make(const std::string& key, bool expert, const std::function<Tensor32()>& make) const;
  // The LinearOps applied instead of checkpoint tensors (the model's; not
  // owned); op() is null for a name without one.
  void set_linear_ops(const LinearOps* ops) { ops_ = ops; }
  const LinearOp* op(const std::string& name) const;
  // nullptr when the checkpoint has no such tensor (optional biases).
  Tensor32Ptr get_optional(const std::string& name, const std::vector<int64_t>& expect_shape = {}) const;
  bool has(const std::string& name) const;

  const io::Checkpoint& checkpoint() const;
  const io::SourceTensors& source() const { return src_; }
  // Bytes of float32 data currently cached.
  uint64_t cached_bytes() const;

  // A pass that runs every window through one layer before the next
  // (model/layer_pass.h) holds that layer: its routed experts are cached too,
  // so the layer is read from the checkpoint once, and release_layer drops
  // every tensor of the layer (cached_bytes falls back to the rest), unless
  // the store keeps everything (cache_experts).
  void hold_layer(int64_t layer) const;
  void release_layer(int64_t layer) const;
  // Called with the name (or get_or_make key) of each tensor converted, as it
  // is converted (tests count checkpoint reads); null for none.
  void set_read_hook(std::function<void(const std::string&)> hook) const;
  // Called with the layer at the end of each release_layer (a pass has left
  // it): the owner of other memory of that layer (a packed model's mapped
  // experts) lets it go too. Null for none.
  void set_release_hook(std::function<void(int64_t)> hook) const;

 private:
  const io::SourceTensors& src_;
  bool cache_experts_;
  const LinearOps* ops_ = nullptr;
  mutable std::mutex mu_;
  mutable std::map<std::string, Tensor32Ptr> cached_;
  mutable std::string held_prefix_;  // "model.layers.<l>." of the held layer; "" = none
  mutable std::function<void(const std::string&)> read_hook_;
  mutable std::function<void(int64_t)> release_hook_;
  bool keep(const std::string& name, bool expert) const;  // with mu_ held
};


// ---- per-layer weight groups (shapes checked against the config) ----

struct AttentionWeights {
  Tensor32Ptr input_norm;              // [H]
  // AttentionKind::kGrouped:
  Tensor32Ptr q, k, v, o;              // [nh*hd, H], [nkv*hd, H], [nkv*hd, H], [H, nh*hd]
  Tensor32Ptr q_bias, k_bias, v_bias, o_bias;  // optional (present in the checkpoint -> used)
  Tensor32Ptr q_norm, k_norm;          // [hd] per head, or [nh*hd]/[nkv*hd] whole (ModelConfig::qk_norm); else null
  Tensor32Ptr sinks;                   // [nh] (ModelConfig::attention_sinks); else null
  // AttentionKind::kLatent (o and o_bias as above, o: [H, nh*v_head_dim]):
  // q is q_proj [nh*hd, H] without a query LoRA, else
  Tensor32Ptr q_a, q_a_norm, q_b;      // [q_lora, H], [q_lora], [nh*hd, q_lora]
  Tensor32Ptr kv_a, kv_a_norm, kv_b;   // [kv_lora + rope, H], [kv_lora], [nh*(nope + v), kv_lora]
  Tensor32Ptr q_a_bias, kv_a_bias;     // optional, as the biases above
  // Set instead of the tensor when the projection is a LinearOp (quantized).
  const LinearOp *q_op = nullptr, *k_op = nullptr, *v_op = nullptr, *o_op = nullptr;
  const LinearOp *q_a_op = nullptr, *q_b_op = nullptr, *kv_a_op = nullptr;
};

// One gated MLP: down(act(gate x + gate_bias, up x + up_bias)) + down_bias
// (act: model/activation.h; SwiGLU without biases unless set).
struct MlpWeights {
  Tensor32Ptr gate, up;  // [I, H]
  Tensor32Ptr down;      // [H, I]
  int64_t intermediate = 0;
  Tensor32Ptr gate_bias, up_bias;  // [I]; null = none
  Tensor32Ptr down_bias;           // [H]; null = none
  Activation act;
  // Set instead of gate/up/down when the projection is a LinearOp (a packed
  // shared expert or dense MLP); mlp_forward only.
  const LinearOp *gate_op = nullptr, *up_op = nullptr, *down_op = nullptr;
};

// An RMSNorm weight [dim] as applied: w, or 1 + w with ModelConfig::norm_zero_centred.
Tensor32Ptr load_norm(const WeightStore& w, const ModelConfig& c, const std::string& name, int64_t dim);

// Projections named in `ops` are taken from there (q/k/v/o stay null).
// With attention_output_gate q is [2*nh*hd, H]: per head [query | gate].
AttentionWeights load_attention(const WeightStore& w, const ModelConfig& c, int64_t layer,
                                const LinearOps* ops = nullptr);
Tensor32Ptr load_post_attention_norm(const WeightStore& w, const ModelConfig& c, int64_t layer);
MlpWeights load_expert(const WeightStore& w, const ModelConfig& c, int64_t layer, int64_t expert);
MlpWeights load_dense_mlp(const WeightStore& w, const ModelConfig& c, int64_t layer);

}  // namespace eq::model
