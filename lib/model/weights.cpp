#include "model/weights.h"

#include <algorithm>

#include "core/error.h"
#include "core/memory.h"
#include "core/shape.h"
#include "io/quantized_source.h"
#include "io/safetensors.h"
#include "model/expert_reader.h"

namespace eq::model {

WeightStore::WeightStore(const io::SourceTensors& source, bool cache_experts)
    : src_(source), cache_experts_(cache_experts) {}

const io::Checkpoint& WeightStore::checkpoint() const { return src_.checkpoint(); }

bool WeightStore::has(const std::string& name) const { return src_.has(name); }

const LinearOp* WeightStore::op(const std::string& name) const {
  if (!ops_) return nullptr;
  auto it = ops_->find(name);
  return it == ops_->end() ? nullptr : it->second.get();
}

Tensor32Ptr WeightStore::get(const std::string& name, const std::vector<int64_t>& expect_shape, bool expert) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cached_.find(name);
    if (it != cached_.end()) return it->second;
  }
  const io::SourceTensors::Info& info = src_.info(name);  // throws naming checkpoint + tensor
  if (!expect_shape.empty() && info.shape != expect_shape)
    invalid("checkpoint " + src_.checkpoint().path() + ": tensor " + name + " has shape " + shape_str(info.shape) +
            ", the config implies " + shape_str(expect_shape));
  auto t = std::make_shared<Tensor32>();
  t->shape = info.shape;
  t->data.resize(info.numel());
  // Dequantized exactly when stored quantized; the mapped pages are dropped
  // after conversion, so the float32 copy replaces them.
  src_.to_f32(name, t->data.data());
  std::lock_guard<std::mutex> lock(mu_);
  if (read_hook_) read_hook_(name);
  if (!keep(name, expert)) return t;
  auto [it, inserted] = cached_.emplace(name, std::move(t));
  return it->second;
}

bool WeightStore::keep(const std::string& name, bool expert) const {
  return !expert || cache_experts_ || (!held_prefix_.empty() && name.starts_with(held_prefix_));
}

void WeightStore::hold_layer(int64_t layer) const {
  std::lock_guard<std::mutex> lock(mu_);
  held_prefix_ = "model.layers." + std::to_string(layer) + ".";
}

void WeightStore::release_layer(int64_t layer) const {
  std::function<void(int64_t)> hook;
  bool keep_all = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string prefix = "model.layers." + std::to_string(layer) + ".";
    if (held_prefix_ == prefix) held_prefix_.clear();
    keep_all = cache_experts_;  // asked to keep every tensor
    if (!keep_all)
      for (auto it = cached_.lower_bound(prefix); it != cached_.end() && it->first.starts_with(prefix);)
        it = cached_.erase(it);
    hook = release_hook_;
  }
  // The layer's float32 weights were freed into the heap's arenas: hand them
  // back, or the next layers' allocations fragment them and the RSS grows.
  if (!keep_all) return_free_memory_to_os();
  if (hook) hook(layer);
}

void WeightStore::set_release_hook(std::function<void(int64_t)> hook) const {
  std::lock_guard<std::mutex> lock(mu_);
  release_hook_ = std::move(hook);
}

void WeightStore::set_read_hook(std::function<void(const std::string&)> hook) const {
  std::lock_guard<std::mutex> lock(mu_);
  read_hook_ = std::move(hook);
}

Tensor32Ptr WeightStore::get_or_make(const std::string& key, bool expert, const std::function<Tensor32()>& make) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cached_.find(key);
    if (it != cached_.end()) return it->second;
  }
  auto t = std::make_shared<Tensor32>(make());
  std::lock_guard<std::mutex> lock(mu_);
  if (read_hook_) read_hook_(key);
  if (!keep(key, expert)) return t;
  auto [it, inserted] = cached_.emplace(key, std::move(t));
  return it->second;
}

Tensor32Ptr WeightStore::get_optional(const std::string& name, const std::vector<int64_t>& expect_shape) const {
  if (!src_.has(name)) return nullptr;
  return get(name, expect_shape);
}

uint64_t WeightStore::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t b = 0;
  for (const auto& [name, t] : cached_) b += t->data.size() * sizeof(float);
  return b;
}

Tensor32Ptr load_norm(const WeightStore& w, const ModelConfig& c, const std::string& name, int64_t dim) {
  if (!c.norm_zero_centred) return w.get(name, {dim});
  return w.get_or_make(name + " (1 + w)", /*expert=*/false, [&] {
    const Tensor32Ptr stored = w.get(name, {dim});
    Tensor32 t;
    t.shape = stored->shape;
    t.data.resize(stored->data.size());
    for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = 1.0f + stored->data[i];
    return t;
  });
}

AttentionWeights load_attention(const WeightStore& w, const ModelConfig& c, int64_t layer, const LinearOps* ops) {
  const std::string p = attn_prefix(layer);
  const int64_t H = c.hidden_size, qd = c.num_heads * c.head_dim, kvd = c.num_kv_heads * c.head_dim;
  AttentionWeights a;
  a.input_norm = load_norm(w, c, "model.layers." + std::to_string(layer) + ".input_layernorm.weight", H);
  auto proj = [&](const std::string& name, int64_t rows, int64_t cols, Tensor32Ptr& t, const LinearOp*& op) {
    if (ops) {
      auto it = ops->find(name);
      if (it != ops->end()) {
        if (it->second->rows() != rows || it->second->cols() != cols)
          invalid("checkpoint " + w.checkpoint().path() + ": quantized " + name + " is [" +
                  std::to_string(it->second->rows()) + ", " + std::to_string(it->second->cols()) +
                  "], the config implies [" + std::to_string(rows) + ", " + std::to_string(cols) + "]");
        op = it->second.get();
        return;
      }
    }
    t = w.get(name, {rows, cols});
  };
  if (c.attention == AttentionKind::kLatent) {
    const int64_t kv_a = c.kv_lora_rank + c.qk_rope_head_dim;
    if (c.q_lora_rank > 0) {
      proj(p + "q_a_proj.weight", c.q_lora_rank, H, a.q_a, a.q_a_op);
      a.q_a_norm = w.get(p + "q_a_layernorm.weight", {c.q_lora_rank});
      proj(p + "q_b_proj.weight", qd, c.q_lora_rank, a.q_b, a.q_b_op);
      a.q_a_bias = w.get_optional(p + "q_a_proj.bias", {c.q_lora_rank});
    } else {
      proj(p + "q_proj.weight", qd, H, a.q, a.q_op);
    }
    proj(p + "kv_a_proj_with_mqa.weight", kv_a, H, a.kv_a, a.kv_a_op);
    a.kv_a_bias = w.get_optional(p + "kv_a_proj_with_mqa.bias", {kv_a});
    a.kv_a_norm = w.get(p + "kv_a_layernorm.weight", {c.kv_lora_rank});
    a.kv_b = w.get(p + "kv_b_proj.weight", {c.num_heads * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank});
    proj(p + "o_proj.weight", H, c.num_heads * c.v_head_dim, a.o, a.o_op);
    a.o_bias = w.get_optional(p + "o_proj.bias", {H});
    if (c.attention_bias && ((c.q_lora_rank > 0 && !a.q_a_bias) || !a.kv_a_bias || !a.o_bias))
      invalid("checkpoint " + w.checkpoint().path() + ": config has attention bias but " + p +
              "{q_a_proj,kv_a_proj_with_mqa,o_proj}.bias is missing");
    return a;
  }
  proj(p + "q_proj.weight", c.attention_output_gate ? 2 * qd : qd, H, a.q, a.q_op);
  proj(p + "k_proj.weight", kvd, H, a.k, a.k_op);
  proj(p + "v_proj.weight", kvd, H, a.v, a.v_op);
  proj(p + "o_proj.weight", H, qd, a.o, a.o_op);
  a.q_bias = w.get_optional(p + "q_proj.bias", {c.attention_output_gate ? 2 * qd : qd});
  a.k_bias = w.get_optional(p + "k_proj.bias", {kvd});
  a.v_bias = w.get_optional(p + "v_proj.bias", {kvd});
  a.o_bias = w.get_optional(p + "o_proj.bias", {H});
  if (c.attention_bias && (!a.q_bias || !a.k_bias || !a.v_bias))
    invalid("checkpoint " + w.checkpoint().path() + ": config has attention bias but " + p +
            "{q,k,v}_proj.bias is missing");
  if (c.attention_out_bias && !a.o_bias)
    invalid("checkpoint " + w.checkpoint().path() + ": config has attention bias but " + p + "o_proj.bias is missing");
  if (c.attention_sinks) a.sinks = w.get(p + "sinks", {c.num_heads});
  if (c.qk_norm == QkNorm::kWhole) {
    a.q_norm = load_norm(w, c, p + "q_norm.weight", qd);
    a.k_norm = load_norm(w, c, p + "k_norm.weight", kvd);
  } else if (c.qk_norm == QkNorm::kPerHead) {
    a.q_norm = load_norm(w, c, p + "q_norm.weight", c.head_dim);
    a.k_norm = load_norm(w, c, p + "k_norm.weight", c.head_dim);
  }
  return a;
}

Tensor32Ptr load_post_attention_norm(const WeightStore& w, const ModelConfig& c, int64_t layer) {
  return load_norm(w, c, "model.layers." + std::to_string(layer) + ".post_attention_layernorm.weight", c.hidden_size);
}

MlpWeights load_expert(const WeightStore& w, const ModelConfig& c, int64_t layer, int64_t e) {
  MlpWeights m;
  m.intermediate = c.moe_intermediate_size;
  m.act = c.expert_activation;
  const io::SourceTensors& src = w.source();
  Tensor32Ptr* weight[3] = {&m.gate, &m.up, &m.down};
  Tensor32Ptr* bias[3] = {&m.gate_bias, &m.up_bias, &m.down_bias};
  for (Proj p : {Proj::kGate, Proj::kUp, Proj::kDown}) {
    const size_t i = static_cast<size_t>(p);
    // Keyed by the per-expert name whatever the layout (expert_reader.h).
    const std::string key = expert_weight_name(c, layer, e, p);
    const int64_t rows = expert_rows(c, p), cols = expert_cols(c, p);
    *weight[i] = w.get_or_make(key, /*expert=*/true, [&] {
      Tensor32 t;
      t.shape = {rows, cols};
      t.data.resize(static_cast<size_t>(rows * cols));
      read_expert_weight(c, src, layer, e, p, t.data.data());
      return t;
    });
    // The layer's biases of this projection are read once and kept (small).
    const Tensor32Ptr all = w.get_or_make(expert_weight_name(c, layer, 0, p) + " (biases of the layer)", /*expert=*/false, [&] {
      Tensor32 t;
      const std::vector<float> b = read_layer_expert_bias(c, src, layer, p);
      t.shape = {static_cast<int64_t>(b.size())};
      t.data.resize(b.size());
      std::copy(b.begin(), b.end(), t.data.data());
      return t;
    });
    if (all->data.size() == 0) continue;
    *bias[i] = w.get_or_make(key + " (bias)", /*expert=*/false, [&] {
      Tensor32 t;
      t.shape = {rows};
      t.data.resize(static_cast<size_t>(rows));
      std::copy_n(all->data.data() + e * rows, rows, t.data.data());
      return t;
    });
  }
  return m;
}

MlpWeights load_dense_mlp(const WeightStore& w, const ModelConfig& c, int64_t layer) {
  MlpWeights m;
  m.intermediate = c.intermediate_size;
  m.act = c.expert_activation;
  // A packed dense MLP runs through its LinearOps (pack --dense-format).
  auto load = [&](Proj p, int64_t rows, int64_t cols, Tensor32Ptr& t, const LinearOp*& op) {
    const std::string name = dense_mlp_name(c, layer, p);
    op = w.op(name);
    if (!op) t = w.get(name, {rows, cols});
  };
  const int64_t I = c.intermediate_size, H = c.hidden_size;
  load(Proj::kGate, I, H, m.gate, m.gate_op);
  load(Proj::kUp, I, H, m.up, m.up_op);
  load(Proj::kDown, H, I, m.down, m.down_op);
  return m;
}

}  // namespace eq::model
