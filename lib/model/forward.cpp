#include "model/forward.h"

#include <cstring>

#include "core/error.h"
#include "core/thread_pool.h"
#include "io/quantized_source.h"
#include "io/safetensors.h"
#include "model/attention.h"
#include "model/linear_attention.h"
#include "model/mlp.h"
#include "model/ops.h"

namespace eq::model {
namespace {

void rms_norm_parallel(const float* x, int64_t rows, int64_t dim, const float* w, double eps, float* y) {
  default_pool().parallel_for(static_cast<size_t>(rows), 64, [&](size_t r0, size_t r1) {
    rms_norm_rows(x + r0 * dim, static_cast<int64_t>(r1 - r0), dim, w, eps, y + r0 * dim);
  });
}

void add_into(float* h, const float* d, int64_t n) {
  for (int64_t i = 0; i < n; ++i) h[i] += d[i];
}

}  // namespace

std::unique_ptr<Model> Model::open(const std::string& path, const ModelOptions& options) {
  return std::make_unique<Model>(open_checkpoint(path), options);
}

Model::Model(ModelCheckpoint opened, const ModelOptions& options)
    : ckpt_(std::move(opened.checkpoint)),
      config_(std::move(opened.config)),
      rope_(config_),
      linear_ops_(options.linear_ops) {
  std::vector<std::string> provided;
  for (const auto& [name, op] : linear_ops_) {
    // The tied embedding may run as an op only for the logits, reading the stored tensor.
    const bool tied_logits = name == "model.embed_tokens.weight" && config_.tie_word_embeddings && !op->replaces_tensor();
    const auto shape = expected_shape(config_, name);
    if (!shape || shape->size() != 2 || (name == "model.embed_tokens.weight" && !tied_logits))
      unsupported(ckpt_->path() + ": '" + name + "' cannot run as a quantized matrix (attention projections, "
                  "shared experts, dense MLPs and lm_head can)");
    if (op->rows() != (*shape)[0] || op->cols() != (*shape)[1])
      invalid(ckpt_->path() + ": quantized '" + name + "' is [" + std::to_string(op->rows()) + ", " +
              std::to_string(op->cols()) + "], the config implies [" + std::to_string((*shape)[0]) + ", " +
              std::to_string((*shape)[1]) + "]");
    if (op->replaces_tensor()) provided.push_back(name);
  }
  source_ = std::make_unique<io::SourceTensors>(*ckpt_, config_.source_quant, options.opaque_tensors);
  check_against_checkpoint(config_, *source_, options.routed_experts, provided);
  weights_ = std::make_unique<WeightStore>(*source_, options.cache_experts);
  weights_->set_linear_ops(&linear_ops_);
  moe_blocks_.resize(config_.num_layers);
  for (int64_t l = 0; l < config_.num_layers; ++l)
    if (config_.layer_is_moe.at(l)) moe_blocks_[l] = std::make_unique<ReferenceMoeBlock>(config_, *weights_);
}

Model::~Model() = default;

KvCache Model::new_cache(int64_t batch, int64_t capacity) const {
  std::vector<bool> elsewhere(static_cast<size_t>(config_.num_layers), false);
  if (runner_)
    for (int64_t l = 0; l < config_.num_layers; ++l) elsewhere[static_cast<size_t>(l)] = runner_->runs(l);
  return KvCache(config_, batch, capacity, elsewhere);
}

void Model::set_moe_block(int64_t layer, std::unique_ptr<MoeBlock> block) {
  if (layer < 0 || layer >= config_.num_layers || !moe_blocks_[layer])
    invalid("set_moe_block: layer " + std::to_string(layer) + " is not a MoE layer");
  moe_blocks_[layer] = std::move(block);
}

MoeBlock& Model::moe_block(int64_t layer) {
  if (layer < 0 || layer >= config_.num_layers || !moe_blocks_[layer])
    invalid("moe_block: layer " + std::to_string(layer) + " is not a MoE layer");
  return *moe_blocks_[layer];
}

void Model::check_tokens(std::span<const int32_t> tokens, int64_t seq_len, const std::string& label) const {
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= config_.vocab_size)
      invalid(label + ": token id " + std::to_string(tokens[i]) + " at sequence " +
              std::to_string(static_cast<int64_t>(i) / seq_len) + ", position " +
              std::to_string(static_cast<int64_t>(i) % seq_len) + " is outside the vocabulary [0, " +
              std::to_string(config_.vocab_size) + ")");
}

FloatBuffer Model::forward_hidden(std::span<const int32_t> tokens, int64_t batch, int64_t seq_len,
                                         KvCache& cache) {
  const int64_t n = batch * seq_len;
  if (batch != cache.batch() || static_cast<int64_t>(tokens.size()) != n || seq_len <= 0)
    invalid("forward: got " + std::to_string(tokens.size()) + " tokens for batch " + std::to_string(batch) +
            " x seq_len " + std::to_string(seq_len) + " (cache batch " + std::to_string(cache.batch()) + ")");
  FloatBuffer h = embed(tokens, seq_len);
  for (int64_t l = 0; l < config_.num_layers;) {
    check_layer_call(l, batch, seq_len, cache);
    if (!runner_ || !runner_->runs(l)) {
      forward_layer_here(l, h.data(), batch, seq_len, cache);
      ++l;
      continue;
    }
    int64_t last = l + 1;  // the runner's layers from l on, in one call
    while (last < config_.num_layers && runner_->runs(last)) ++last;
    runner_->forward_layers(l, last, h.data(), batch, seq_len, cache);
    l = last;
  }
  cache.advance(seq_len);
  final_norm(h.data(), n);
  return h;
}

FloatBuffer Model::embed(std::span<const int32_t> tokens, int64_t seq_len) const {
  const int64_t H = config_.hidden_size, n = static_cast<int64_t>(tokens.size());
  check_tokens(tokens, seq_len, "forward");
  FloatBuffer h(n * H);
  Tensor32Ptr embed = weights_->get("model.embed_tokens.weight", {config_.vocab_size, H});
  for (int64_t r = 0; r < n; ++r)
    std::memcpy(h.data() + r * H, embed->data.data() + static_cast<int64_t>(tokens[r]) * H, H * sizeof(float));
  return h;
}

void Model::check_layer_call(int64_t l, int64_t batch, int64_t seq_len, const KvCache& cache) const {
  const ModelConfig& c = config_;
  if (batch != cache.batch() || seq_len <= 0 || l < 0 || l >= c.num_layers)
    invalid("forward: layer " + std::to_string(l) + " of " + std::to_string(c.num_layers) + ", batch " +
            std::to_string(batch) + " x seq_len " + std::to_string(seq_len) + " (cache batch " +
            std::to_string(cache.batch()) + ")");
  if (cache.length() + seq_len > cache.capacity())
    invalid("forward: positions up to " + std::to_string(cache.length() + seq_len) +
            " exceed the KV cache capacity " + std::to_string(cache.capacity()));
  rope_.reserve(cache.length() + seq_len);
}

void Model::forward_layer(int64_t l, float* h, int64_t batch, int64_t seq_len, KvCache& cache) {
  check_layer_call(l, batch, seq_len, cache);
  if (runner_ && runner_->runs(l))
    runner_->forward_layers(l, l + 1, h, batch, seq_len, cache);
  else
    forward_layer_here(l, h, batch, seq_len, cache);
}

void Model::forward_layer_here(int64_t l, float* h, int64_t batch, int64_t seq_len, KvCache& cache) {
  const ModelConfig& c = config_;
  const int64_t H = c.hidden_size, n = batch * seq_len, start = cache.length();
  FloatBuffer xn(n * H), delta(n * H);
  if (c.layer_linear(l)) {
    const LinearAttentionWeights lw = load_linear_attention(*weights_, c, l);
    rms_norm_parallel(h, n, H, lw.input_norm->data.data(), c.rms_norm_eps, xn.data());
    linear_attention_forward(c, lw, l, xn.data(), batch, seq_len, cache, delta.data());
    add_into(h, delta.data(), n * H);
  } else {
    const AttentionWeights aw = load_attention(*weights_, c, l, linear_ops_.empty() ? nullptr : &linear_ops_);
    rms_norm_parallel(h, n, H, aw.input_norm->data.data(), c.rms_norm_eps, xn.data());
    attention_forward(c, aw, rope_, l, xn.data(), batch, seq_len, cache, delta.data());
    add_into(h, delta.data(), n * H);
  }
  Tensor32Ptr post_norm = load_post_attention_norm(*weights_, c, l);
  rms_norm_parallel(h, n, H, post_norm->data.data(), c.rms_norm_eps, xn.data());
  if (moe_blocks_[l]) {
    MoeCall call{l, batch, seq_len, start, observer_};
    moe_blocks_[l]->forward(call, xn.data(), delta.data());
  } else {
    mlp_forward(load_dense_mlp(*weights_, c, l), xn.data(), n, H, delta.data());
  }
  add_into(h, delta.data(), n * H);
}

void Model::final_norm(float* h, int64_t rows) const {
  Tensor32Ptr norm = load_norm(*weights_, config_, "model.norm.weight", config_.hidden_size);
  rms_norm_parallel(h, rows, config_.hidden_size, norm->data.data(), config_.rms_norm_eps, h);
}

void Model::logits(const float* hidden, int64_t rows, float* out) const {
  // Tied (as HF ties them): the embedding matrix, whatever lm_head.weight holds.
  const std::string name = config_.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
  if (auto it = linear_ops_.find(name); it != linear_ops_.end()) {
    it->second->apply(hidden, rows, out);
    return;
  }
  Tensor32Ptr head = weights_->get(name, {config_.vocab_size, config_.hidden_size});
  linear(hidden, rows, config_.hidden_size, head->data.data(), config_.vocab_size, nullptr, out);
}

FloatBuffer Model::forward(std::span<const int32_t> tokens, int64_t batch, int64_t seq_len, KvCache& cache) {
  FloatBuffer hidden = forward_hidden(tokens, batch, seq_len, cache);
  FloatBuffer out(batch * seq_len * config_.vocab_size);
  logits(hidden.data(), batch * seq_len, out.data());
  return out;
}

}  // namespace eq::model
