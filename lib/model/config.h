// A checkpoint's config.json as one generic description: the architecture
// file of its model_type (lib/model/arch/) parses it, and everything
// downstream reads these fields instead of branching on the model_type.
// Checked against the tensors present (a missing tensor or wrong shape is an
// error naming it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "io/quantized_source.h"
#include "model/activation.h"
#include "model/arch/architecture.h"

namespace eq::model {

// YaRN scaling of the RoPE frequencies (rope_type "yarn"): dims that turn
// fewer than beta_slow times over original_max_position_embeddings are
// interpolated by `factor`, those turning more than beta_fast times are kept,
// with a linear ramp between (lib/model/rope.cpp).
struct YarnScaling {
  double factor = 0;  // 0: plain RoPE
  int64_t original_max_position_embeddings = 0;
  double beta_fast = 32, beta_slow = 1;
  bool truncate = true;           // the ramp's ends rounded outward to whole dims
  double attention_factor = 1.0;  // cos and sin are multiplied by it
  bool active() const { return factor > 0; }
};

// The gated delta net of a linear-attention layer (layer_is_linear):
// num_key_heads query/key heads of key_head_dim, num_value_heads value heads
// of value_head_dim (each key head serves num_value_heads / num_key_heads
// consecutive value heads), a causal depthwise conv1d of conv_kernel taps
// over the q/k/v channels.
struct LinearAttentionConfig {
  int64_t num_key_heads = 0, num_value_heads = 0, key_head_dim = 0, value_head_dim = 0, conv_kernel = 0;
  // true: in_proj_qkvz and in_proj_ba, rows grouped per key head
  // ([q | k | v of its value heads | z of its value heads], [b | a]);
  // false: in_proj_qkv (all q, all k, all v), in_proj_z, in_proj_b, in_proj_a.
  bool fused_projections = false;
  int64_t key_dim() const { return num_key_heads * key_head_dim; }
  int64_t value_dim() const { return num_value_heads * value_head_dim; }
  int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }  // channels of the conv: q, k, v
};

// Which projection of an expert (SwiGLU: down(silu(gate(x)) * up(x))).
enum class Proj { kGate = 0, kUp = 1, kDown = 2 };

struct ModelConfig {
  const Architecture* arch = nullptr;  // the row of model_type (never null after parsing)
  std::string model_type;              // as in config.json
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t num_experts = 0;
  int64_t top_k = 0;
  int64_t moe_intermediate_size = 0;     // per routed expert
  int64_t intermediate_size = 0;         // dense MLP layers
  int64_t shared_expert_intermediate_size = 0;  // 0 = no shared expert
  bool shared_expert_gated = false;      // scaled by sigmoid(x · shared_expert_gate) per token
  bool norm_topk_prob = false;           // renormalize the top-k weights to sum 1
  RouterScoring router_scoring = RouterScoring::kSoftmax;
  bool router_bias = false;              // the router linear has a bias ("<router>.bias", [E])
  bool router_correction_bias = false;   // "<router>.e_score_correction_bias" [E], added for selection only
  int64_t router_groups = 1;             // experts split into this many consecutive groups (n_group)
  int64_t router_topk_groups = 1;        // experts are chosen only from this many best groups (topk_group)
  double routed_scaling_factor = 1.0;    // the combine weights are multiplied by it
  double rope_theta = 10000.0;
  // RoPE turns rope_dim dims of each query/key head: the first rope_dim
  // (head_dim x partial_rotary_factor), or with kLatent the last
  // qk_rope_head_dim. rope_interleave: the turned pairs are (2i, 2i+1) and are
  // regrouped as (i, i + rope_dim/2) before the rotate-half rotation.
  int64_t rope_dim = 0;
  bool rope_interleave = false;
  YarnScaling rope_yarn;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  bool attention_bias = false;           // q/k/v biases required
  bool attention_out_bias = false;       // o_proj bias required too
  // One learned logit per query head ("self_attn.sinks" [num_heads]) joins
  // the softmax of every query: it takes probability mass and adds no value.
  bool attention_sinks = false;
  // Per layer: how many positions a query sees, itself included (keys j with
  // j > position - window); 0 = every past position.
  std::vector<int64_t> attention_window;
  QkNorm qk_norm = QkNorm::kNone;
  AttentionKind attention = AttentionKind::kGrouped;
  int64_t v_head_dim = 0;                // value width of a head (head_dim unless kLatent)
  // kLatent only; head_dim = qk_nope_head_dim + qk_rope_head_dim and
  // num_kv_heads = num_heads.
  int64_t q_lora_rank = 0;               // 0: q_proj, no low-rank query
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0, qk_rope_head_dim = 0;
  double latent_norm_eps = 1e-6;         // of q_a_layernorm and kv_a_layernorm
  double attention_scale_factor = 1.0;   // softmax scale = head_dim^-0.5 x this
  double clip_qkv = 0.0;                 // clamp q/k/v to ±clip_qkv after the norms when > 0
  int64_t max_position_embeddings = 0;
  std::vector<bool> layer_is_moe;        // from decoder_sparse_step / mlp_only_layers
  // q_proj gives each head [query (head_dim) | gate (head_dim)]; the attention
  // output is multiplied by sigmoid(gate) before o_proj.
  bool attention_output_gate = false;
  // RMSNorm weights are stored around 0 and applied as (1 + w): the layer
  // norms, the final norm and the q/k norms (load_norm in weights.h).
  bool norm_zero_centred = false;
  // Layers whose token mixer is a gated delta net (linear_attention.h)
  // instead of self-attention (layer_types); empty: none.
  std::vector<bool> layer_is_linear;
  LinearAttentionConfig linear;
  // Multi-token-prediction modules stored as model.layers.{num_layers ..
  // num_layers + num_mtp_layers - 1}: never read by any command.
  int64_t num_mtp_layers = 0;
  std::string source_dtype;              // "bfloat16", ...
  io::SourceQuantization source_quant;   // config.json's quantization_config (fp8 blocks, mxfp4, none)
  Activation expert_activation;          // of routed experts, shared experts and dense MLPs

  // True when token ids are bytes (vocab 256): plain text is accepted as input.
  bool byte_level() const { return vocab_size == 256; }
  int64_t num_moe_layers() const;
  // attention_window of `layer` (0 when the config sets none).
  int64_t layer_attention_window(int64_t layer) const;
  // Whether `layer` is a gated delta net (layer_is_linear; false when it is empty).
  bool layer_linear(int64_t layer) const;
  // Every parsed field as (name, value) in the order of its table
  // (config_fields.h): what must agree between a packed folder's config and
  // its source's.
  std::vector<std::pair<std::string, std::string>> fields() const;
};

// Parses config.json (the fields every decoder shares, then the
// architecture's own); `path` names the file in errors. Throws eq::Error
// listing the supported model types for an unknown one.
ModelConfig parse_config(const nlohmann::json& j, const std::string& path);
// Parses config.json text (depth-guarded JSON, then parse_config).
ModelConfig parse_config_text(std::string_view text, const std::string& path);
// A config.json is a few kilobytes; anything past this is refused before it
// is read (every reader of config.json uses this one cap).
inline constexpr uint64_t kMaxConfigBytes = 16ull << 20;
// Reads <folder>/config.json.
ModelConfig load_config(const std::string& folder);

// Bounds on what a config may declare, checked before anything is sized from
// it (per-layer tables, per-expert allocations). Generous: the largest MoE
// models have ~100 layers, 512 experts per layer and 256k-token vocabularies.
inline constexpr int64_t kMaxConfigLayers = 4096;
inline constexpr int64_t kMaxConfigExperts = 65536;
inline constexpr int64_t kMaxConfigLayerExperts = 1 << 22;  // num_layers x num_experts
inline constexpr int64_t kMaxConfigDim = 1 << 24;          // vocab, hidden and intermediate sizes, heads
std::vector<std::string> supported_model_types();

// ---- tensor naming (the architecture's TensorNaming) ----
// "model.layers.N.<moe>.", the prefix of layer N's router and experts.
std::string moe_prefix(const ModelConfig& c, int64_t layer);
std::string router_name(const ModelConfig& c, int64_t layer);
// The router's bias and selection-only correction bias (when the config has them).
std::string router_bias_name(const ModelConfig& c, int64_t layer);
std::string router_correction_bias_name(const ModelConfig& c, int64_t layer);
std::string expert_weight_name(const ModelConfig& c, int64_t layer, int64_t expert, Proj p);
// Dense MLP of a non-MoE layer ("model.layers.L.mlp.gate_proj.weight").
std::string dense_mlp_name(const ModelConfig& c, int64_t layer, Proj p);
// The shared expert and its sigmoid gate.
std::string shared_expert_name(const ModelConfig& c, int64_t layer, Proj p);
std::string shared_expert_gate_name(const ModelConfig& c, int64_t layer);
// Prefix of layer L's attention tensors ("model.layers.L.self_attn.").
std::string attn_prefix(int64_t layer);
// Prefix of a linear-attention layer's tensors ("model.layers.L.linear_attn.").
std::string linear_attn_prefix(int64_t layer);

// Verifies every tensor the architecture needs exists with the right shape.
// Throws eq::Error naming the first missing/mismatched tensor, and the checkpoint.
// `routed_experts` false: routed-expert weights are not required (a packed
// folder holds them in bit groups). Names in `provided` are not required
// either (the forward applies them as LinearOps; their shapes are checked by
// whoever builds them).
void check_against_checkpoint(const ModelConfig& c, const io::SourceTensors& ckpt, bool routed_experts = true,
                              const std::vector<std::string>& provided = {});
// The [rows, cols] the config implies for a 2-D weight tensor of the attention
// projection, lm_head, the embedding, a shared expert or a dense MLP; nullopt
// for other names. These are the matrices that may run as a LinearOp.
std::optional<std::vector<int64_t>> expected_shape(const ModelConfig& c, const std::string& name);
// Every matrix the forward may apply as a LinearOp, with its [rows, cols]: the
// attention projections of every layer, the dense MLPs, the shared experts,
// and the logits' matrix (lm_head, or the embedding when they are tied).
std::vector<std::pair<std::string, std::vector<int64_t>>> linear_matrices(const ModelConfig& c);

// A tensor of a multi-token-prediction layer (model.layers.N with N in
// [num_layers, num_layers + num_mtp_layers)): allowed in a checkpoint, never read.
bool is_mtp_tensor(const ModelConfig& c, const std::string& name);

// Parameter breakdown counted from the tensors of the checkpoint.
struct ParamBreakdown {
  uint64_t routed_experts = 0, shared_experts = 0, attention = 0, embeddings_head = 0, norms_router = 0,
           dense_mlp = 0, other = 0;
  uint64_t routed_experts_bytes = 0, shared_experts_bytes = 0, attention_bytes = 0, embeddings_head_bytes = 0,
           norms_router_bytes = 0, dense_mlp_bytes = 0, other_bytes = 0;
  uint64_t total() const {
    return routed_experts + shared_experts + attention + embeddings_head + norms_router + dense_mlp + other;
  }
  uint64_t total_bytes() const {
    return routed_experts_bytes + shared_experts_bytes + attention_bytes + embeddings_head_bytes +
           norms_router_bytes + dense_mlp_bytes + other_bytes;
  }
};
ParamBreakdown count_parameters(const ModelConfig& c, const io::SourceTensors& ckpt);
// Which part a tensor belongs to: "routed_experts", "shared_experts",
// "attention", "embeddings_head", "norms_router", "dense_mlp" or "other"
// (which holds the multi-token-prediction layers).
std::string_view tensor_part(const ModelConfig& c, const std::string& name);

}  // namespace eq::model
